"""Client cost benchmark: CPU per message of a publishing and of a subscribing client.

The question it answers: how much CPU does a feds client spend per message it publishes and per
event it receives, against the floor's client (``benchmarks/floor.py``: a trio client that
writes ``[subject, payload]`` items as one msgpack frame per drain and hands a read's messages
to its observer as one list) measured in the same run, and against another checkout of feds
(``--other``, e.g. main's), whose client runs against the same nodes.

Shape: a chain of nodes (``--nodes``, default 3, as in ``overlay.py``: the publisher at the
last node, the subscriber at the first) for feds (``--protocol``) and for the trio floor. Each
client runs in its own process, so its CPU time (``time.process_time``) is its own:

* the **subscriber** observes ``<bench $payload>`` (messages) or ``<change $payload>``
  (assertions) and syncs; its CPU is counted from then (before the publisher starts) until its
  last measured event has arrived, and divided by every event it received (the warm-up ones
  too: they cost the same);
* the **publisher** sends warm-up values first, then N measured values, awaiting ``drain()``
  every 100 messages (every 50 assert+retract pairs), as ``overlay.py`` does; its CPU is counted
  from its first measured value until its socket has taken everything (backlog 0), and
  divided by N (messages) or 2N (changes: an assertion and its retraction).

The feds rows (``--apis``) differ in how the clients are written: ``loop``, the async client
sending (or asserting and retracting) one value per call, what every feds version offers;
``many``, the async client handing over 100 messages (50 pairs) per call (``Session.send_many``,
``publish_many`` + ``retract_many``); ``blocking``, :class:`feds.blocking.BlockingClient` at both
ends (bulk calls of :data:`feds.blocking.BATCH` values; the subscriber calls ``next`` per
event). A row is left out where the tree lacks the calls it needs. The rate column is measured
values / (last one observed - first one sent), as ``overlay.py`` counts; it depends on the
nodes, and the machine, more than on the clients. Every repetition measures each row in turn;
the tables show medians of the repetitions.

Run::

    .venv/bin/python benchmarks/client.py                       # about a minute
    .venv/bin/python benchmarks/client.py --quick               # smoke run
    git archive main | tar -x -C /tmp/main-copy
    .venv/bin/python benchmarks/client.py --other /tmp/main-copy --reps 5
    .venv/bin/python benchmarks/client.py --profile-dir /tmp/prof   # cProfile of each client
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("messages", "changes")
APIS = ("loop", "many", "blocking")
DATA, WARM = b"d", b"w"
WARM_VALUES = 2_000
PACE_MESSAGES = 100
PACE_PAIRS = 50
REPORT_TIMEOUT = 120.0


# -------------------------------------------------------------------------------------------------
# The client processes (``_worker``): each imports feds from the tree it is given.


def _payload(kind: bytes, i: int) -> bytes:
    """64 bytes, distinct per ``i``: the first byte says whether it is measured."""
    return kind + i.to_bytes(8, "big") + b"x" * 55


def worker(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="client.py _worker")
    parser.add_argument("role", choices=("pub", "sub"))
    parser.add_argument("--system", choices=("feds", "floor"), required=True)
    parser.add_argument("--tree", required=True, help="the checkout whose feds to import")
    parser.add_argument("--address", required=True)
    parser.add_argument("--kind", choices=KINDS, default="messages")
    parser.add_argument("--api", choices=APIS, default="loop")
    parser.add_argument("-n", type=int, required=True)
    parser.add_argument("--profile")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.tree)
    import trio

    import feds

    if not feds.__file__ or not feds.__file__.startswith(str(Path(args.tree).resolve())):
        raise SystemExit(f"feds was imported from {feds.__file__}, not from {args.tree}")
    profiler = cProfile.Profile() if args.profile else None
    if args.api == "blocking":
        blocking = _blocking_subscriber if args.role == "sub" else _blocking_publisher
        result = blocking(args, profiler)
    else:
        main = _subscriber if args.role == "sub" else _publisher
        result = trio.run(main, args, profiler)
    if profiler is not None:
        profiler.dump_stats(args.profile)
    if result is not None:
        print(json.dumps(result), flush=True)


class _Measured:
    """CPU and wall clock between :meth:`start` and :meth:`stop` (a profiler runs in between)."""

    def __init__(self, profiler: cProfile.Profile | None) -> None:
        self.profiler = profiler
        self.cpu = self.wall = 0.0

    def start(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()
        if self.profiler is not None:
            self.profiler.enable()

    def stop(self, count: int) -> dict[str, float]:
        if self.profiler is not None:
            self.profiler.disable()
        cpu, wall = time.process_time() - self.cpu, time.perf_counter()
        return {"cpu_us": cpu / count * 1e6, "count": count, "start": self.wall, "end": wall}


async def _connect(args: argparse.Namespace) -> Any:
    if args.system == "floor":
        sys.path.insert(0, str(ROOT))
        from benchmarks.floor import floor_connect

        return floor_connect(int(args.address))
    from feds.client import connect

    return connect(args.address, name=f"bench-{args.role}")


class _Tally:
    """A subscriber's count: every event it receives costs CPU (warm-up ones too, the same);
    it is done once ``n`` measured ones (``n`` messages, or ``n`` assertions and their
    retractions) have arrived."""

    def __init__(self, args: argparse.Namespace, profiler: cProfile.Profile | None) -> None:
        self.pattern = "<bench $payload>" if args.kind == "messages" else "<change $payload>"
        self.target = args.n if args.kind == "messages" else 2 * args.n
        self.seen = 0
        self.measured = 0
        self.clock = _Measured(profiler)

    def add(self, event: Any) -> bool:
        """Count ``event``; whether the last measured one has arrived."""
        self.seen += 1
        if event.captures[0][:1] == DATA:
            self.measured += 1
        return self.measured == self.target

    def result(self) -> dict:
        return self.clock.stop(self.seen)

    def failed(self) -> RuntimeError:
        return RuntimeError(f"the observation ended after {self.measured} of {self.target}")


async def _subscriber(args: argparse.Namespace, profiler: cProfile.Profile | None) -> dict:
    """Observe, sync, say READY; count events until the measured ones have arrived."""
    import trio

    tally = _Tally(args, profiler)

    async def progress() -> None:  # for the log, should the run not complete
        while True:
            await trio.sleep(5.0)
            print(f"sub: {tally.measured} of {tally.target}", file=sys.stderr, flush=True)

    async with (
        await _connect(args) as session,
        session.observe(tally.pattern) as events,
        trio.open_nursery() as nursery,
    ):
        await session.sync()
        print("READY", flush=True)
        nursery.start_soon(progress)
        tally.clock.start()
        async for event in events:
            if tally.add(event):
                nursery.cancel_scope.cancel()
                return tally.result()
    raise tally.failed()


async def _publisher(args: argparse.Namespace, profiler: cProfile.Profile | None) -> None:
    """Say READY, wait for GO on stdin, publish warm-up values, then the measured ones; report,
    and leave once stdin closes."""
    import trio

    from feds.values import Record, Symbol

    async with await _connect(args) as session:
        await session.sync()
        print("READY", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        label = Symbol("bench" if args.kind == "messages" else "change")
        publish = _publish_many if args.api == "many" else _publish_loop
        await publish(
            session, args.kind, [Record(label, (_payload(WARM, i),)) for i in range(WARM_VALUES)]
        )
        values = [Record(label, (_payload(DATA, i),)) for i in range(args.n)]
        measured = _Measured(profiler)
        measured.start()
        await publish(session, args.kind, values)
        await _drained(session)
        result = measured.stop(args.n if args.kind == "messages" else 2 * args.n)
        print(json.dumps(result), flush=True)
        # Stay connected until told (stdin closes): a socket closed while the node still has
        # unread bytes of it may be reset, and the node would lose what it had not read yet.
        await trio.to_thread.run_sync(sys.stdin.read)
        return None


async def _publish_loop(session: Any, kind: str, values: list) -> None:
    if kind == "messages":
        for i, value in enumerate(values):
            session.send(value)
            if i % PACE_MESSAGES == PACE_MESSAGES - 1:
                await session.drain()
    else:
        for i, value in enumerate(values):
            session.retract(session.assert_(value))
            if i % PACE_PAIRS == PACE_PAIRS - 1:
                await session.drain()
    await session.drain()


async def _publish_many(session: Any, kind: str, values: list) -> None:
    if kind == "messages":
        for start in range(0, len(values), PACE_MESSAGES):
            session.send_many(values[start : start + PACE_MESSAGES])
            await session.drain()
    else:
        for start in range(0, len(values), PACE_PAIRS):
            session.retract_many(session.publish_many(values[start : start + PACE_PAIRS]))
            await session.drain()


def _blocking_subscriber(args: argparse.Namespace, profiler: cProfile.Profile | None) -> dict:
    """:func:`_subscriber` with a :class:`feds.blocking.BlockingClient` (``next`` per event)."""
    from feds.blocking import BlockingClient

    tally = _Tally(args, profiler)
    with BlockingClient(args.address, name="bench-sub") as ds, ds.observe(tally.pattern) as events:
        ds.sync()
        print("READY", flush=True)
        tally.clock.start()
        while (event := events.next(REPORT_TIMEOUT)) is not None:
            if tally.add(event):
                return tally.result()
    raise tally.failed()


def _blocking_publisher(args: argparse.Namespace, profiler: cProfile.Profile | None) -> None:
    """:func:`_publisher` with a :class:`feds.blocking.BlockingClient`: ``send_many``, or
    ``publish_many`` then ``retract_many`` (each drains every ``BATCH`` values)."""
    from feds.blocking import BlockingClient
    from feds.values import Record, Symbol

    with BlockingClient(args.address, name="bench-pub") as ds:
        ds.sync()
        print("READY", flush=True)
        sys.stdin.readline()
        label = Symbol("bench" if args.kind == "messages" else "change")

        def publish(values: list) -> None:
            if args.kind == "messages":
                ds.send_many(values)
            else:
                ds.retract_many(ds.publish_many(values))

        publish([Record(label, (_payload(WARM, i),)) for i in range(WARM_VALUES)])
        values = [Record(label, (_payload(DATA, i),)) for i in range(args.n)]
        measured = _Measured(profiler)
        measured.start()
        publish(values)
        ds._run(_drained, ds.session)
        result = measured.stop(args.n if args.kind == "messages" else 2 * args.n)
        print(json.dumps(result), flush=True)
        sys.stdin.read()  # stay connected until told (see _publisher)


async def _drained(session: Any) -> None:
    """Wait until the session's socket has taken every byte it produced."""
    if hasattr(session, "link"):  # the floor's client
        session.link.flush()
        await session.link.wait_backlog(0)
        return
    from feds.transport import wait_backlog

    await session.drain()
    await wait_backlog(session.relay, 0)


