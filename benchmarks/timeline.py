"""Where a round trip's time goes: every process's socket reads, writes and waits on one clock.

``floor.py`` and ``overlay.py`` time a round trip from the client; ``floor.py --breakdown``
counts the CPU each process spends on one. Neither says which of that time is on the round
trip's path. This script runs the round-trip phase (``overlay.py``'s ``feds_phase_latency``) on
the trio floor chain and on feds chains, with every process of the benchmark (the three
nodes, and this one, which runs both clients) noting each socket ``read`` (when it returned)
and ``write`` (when it was called) and each time its trio run went to sleep waiting for I/O
and woke. ``time.perf_counter_ns`` is the system's monotonic clock, the same in every
process, so the notes of all processes make one timeline.

In a round trip one message is in flight at a time, so the timeline is a relay: a client
writes, a node reads, works, writes, the next node reads... Each round trip's time divides
exactly into

* *node: read → write*: what a node does with a packet before it sends it on (six per round
  trip on the 3-node chain);
* *client: read → write*: the ping's end reading it and the pong's task answering; the pong's
  end reading it and the next ping sent (two per round trip);
* *write → the next read*: from a process's ``write`` until the process that receives it has
  read it (eight per round trip): the kernel's loopback, the writer finishing its work (on a
  2-core machine the reader is often woken on the writer's core, after it), the reader's
  wake-up and trio's scheduling of its reading task.

Beside the division, medians of single spells that explain the last part: a node's work
after its write until it sleeps (*node: write → sleep*), and its trio run's time from waking to
the read (*node: wake → read*). Rows are µs per round trip (sums) or µs per spell (medians),
medians over ``--reps`` repetitions; systems interleaved::

    .venv/bin/python benchmarks/timeline.py                      # floor and aggregate-subs
    .venv/bin/python benchmarks/timeline.py --protocols copy-up observer-flood aggregate-subs
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floor import floor_connect, start_chain, trio_node
from benchmarks.overlay import (
    HOST,
    PROTOCOLS,
    feds_phase_latency,
    wait_feds_chain,
    worker_feds_node,
)
from feds.client import connect

READ, WRITE, SLEEP, WAKE = "read", "write", "sleep", "wake"
Event = tuple[int, str]
"""A note: (ns on the monotonic clock, what happened)."""
WARM_UP = 200
"""Round trips run before the measured ones."""


class Timeline(trio.abc.Instrument):
    """Notes this process's socket reads and writes (``os.read``/``os.write``, as
    ``feds.transport`` and the floor call them) and its trio run's waits for I/O."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._sockets: dict[int, bool] = {}
        self._read, self._write = os.read, os.write

    def _socket(self, fd: int) -> bool:
        known = self._sockets.get(fd)
        if known is None:
            try:
                known = stat.S_ISSOCK(os.fstat(fd).st_mode)
            except OSError:
                known = False
            self._sockets[fd] = known
        return known

    def read(self, fd: int, size: int) -> bytes:
        data = self._read(fd, size)
        if self._socket(fd):
            self.events.append((time.perf_counter_ns(), READ))
        return data

    def write(self, fd: int, data: Any) -> int:
        if self._socket(fd):
            self.events.append((time.perf_counter_ns(), WRITE))
        return self._write(fd, data)

    def install(self) -> None:
        os.read, os.write = self.read, self.write  # type: ignore[assignment]

    def uninstall(self) -> None:
        os.read, os.write = self._read, self._write

    def before_io_wait(self, timeout: float) -> None:
        if timeout > 0:  # a real wait, not trio's poll between two batches of tasks
            self.events.append((time.perf_counter_ns(), SLEEP))

    def after_io_wait(self, timeout: float) -> None:
        if timeout > 0:
            self.events.append((time.perf_counter_ns(), WAKE))


def spells(events: list[Event], begin: str, end: str) -> list[float]:
    """µs from each ``begin`` note to the first ``end`` note after it, where no other ``begin``
    or a read comes between (one process's notes)."""
    out: list[float] = []
    start: int | None = None
    for t, what in events:
        if what == begin:
            start = t
        elif what == end and start is not None:
            out.append((t - start) / 1e3)
            start = None
        elif what == READ:
            start = None
    return out


def handoffs(processes: list[list[Event]]) -> list[float]:
    """µs from each write to the next read in another process (all processes' notes)."""
    merged = sorted((t, what, p) for p, events in enumerate(processes) for t, what in events)
    out: list[float] = []
    pending: tuple[int, int] | None = None  # the last write: (when, by which process)
    for t, what, p in merged:
        if what == WRITE:
            pending = (t, p)
        elif what == READ and pending is not None and pending[1] != p:
            out.append((t - pending[0]) / 1e3)
            pending = None
    return out


def divide(client: list[Event], nodes: list[list[Event]], round_trips: int) -> dict[str, float]:
    """The rows of one repetition (see the module's docstring)."""
    node_spells = [s for events in nodes for s in spells(events, READ, WRITE)]
    client_spells = spells(client, READ, WRITE)
    after = [s for events in nodes for s in spells(events, WRITE, SLEEP)]
    woken = [s for events in nodes for s in spells(events, WAKE, READ)]
    between = handoffs([client, *nodes])
    return {
        "node: read → write (sum)": sum(node_spells) / round_trips,
        "client: read → write (sum)": sum(client_spells) / round_trips,
        "write → the next read (sum)": sum(between) / round_trips,
        "node: read → write (median)": statistics.median(node_spells),
        "client: read → write (median)": statistics.median(client_spells),
        "write → the next read (median)": statistics.median(between),
        "node: write → sleep (median)": statistics.median(after),
        "node: wake → read (median)": statistics.median(woken),
    }


