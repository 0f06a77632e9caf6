"""Instructions per event, counted by cachegrind: what a node costs, without the machine's noise.

Timings on a shared machine move by 1.7x from one minute to the next; instructions executed do
not. Each workload runs twice under ``valgrind --tool=cachegrind`` (a fixed ``PYTHONHASHSEED``,
so the same objects land in the same dict slots), with a few units of work and with more, and
the difference of the two totals, divided by the events the extra units carried, is the cost of
one event without the start-up. Instructions are not time (a cache miss costs more than an
add), but a change that removes instructions from every event is one that saves CPU.

Workloads, in one process, as ``crossing.py`` and ``hop.py`` build them:

* ``crossing``: the middle node ``b`` of a chain crossed by a packet of ``--batch`` messages
  (decoding, the relay's checks, its turns, the packet out), beside a floor node
  (``floor.py``'s router: decode, one dict lookup, encode) routing a frame of as many;
* ``lone``: the same with one message per packet, as in a round trip;
* ``changes-crossing``: the same node crossed by a packet of ``--batch`` assertions, then by
  the packet of their retractions (``crossing.py --changes``);
* ``messages`` and ``changes``: ``hop.py``'s whole chain, publisher and watcher included,
  messages 100 to a publisher turn, changes (an assertion or a retraction) one to a turn;
* ``batched-changes``: the same chain, 100 assertions to a publisher turn, then their 100
  retractions in one turn (as a TCP client's packets carry them).

The workloads run with the collector as a node process sets it (:func:`feds.gc_pauses.
node_collection`; ``--default-gc`` for CPython's default). Needs ``valgrind`` (Debian package
``valgrind``)::

    .venv/bin/python benchmarks/instructions.py                    # every workload, ~15 min
    .venv/bin/python benchmarks/instructions.py --workloads crossing lone --protocols aggregate-subs
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feds.gc_pauses import node_collection
from feds.protocols import protocol_names

WORKLOADS = ("crossing", "lone", "changes-crossing", "messages", "changes", "batched-changes")
CROSSINGS = ("crossing", "lone", "changes-crossing")  # one node, crossing.py's replays
FLOOR = "floor node"
CHAIN_UNIT = 100  # messages or assertion-retraction pairs per unit of a chain workload
LONE_UNIT = 10
"""Packets per unit of ``lone``: with one packet per unit, the difference of the two runs was
six crossings, and a one-off cost in either run (a collection) moved it by a factor of 4."""
UNITS = (3, 9)  # units of work in the short and the long run


def packets_per_unit(workload: str) -> int:
    return LONE_UNIT if workload == "lone" else 1


def events_per_unit(workload: str, batch: int) -> int:
    if workload in CROSSINGS:
        return {"crossing": batch, "lone": LONE_UNIT, "changes-crossing": 2 * batch}[workload]
    return CHAIN_UNIT if workload == "messages" else 2 * CHAIN_UNIT


def run_workload(workload: str, system: str, batch: int, units: int) -> None:
    """Warm up, then do ``units`` units of ``workload`` (the child's side, under valgrind)."""
    from benchmarks.crossing import Crossing, FloorNode
    from benchmarks.hop import Arrivals, Chain, measure

    if workload in CROSSINGS:
        size = 1 if workload == "lone" else batch
        if system == FLOOR:
            floor = FloorNode(size)

            def step() -> None:
                for port in floor.router.route(floor.source, floor.data):
                    port.flush()

        else:
            node = Crossing(system, size, changes=workload == "changes-crossing")

            def step() -> None:
                for data in node.packets:
                    node.relay.receive(data)
                    node.scheduler.run_until_idle()
                    node.uplink.data_to_send()

        for _ in range(20 + units * packets_per_unit(workload)):
            step()
        return
    arrivals = Arrivals()
    chain = Chain(system, 3, arrivals, batch=CHAIN_UNIT)
    kind = workload.replace("-", "_")  # Chain's method: messages, changes, batched_changes
    measure(chain, arrivals, kind, 3 * CHAIN_UNIT, 0)
    measure(chain, arrivals, kind, units * CHAIN_UNIT, 10_000)


def count(workload: str, system: str, batch: int, units: int, default_gc: bool) -> int:
    """Instructions the child process executes for ``units`` units of ``workload``."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--run",
        workload,
        system,
        str(batch),
        str(units),
    ]
    if default_gc:
        command.append("--default-gc")
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode or found is None:
        raise SystemExit(f"{workload} {system}: the run failed:\n{done.stdout}{done.stderr}")
    return int(found.group(1).replace(",", ""))


def per_event(workload: str, system: str, batch: int, default_gc: bool) -> float:
    short, long = (count(workload, system, batch, n, default_gc) for n in UNITS)
    return (long - short) / ((UNITS[1] - UNITS[0]) * events_per_unit(workload, batch))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", nargs="*", choices=protocol_names(), default=None)
    parser.add_argument("--workloads", nargs="*", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument(
        "--batch",
        type=int,
        default=100,
        help="messages (assertions) per packet: crossing, changes-crossing",
    )
    parser.add_argument("--default-gc", action="store_true", help="CPython's collector settings")
    parser.add_argument("--run", nargs=4, metavar=("WORKLOAD", "SYSTEM", "BATCH", "UNITS"))
    args = parser.parse_args(argv)
    if args.run:  # the child
        workload, system, batch, units = args.run
        with contextlib.nullcontext() if args.default_gc else node_collection():
            run_workload(workload, system, int(batch), int(units))
        gc.collect()
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    protocols = args.protocols or protocol_names()
    rows: dict[str, dict[str, float]] = {}
    for workload in args.workloads:
        systems = [*protocols, FLOOR] if workload in ("crossing", "lone") else protocols
        for system in systems:
            rows.setdefault(workload, {})[system] = value = per_event(
                workload, system, args.batch, args.default_gc
            )
            print(f"  {workload:9} {system:15} {value:10,.0f} instructions per event", flush=True)
    gc_note = "CPython's default collector" if args.default_gc else "a node's collector settings"
    print(
        f"\ninstructions per event ({gc_note}; crossing, changes-crossing: {args.batch} per packet)"
    )
    print("| workload | " + " | ".join(protocols) + f" | {FLOOR} |")
    print("|---|" + "---|" * (len(protocols) + 1))
    for workload, values in rows.items():
        floor = values.get(FLOOR)
        cells = [
            f"{values[p]:,.0f}" + (f" ({values[p] / floor:.1f}x)" if floor else "")
            for p in protocols
        ]
        floor_cell = f"{floor:,.0f}" if floor else "n/a"  # the floor routes, it has no chain
        print(f"| {workload} | " + " | ".join(cells) + f" | {floor_cell} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
