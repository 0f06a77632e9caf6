"""One node crossing by part, in one process: what a packet of messages costs a node.

``hop.py``'s chain (``a`` ← ``b`` ← ``c`` over zero-latency virtual links, a subscriber at
``a``) carries warm-up messages, then one more packet of ``--batch`` messages (default 1: a
round trip's case; 100: a stream's) from ``c``; the packet ``b`` receives for them is captured.
That packet is then handed to ``b``'s relay ``--replays`` times, as it came off the network,
and each part of ``b``'s work is timed, per message:

* *framing*: the frame taken from the bytes (``FrameDecoder.feed`` and ``next_value``, with the
  relay's check of the packet's length), without the decoding;
* *decoding*: ``Decoder.decode`` of the frame: msgpack and the codec's hooks, which make the
  records and look up the references;
* *relay checks and queueing*: the rest of ``Relay.receive``: the packet's and each event's
  checks, and queueing the event for its target (the relay's receive minus the two above); for
  a message that follows a route (:mod:`feds.routes`), also sending it on, encoded for ``a``;
* *turns and packet out*: the node's turns for the event (its rules, the fragment's dispatch,
  the proxy of the next hop encoding it; none for a routed message) and the packet for ``a``
  taken from the uplink relay.

With ``--changes`` the node is crossed by a packet of ``--batch`` assertions, then by the
packet of their retractions, replayed as a pair (the second undoes the first): the path of an
assertion change, which no route shortens, per change; the floor node carries no assertions.

Beside them (messages only), the same for a floor node (``floor.py``'s sans-IO router:
decode, one dict lookup, encode, the frame written) routing a frame of as many messages with
the same payload. Also Python calls per message (cProfile, built-ins included) for both.
Medians of ``--reps`` repetitions, interleaved across protocols; the replays check that ``b``
sends every event on each time, so a replay that is not a crossing fails the run::

    .venv/bin/python benchmarks/crossing.py                       # about 20 seconds
    .venv/bin/python benchmarks/crossing.py --batch 100           # the throughput's case
    .venv/bin/python benchmarks/crossing.py --protocols aggregate-subs --replays 50000
    .venv/bin/python benchmarks/crossing.py --cool 4             # caches cooled between crossings
    .venv/bin/python benchmarks/crossing.py --changes --batch 100 # assertions, then retractions

With ``--cool MB``, each crossing (and each step of the framing and decoding loops) is preceded,
untimed, by writing each cache line of ``MB`` MiB and reading a key of as many small dicts (4,000
per MiB): the caches are then about as cold as a node's are between two packets of a round trip,
when the chain's other processes have run on its core. A crossing then costs what its working
set costs (the code and data it touches), which an instruction count and a hot loop do not show.
The whole crossing is measured as it runs; of its parts, decoding is measured from cold caches
too, where in the crossing framing has warmed some of them, so the split leans to decoding.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floor import SUBSCRIBE, Port, Router
from benchmarks.hop import BENCH, PAYLOAD, Arrivals, Chain, measure
from feds.protocols import protocol_names
from feds.relay import Relay
from feds.values import Record

PARTS = ("framing", "decoding", "relay checks and queueing", "turns and packet out")
WARM_UP = 200


def _warm() -> None:
    """Leave the caches as the last step left them (the default: a hot loop)."""


class Cooler:
    """Evicts what the last step left in the caches, as other processes running in between do:
    writes every cache line of ``mib`` MiB and reads one key of each of ``4000 * mib`` small
    dicts (the objects' memory, and the interpreter's for the loop)."""

    def __init__(self, mib: float) -> None:
        self.lines = bytearray(int(mib * 2**20))
        self.blank = bytes(len(self.lines[::64]))
        self.dicts = [{"key": i} for i in range(int(4000 * mib))]

    def __call__(self) -> None:
        self.lines[::64] = self.blank
        for d in self.dicts:
            d["key"]


class Crossing:
    """The middle node of a chain, and what it receives for ``batch`` messages; or, with
    ``changes``, the packet of ``batch`` assertions and the packet of their retractions, which
    replay as a pair (the second undoes the first, so each replay finds ``b`` as it was)."""

    def __init__(self, protocol: str, batch: int = 1, changes: bool = False) -> None:
        self.batch = batch
        self.events = 2 * batch if changes else batch  # per replay
        arrivals = Arrivals()
        self.chain = chain = Chain(protocol, 3, arrivals, batch=batch, one_packet=batch == 1)
        measure(chain, arrivals, "batched_changes" if changes else "messages", WARM_UP, 0)
        self.relay: Relay = chain.network.links[1].parent_relay  # b's end of the link to c
        self.uplink: Relay = chain.network.links[0].child_relay  # b's end of the link to a
        captured: list[bytes] = []
        receive = self.relay.receive

        def capture(data: bytes) -> None:
            captured.append(bytes(data))
            receive(data)

        self.relay.receive = capture  # type: ignore[method-assign]
        values = [Record(BENCH, (2 * WARM_UP + i, PAYLOAD)) for i in range(batch)]
        try:
            (chain.batched_changes if changes else chain.messages)(values)
        finally:
            del self.relay.receive
        if len(captured) != 1 + changes:
            what = "assertions and retractions" if changes else "messages"
            raise SystemExit(f"{protocol}: {len(captured)} packets reached b for {batch} {what}")
        self.packets = captured
        self.scheduler = chain.scheduler

    def measure(
        self, replays: int, meter: Callable[[], Meter], cool: Callable[[], None] = _warm
    ) -> dict[str, float]:
        """Each part's cost (:data:`PARTS`) per event, by new meters made by ``meter``,
        ``cool`` called before each timed step."""
        relay, uplink, scheduler, packets = self.relay, self.uplink, self.scheduler, self.packets
        received, turns = meter(), meter()
        sent = uplink.stats.events_out
        gc.collect()
        for _ in range(replays):
            for data in packets:
                cool()
                received.start()
                relay.receive(data)
                received.stop()
                turns.start()
                scheduler.run_until_idle()
                uplink.data_to_send()
                turns.stop()
        if uplink.stats.events_out - sent != replays * self.events:
            raise SystemExit(
                f"{replays} replays of {self.events} events sent"
                f" {uplink.stats.events_out - sent} events on"
            )
        # Decoding alone holds the references it decodes (a receive releases them once the
        # events are queued): harmless to a benchmark, so it is measured after the crossings.
        frames = relay._frames
        framed, decoded = meter(), meter()
        for _ in range(replays):
            for data in packets:
                cool()
                framed.start()
                frames.feed(data)
                frames.next_value()
                framed.stop()
        bodies = [data[4:] for data in packets]
        for _ in range(replays):
            for body in bodies:
                cool()
                decoded.start()
                frames.decoder.decode(body)
                decoded.stop()
        events = replays * self.events
        return {
            "framing": framed.per(events) - decoded.per(events),
            "decoding": decoded.per(events),
            "relay checks and queueing": received.per(events) - framed.per(events),
            "turns and packet out": turns.per(events),
        }


class FloorNode:
    """A floor node's router between two ports, one of which asked for the subject ``bench``,
    and a frame of ``batch`` messages for it from the other."""

    def __init__(self, batch: int = 1) -> None:
        self.batch = batch
        self.router = router = Router()
        self.source, self.out = _Written(), _Written()
        router.attach(self.source)
        router.attach(self.out)
        router.route(self.out, _frame([[SUBSCRIBE, BENCH.name]]))
        self.data = _frame([[BENCH.name, [WARM_UP + i, PAYLOAD]] for i in range(batch)])

    def measure(
        self, replays: int, meter: Callable[[], Meter], cool: Callable[[], None] = _warm
    ) -> float:
        """The cost of routing the frame, per message, checking that each was written on;
        ``cool`` called before each."""
        route, source, data = self.router.route, self.source, self.data
        routed = meter()
        before = self.out.written
        gc.collect()
        for _ in range(replays):
            cool()
            routed.start()
            for port in route(source, data):
                port.flush()
            routed.stop()
        if self.out.written - before != replays:
            raise SystemExit("the floor node did not route every frame")
        return routed.per(replays * self.batch)


class _Written(Port):
    """A port that counts the frames written to it."""

    written = 0

    def write(self, data: bytes) -> None:
        self.written += 1


def _frame(items: list) -> bytes:
    body = msgpack.packb(items)
    return len(body).to_bytes(4, "big") + body


class Meter:
    """Adds up what the code between each :meth:`start` and :meth:`stop` costs."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def per(self, count: int) -> float:
        """The total over ``count``."""
        raise NotImplementedError