# -------------------------------------------------------------------------------------------------
# The controller


@dataclass
class Row:
    """One client setup and its figures per repetition."""

    name: str
    system: str
    tree: str
    api: str
    pub_us: list[float] = field(default_factory=list)
    sub_us: list[float] = field(default_factory=list)
    rate: list[float] = field(default_factory=list)
    error: str = ""


def _start_worker(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "_worker", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )


def _line(proc: subprocess.Popen[bytes], what: str, timeout: float = REPORT_TIMEOUT) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline().decode().strip()
            if line:
                return line
            break  # end of output: the worker died
        if proc.poll() is not None:
            break
    raise RuntimeError(f"no {what} from the {proc.args[3]} client (exit {proc.poll()})")


def measure(row: Row, address_pub: str, address_sub: str, kind: str, n: int, log: Path) -> None:
    """One repetition of ``row``: a subscriber, then a publisher, each in its own process."""
    common = ["--system", row.system, "--tree", row.tree, "--kind", kind, "-n", str(n)]
    common += ["--api", row.api]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        sub = _start_worker(
            ["sub", "--address", address_sub, *common, *row_profile(row, kind, "sub")], log
        )
        procs.append(sub)
        if _line(sub, "READY", 30.0) != "READY":
            raise RuntimeError("the subscriber did not get ready")
        pub = _start_worker(
            ["pub", "--address", address_pub, *common, *row_profile(row, kind, "pub")], log
        )
        procs.append(pub)
        if _line(pub, "READY", 30.0) != "READY":
            raise RuntimeError("the publisher did not get ready")
        assert pub.stdin is not None
        pub.stdin.write(b"GO\n")
        pub.stdin.flush()
        pub_result = json.loads(_line(pub, "report"))
        sub_result = json.loads(_line(sub, "report"))
        row.pub_us.append(pub_result["cpu_us"])
        row.sub_us.append(sub_result["cpu_us"])
        # measured values / (last one observed - first one sent), as overlay.py counts
        row.rate.append(pub_result["count"] / (sub_result["end"] - pub_result["start"]))
    finally:
        for proc in reversed(procs):  # the publisher leaves once its stdin closes
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


