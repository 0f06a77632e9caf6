"""Cost per event of the federation's hot path, in one process: real nodes over virtual links.

A chain of ``--nodes`` nodes (default 3: ``a`` ← ``b`` ← ``c``) is linked by the simulator's
virtual links (:mod:`feds.sim.network`, zero latency), which carry the real encoded frames
between real relays. A client at ``a`` observes ``<bench $i $payload>``; a client at the far
end publishes ``--events`` events with a 64-byte payload, one per client turn: messages, then
assert+retract pairs. Reported per event: wall-clock microseconds and turns run, for each
protocol, and as the peer in the same run the same events in one plain dataspace (no
federation: client → dataspace → observer). Medians of ``--reps`` repetitions, interleaved.

This isolates the CPU cost of the node, relay, codec and protocol code from sockets and task
switches (``benchmarks/overlay.py`` measures those, end to end over TCP). The virtual network
delivers only once every turn has run, so a run of events crosses each link in a packet or two;
``--one-packet`` lets the chain settle after every event instead, so that each crosses each link
in a packet of its own, as a round trip's message does: the difference is the per-packet cost::

    .venv/bin/python benchmarks/hop.py                        # all protocols, about 1 minute
    .venv/bin/python benchmarks/hop.py --protocols aggregate-subs --profile /tmp/hop.prof
    .venv/bin/python benchmarks/hop.py --cpu                  # CPU time: steadier when shared
    .venv/bin/python benchmarks/hop.py --cpu --one-packet     # one packet per event per link
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feds.actor import Handle, Scheduler, Turn
from feds.codec import decode, encode
from feds.dataspace import Dataspace, observe
from feds.protocols import make_protocol, protocol_names
from feds.sim.network import LinkParams, Network
from feds.sim.reference import Watcher, Workload
from feds.sim.runner import SimNode
from feds.syntax import parse_pattern
from feds.values import Record, Symbol

BENCH = Symbol("bench")
PAYLOAD = bytes(range(64))
PATTERN = decode(encode(parse_pattern("<bench $i $payload>")[0]))
"""Decoded, so interned as a TCP client's pattern is at its node: the ``<pub f pat vs>`` that
reach the subscriber's node carry this very object and the index compares it by identity (an
undecoded pattern was compared in depth with every one, about 20 calls per message that no TCP
deployment makes)."""
PLAIN = "one dataspace"


class Chain:
    """``n`` nodes in a chain over zero-latency virtual links, clients at both ends."""

    def __init__(
        self,
        protocol: str,
        n: int,
        count: Callable[[str, object], None],
        batch: int = 1,
        one_packet: bool = False,
    ) -> None:
        self.batch = batch
        self.one_packet = one_packet
        self.scheduler = s = Scheduler()
        nodes = [SimNode(s, f"n{i}", make_protocol(protocol)) for i in range(n)]
        s.run_until_idle()
        self.network = Network(s)
        for child, parent in zip(nodes[1:], nodes, strict=False):
            self.network.connect(child, parent, LinkParams(latency=0.0))
        self.settle()
        self.workload = w = Workload(s)
        self.watcher = Watcher(count)
        w.observe(w.attach(nodes[0], "subscriber"), PATTERN, self.watcher)
        self.publisher = w.attach(nodes[-1], "publisher")
        self.settle()

    def settle(self) -> None:
        network, scheduler = self.network, self.scheduler
        while True:
            scheduler.run_until_idle()
            network.flush()
            if network.next_time() is None:
                return
            network.deliver_next()

    def messages(self, values: list[Record]) -> None:
        if self.batch == 1:
            for v in values:
                self.workload.send(self.publisher, v)
                self.settle_each()
        else:
            facet, access = self.publisher.actor_facet, self.publisher.node.access
            for i in range(0, len(values), self.batch):
                chunk = values[i : i + self.batch]

                def send(t: Turn, chunk: list[Record] = chunk) -> None:
                    for v in chunk:
                        t.message(access, v)

                self.scheduler.enqueue(facet.actor, facet, send)
        self.settle()

    def changes(self, values: list[Record]) -> None:
        keys = []
        for v in values:
            keys.append(self.workload.assert_(self.publisher, v))
            self.settle_each()
        self.settle()
        for key in keys:
            self.workload.retract(self.publisher, key)
            self.settle_each()
        self.settle()

    def batched_changes(self, values: list[Record]) -> None:
        """Changes ``batch`` to a publisher turn: a turn asserts ``batch`` values, a later one
        retracts them (as a TCP client's packets carry them; :meth:`changes` makes one per
        turn)."""
        facet, access = self.publisher.actor_facet, self.publisher.node.access
        for i in range(0, len(values), self.batch):
            handles: list[Handle] = []

            def publish(
                t: Turn,
                chunk: list[Record] = values[i : i + self.batch],
                handles: list[Handle] = handles,
            ) -> None:
                handles.extend(t.publish(access, v) for v in chunk)

            def retract(t: Turn, handles: list[Handle] = handles) -> None:
                for handle in handles:
                    t.retract(handle)

            self.scheduler.enqueue(facet.actor, facet, publish)
            self.settle()
            self.scheduler.enqueue(facet.actor, facet, retract)
            self.settle()

    def settle_each(self) -> None:
        """With ``one_packet``, settle after an event: it crosses each link on its own."""
        if self.one_packet:
            self.settle()


class Single:
    """The peer: the same client actions against one plain dataspace."""

    def __init__(
        self, count: Callable[[str, object], None], one_packet: bool = False, batch: int = 1
    ) -> None:
        self.one_packet = one_packet
        self.batch = batch
        self.scheduler = s = Scheduler()
        ds = Dataspace()
        self.watcher = Watcher(count)
        refs: list = []

        def boot(t: Turn) -> None:
            refs.append(t.ref(ds))
            t.publish(refs[0], observe(PATTERN, t.ref(self.watcher)))

        s.spawn(boot, name="dataspace")
        s.run_until_idle()
        self.ds = refs[0]
        client: list = []
        s.spawn(lambda t: client.append(t.facet), name="publisher")
        s.run_until_idle()
        self.facet = client[0]

    def _act(self, action: Callable[[Turn], None]) -> None:
        self.scheduler.enqueue(self.facet.actor, self.facet, action)
        if self.one_packet:  # as the chain settles after each event
            self.scheduler.run_until_idle()

    def messages(self, values: list[Record]) -> None:
        """``batch`` messages to a publisher turn, as the chain's publisher sends them."""
        for i in range(0, len(values), self.batch):

            def send(t: Turn, chunk: list[Record] = values[i : i + self.batch]) -> None:
                for v in chunk:
                    t.message(self.ds, v)

            self._act(send)
        self.scheduler.run_until_idle()

    def changes(self, values: list[Record]) -> None:
        handles: list = []
        for v in values:
            self._act(lambda t, v=v: handles.append(t.publish(self.ds, v)))
        self.scheduler.run_until_idle()
        for h in handles:
            self._act(lambda t, h=h: t.retract(h))
        self.scheduler.run_until_idle()