class Clock(Meter):
    """In microseconds of wall time."""

    def __init__(self) -> None:
        self.total = 0
        self._began = 0

    def start(self) -> None:
        self._began = time.perf_counter_ns()

    def stop(self) -> None:
        self.total += time.perf_counter_ns() - self._began

    def per(self, count: int) -> float:
        return self.total / count / 1000


class Calls(Meter):
    """In Python function calls, built-ins included (cProfile; its own ``disable`` not)."""

    def __init__(self) -> None:
        self.profiler = cProfile.Profile()

    def start(self) -> None:
        self.profiler.enable()

    def stop(self) -> None:
        self.profiler.disable()

    def per(self, count: int) -> float:
        rows = pstats.Stats(self.profiler).stats  # type: ignore[attr-defined]
        total = sum(row[1] for key, row in rows.items() if key[2] != _DISABLE)
        return total / count


_DISABLE = "<method 'disable' of '_lsprof.Profiler' objects>"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default="all", help="comma-separated, or all")
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="messages (or assertions) in the packet (default 1, as a round trip)",
    )
    parser.add_argument(
        "--changes",
        action="store_true",
        help="a packet of assertions, then one of their retractions, instead of messages"
        " (no floor node: it carries no assertions)",
    )
    parser.add_argument(
        "--replays",
        type=int,
        help="crossings per repetition (default: 20,000 events' worth, at least 100)",
    )
    parser.add_argument("--reps", type=int, default=5, help="repetitions (median; default 5)")
    parser.add_argument(
        "--cool",
        type=float,
        metavar="MB",
        help="cool the caches before each timed step by touching MB MiB (default: a hot loop;"
        " replays then default to 500)",
    )
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    if args.cool is not None and args.cool <= 0:
        parser.error("--cool must be a positive number of MiB")
    cool = _warm if args.cool is None else Cooler(args.cool)
    per_replay = 2 * args.batch if args.changes else args.batch
    replays = args.replays or (500 if args.cool else max(100, 20000 // per_replay))
    names = list(protocol_names()) if args.protocols == "all" else args.protocols.split(",")
    crossings = {name: Crossing(name, args.batch, args.changes) for name in names}
    floor = None if args.changes else FloorNode(args.batch)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    floor_samples: list[float] = []
    for _ in range(args.reps):
        if floor is not None:
            floor_samples.append(floor.measure(replays, Clock, cool))
        for name, crossing in crossings.items():
            samples[name].append(crossing.measure(replays, Clock, cool))
    us = {
        name: {part: statistics.median(x[part] for x in s) for part in PARTS}
        for name, s in samples.items()
    }
    profiled = min(replays, max(10, 2000 // per_replay))
    calls = {name: crossing.measure(profiled, Calls) for name, crossing in crossings.items()}
    rows = [(part, {n: (us[n][part], calls[n][part]) for n in names}) for part in PARTS]
    whole = {n: (sum(us[n].values()), sum(calls[n].values())) for n in names}
    rows.append(("whole crossing", whole))
    if args.changes:
        what, unit = f"{args.batch} assertions, then their retractions", "change"
    else:
        what = "one message in a packet of its own" if args.batch == 1 else f"{args.batch} messages"
        unit = "message"
    caches = "hot caches" if args.cool is None else f"caches cooled by {args.cool:g} MiB"
    print(
        f"Node b crossed by {what} (3-node chain, {replays} replays, {caches}, median of"
        f" {args.reps} reps): µs and Python calls per {unit}"
    )
    print(f"{'':27}" + "".join(f"{n:>20}" for n in names))
    for label, cells in rows:
        print(f"{label:27}" + "".join(f"{cells[n][0]:>12.2f}{cells[n][1]:>8.1f}" for n in names))
    if floor is not None:
        floor_us, floor_calls = statistics.median(floor_samples), floor.measure(profiled, Calls)
        ratios = "".join(
            f"{whole[n][0] / floor_us:>12.1f}{whole[n][1] / floor_calls:>8.1f}" for n in names
        )
        print(f"{'÷ the floor node':27}{ratios}")
    sizes = "".join(f"{'+'.join(str(len(p)) for p in crossings[n].packets):>20}" for n in names)
    print(f"{'packet bytes':27}{sizes}")
    if floor is not None:
        print(
            f"floor node (decode, one dict lookup, encode, write): {floor_us:.2f} µs and"
            f" {floor_calls:.1f} Python calls per message, {len(floor.data)} bytes"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