PROFILE_DIR: Path | None = None


def row_profile(row: Row, kind: str, role: str) -> list[str]:
    """The worker's ``--profile`` option under ``--profile-dir`` (none without it)."""
    if PROFILE_DIR is None:
        return []
    slug = "".join(c if c.isalnum() else "-" for c in row.name)
    return ["--profile", str(PROFILE_DIR / f"{slug}-{kind}-{role}.prof")]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def render(rows: list[Row], kind: str) -> str:
    floor = next((r for r in rows if r.system == "floor" and r.pub_us), None)
    head = ["client", "pub µs/msg", "sub µs/event", "pub ÷ floor", "sub ÷ floor", "msgs/s"]
    if kind == "changes":
        head[1], head[5] = "pub µs/change", "changes/s"
    lines = [head]
    for row in rows:
        if row.error and not row.pub_us:
            lines.append([row.name, row.error, "", "", "", ""])
            continue
        ratios = ["", ""]
        if floor is not None and row is not floor:
            ratios = [
                f"{statistics.median(row.pub_us) / statistics.median(floor.pub_us):.1f}",
                f"{statistics.median(row.sub_us) / statistics.median(floor.sub_us):.1f}",
            ]
        rate = f"{statistics.median(row.rate):,.0f}" if row.rate else "-"
        lines.append([row.name, _median(row.pub_us), _median(row.sub_us), *ratios, rate])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
        for line in lines
    ]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    global PROFILE_DIR
    parser = argparse.ArgumentParser(
        description="CPU per message of feds's publishing and subscribing clients, against the "
        "floor's client (benchmarks/floor.py) and optionally another checkout's feds client."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small N, 1 repetition")
    parser.add_argument("--reps", type=int, help="repetitions (default 3, or 1 with --quick)")
    parser.add_argument("-n", "--messages", type=int, help="measured values per run (20000)")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=list(KINDS),
        help="what the publisher publishes: messages, and/or assertions each retracted (changes)",
    )
    parser.add_argument(
        "--protocol",
        choices=("copy-up", "observer-flood", "aggregate-subs"),
        default="aggregate-subs",
        help="the feds nodes' protocol",
    )
    parser.add_argument("--nodes", type=int, default=3, help="chain length (default 3)")
    parser.add_argument(
        "--other", type=Path, help="another checkout (e.g. of main) whose feds client to compare"
    )
    parser.add_argument(
        "--apis",
        nargs="+",
        choices=APIS,
        default=list(APIS),
        help="feds rows: loop (one value per call), many (bulk calls), blocking (BlockingClient)",
    )
    parser.add_argument("--no-floor", action="store_true", help="do not run the floor's client")
    parser.add_argument("--profile-dir", type=Path, help="write a cProfile of every client here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import feds.client
    from benchmarks.floor import NODE_NAMES, start_floor_chain
    from benchmarks.overlay import start_feds_chain

    if not 1 <= args.nodes <= len(NODE_NAMES):
        parser.error(f"--nodes takes 1 to {len(NODE_NAMES)}")
    if args.other is not None and not (args.other / "feds" / "client.py").exists():
        parser.error(f"--other {args.other}: no feds/client.py there")
    if args.profile_dir is not None:
        args.profile_dir.mkdir(parents=True, exist_ok=True)
        PROFILE_DIR = args.profile_dir
    n = args.messages or (500 if args.quick else 20_000)
    reps = args.reps or (1 if args.quick else 3)
    trees = [("this tree", str(ROOT))]
    if args.other is not None:
        trees.append((args.other.name, str(args.other.resolve())))

    def feds_rows(kind: str) -> list[Row]:
        rows = []
        for label, tree in trees:
            for api in args.apis:
                many = "send_many" if kind == "messages" else "retract_many"
                module = "blocking" if api == "blocking" else "client"
                if api != "loop" and not _has(tree, module, many):
                    continue
                rows.append(Row(f"feds {label} ({api})", "feds", tree, api))
        return rows

    print(
        f"client cost: {args.nodes}-node chain, feds {args.protocol}, {n} values per run, "
        f"{reps} repetition(s); {time.strftime('%Y-%m-%d %H:%M')}; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    names = NODE_NAMES[: args.nodes]
    feds_cluster, feds_addresses = start_feds_chain(args.protocol, None, names)
    floor_cluster = None
    log = Path(tempfile.gettempdir()) / f"feds-bench-clients-{os.getpid()}.log"
    tables = []
    try:
        if not args.no_floor:
            floor_cluster, floor_ports = start_floor_chain("trio", args.nodes)
        for kind in args.kinds:
            rows = feds_rows(kind)
            if kind == "messages" and floor_cluster is not None:
                rows.insert(0, Row("floor trio", "floor", str(ROOT), "loop"))
            for rep in range(reps):
                for row in rows:
                    pub, sub = (
                        (floor_ports[-1], floor_ports[0])
                        if row.system == "floor"
                        else (feds_addresses[-1], feds_addresses[0])
                    )
                    try:
                        measure(row, pub, sub, kind, n, log)
                    except Exception as exc:
                        row.error = f"{type(exc).__name__}: {exc}"
                        tail = log.read_text(errors="replace").splitlines()[-5:]
                        print(f"{row.name}: {row.error}", *tail, sep="\n", file=sys.stderr)
                        continue
                    print(
                        f"  {kind} rep {rep + 1}/{reps} {row.name:<28} pub {row.pub_us[-1]:6.2f} µs"
                        f"  sub {row.sub_us[-1]:6.2f} µs  {row.rate[-1]:9,.0f}/s",
                        flush=True,
                    )
            tables.append((kind, rows))
    finally:
        feds_cluster.stop()
        if floor_cluster is not None:
            floor_cluster.stop()
    for kind, rows in tables:
        print(f"\n{kind} (CPU µs per value, medians of {reps}):\n")
        print(render(rows, kind))
    print(f"\nfeds {feds.client.__file__}; load average {os.getloadavg()[0]:.2f}")
    return 0 if all(r.pub_us for _, rows in tables for r in rows) else 1


def _has(tree: str, module: str, name: str) -> bool:
    """Whether ``feds.<module>`` of ``tree`` defines a method ``name`` (read from the source:
    another tree's feds cannot be imported next to this one)."""
    source = (Path(tree) / "feds" / f"{module}.py").read_text()
    return f"def {name}(" in source


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        worker(sys.argv[2:])
    else:
        sys.exit(main())