class Arrivals:
    """Counts the assertions and messages reaching an observer: a run that loses one fails."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: str, value: object) -> None:
        self.count += 1


def measure(
    system: Chain | Single,
    arrivals: Arrivals,
    kind: str,
    n: int,
    first: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """Microseconds and turns per event for ``n`` events (a pair counts as two events)."""
    values = [Record(BENCH, (first + i, PAYLOAD)) for i in range(n)]
    events = n if kind == "messages" else 2 * n
    before = arrivals.count
    turns = system.scheduler.turns_run
    gc.collect()
    start = clock()
    getattr(system, kind)(values)
    elapsed = clock() - start
    if arrivals.count - before != n or system.watcher.current:
        raise SystemExit(f"{kind}: {arrivals.count - before} of {n} arrivals, or retractions lost")
    return 1e6 * elapsed / events, (system.scheduler.turns_run - turns) / events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default="all", help="comma-separated, or all")
    parser.add_argument("--nodes", type=int, default=3, help="chain length (default 3)")
    parser.add_argument("--events", type=int, default=3000, help="events per repetition")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (median; default 5)")
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="messages the publisher sends per turn (default 1; overlay.py's clients batch)",
    )
    parser.add_argument(
        "--one-packet",
        action="store_true",
        help="settle the chain after every event, so that each crosses each link in a packet of"
        " its own (as in a round trip; not with --batch)",
    )
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of one repetition")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="measure the process's CPU time instead of wall time (steadier on a shared machine)",
    )
    args = parser.parse_args(argv)
    if args.one_packet and args.batch != 1:
        parser.error("--one-packet sends one message per packet: it takes no --batch")
    clock = time.process_time if args.cpu else time.perf_counter
    names = list(protocol_names()) if args.protocols == "all" else args.protocols.split(",")
    arrivals = {name: Arrivals() for name in [PLAIN, *names]}
    systems: dict[str, Chain | Single] = {
        PLAIN: Single(arrivals[PLAIN], args.one_packet, args.batch)
    }
    systems.update(
        (name, Chain(name, args.nodes, arrivals[name], args.batch, args.one_packet))
        for name in names
    )
    kinds = ("messages", "changes")
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    first = 0
    for _ in range(args.reps):
        for kind in kinds:
            for name, system in systems.items():
                samples.setdefault((name, kind), []).append(
                    measure(system, arrivals[name], kind, args.events, first, clock)
                )
                first += args.events
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for name in names:
            for kind in kinds:
                measure(systems[name], arrivals[name], kind, args.events, first)
                first += args.events
        profiler.disable()
        profiler.dump_stats(args.profile)
    what = "CPU time" if args.cpu else "wall time"
    packets = ", one packet per event per link" if args.one_packet else ""
    print(
        f"{args.nodes}-node chain, {args.events} events, {args.batch} message(s) per publisher"
        f" turn{packets}, median of {args.reps} reps, {what}"
    )
    header = f"{'system':16} {'kind':9} {'µs/event':>9} {'turns/event':>12} {'÷ one dataspace':>16}"
    print(header)
    for kind in kinds:
        base = statistics.median(us for us, _ in samples[(PLAIN, kind)])
        for name in systems:
            us = statistics.median(x for x, _ in samples[(name, kind)])
            turns = samples[(name, kind)][0][1]
            print(f"{name:16} {kind:9} {us:9.1f} {turns:12.1f} {us / base:16.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