class System:
    """A chain to measure: how to start its nodes and connect its clients."""

    def __init__(
        self,
        label: str,
        worker: tuple[str, ...],
        session: Callable[[str], Any],
        feds: bool,
    ) -> None:
        self.label = label
        self.worker = worker
        self.session = session
        self.feds = feds
        self.rows: list[dict[str, float]] = []
        self.rts: list[float] = []

    def measure(self, round_trips: int, timeout: float) -> None:
        """One repetition on a fresh chain."""
        logdir = Path(tempfile.mkdtemp(prefix="feds-timeline-"))
        cluster, ports = start_chain(
            self.label, 3, *self.worker, "--log-dir", str(logdir), script=Path(__file__)
        )
        try:
            addresses = [f"{HOST}:{port}" for port in ports]
            if self.feds:
                trio.run(wait_feds_chain, addresses)
            timeline = Timeline()
            window: list[int] = []

            async def main() -> list[float]:
                async with self.session(ports[0]) as sub, self.session(ports[-1]) as pub:
                    await feds_phase_latency(pub, sub, WARM_UP, timeout)
                    timeline.install()
                    try:
                        window.append(time.perf_counter_ns())
                        times = await feds_phase_latency(pub, sub, round_trips, timeout)
                        window.append(time.perf_counter_ns())
                    finally:
                        timeline.uninstall()
                return times

            times = trio.run(main, instruments=[timeline])
        finally:
            cluster.stop()
        # The phase's own warm-up (until a pong comes back) is in the window: keep the time of
        # the measured round trips only, which end it.
        begin = window[1] - int(sum(times) * 1e9)
        nodes = [json.loads(path.read_text()) for path in sorted(logdir.glob("*.json"))]
        for path in logdir.iterdir():
            path.unlink()
        logdir.rmdir()
        if len(nodes) != 3:
            raise SystemExit(f"{self.label}: {len(nodes)} of 3 nodes left their notes")

        def within(events: list[Any]) -> list[Event]:
            return [(t, what) for t, what in events if begin <= t <= window[1]]

        self.rows.append(divide(within(timeline.events), [within(n) for n in nodes], len(times)))
        self.rts.append(statistics.median(times) * 1e6)


def report(systems: list[System], reps: int) -> str:
    """The table: each system's medians over the repetitions."""
    keys = list(systems[0].rows[0])
    head = "| part | " + " | ".join(f"{s.label} µs" for s in systems) + " |"
    lines = [head, "|---" * (len(systems) + 1) + "|"]
    lines.append(
        "| round trip (median) | "
        + " | ".join(f"{statistics.median(s.rts):.0f}" for s in systems)
        + " |"
    )
    for key in keys:
        values = [statistics.median(row[key] for row in s.rows) for s in systems]
        lines.append(f"| {key} | " + " | ".join(f"{v:.1f}" for v in values) + " |")
    lines.append("")
    lines.append(
        f"medians over {reps} repetition(s); sums are µs per round trip, medians µs per spell. "
        f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}."
    )
    return "\n".join(lines)


def run_worker(argv: list[str]) -> None:
    """A node (floor or feds) that notes its timeline and leaves it in ``--log-dir``."""
    parser = argparse.ArgumentParser(prog="timeline.py _worker")
    parser.add_argument("kind", choices=["floor", "feds"])
    parser.add_argument("--protocol", choices=PROTOCOLS)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--parent", type=int)
    args = parser.parse_args(argv)
    timeline = Timeline()
    timeline.install()
    try:
        if args.kind == "floor":
            trio.run(trio_node, args.parent, instruments=[timeline])
        else:
            worker_feds_node(args.name, args.protocol, args.parent, None, [timeline])
    finally:
        timeline.uninstall()
        path = Path(args.log_dir) / f"{args.name}.json"
        path.write_text(json.dumps(timeline.events))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--protocols", nargs="*", choices=PROTOCOLS, default=["aggregate-subs"], help="feds rows"
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument(
        "--round-trips", type=int, default=1000, help="measured round trips per run"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per phase")
    args = parser.parse_args(argv)
    systems = [System("floor trio", ("floor",), lambda port: floor_connect(int(port)), False)]
    for protocol in args.protocols:
        systems.append(
            System(
                f"feds {protocol}",
                ("feds", "--protocol", protocol),
                lambda port: connect(f"{HOST}:{port}", name="bench"),
                True,
            )
        )
    started = time.monotonic()
    for rep in range(args.reps):
        for system in systems:
            system.measure(args.round_trips, args.timeout)
            print(
                f"  rep {rep + 1}/{args.reps} {system.label:<24} RT median {system.rts[-1]:.0f} µs",
                flush=True,
            )
    print()
    print(report(systems, args.reps))
    print(f"Took {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        run_worker(sys.argv[2:])
    else:
        sys.exit(main())
