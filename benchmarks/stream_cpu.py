"""CPU per event of each process of a feds chain while it carries a stream: which one bounds it.

``overlay.py``'s messages phase (or its changes phase, ``--phase changes``) runs on a 3-node
chain of ``feds node`` processes (``a`` ← ``b`` ← ``c``, the publisher at ``c``, the subscriber
at ``a``, both clients in this process), and the CPU each process spent during the phase
(Linux schedstat, every thread) is divided by the events carried. On two cores the four
processes share the machine, so the rate is about 2 / (their sum); the largest one says where a
cut helps most. Medians of ``--reps`` runs, each on a fresh chain::

    .venv/bin/python benchmarks/stream_cpu.py                       # aggregate-subs, messages
    .venv/bin/python benchmarks/stream_cpu.py --protocols copy-up observer-flood aggregate-subs
    .venv/bin/python benchmarks/stream_cpu.py --phase changes       # per assert or retract
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floor import process_cpu
from benchmarks.overlay import (
    PROTOCOLS,
    feds_phase_changes,
    feds_phase_messages,
    start_feds_chain,
)
from feds.client import connect

PROCESSES = ("node a", "node b", "node c", "clients")


def run_once(protocol: str, phase: str, events: int, timeout: float) -> tuple[float, list[float]]:
    """One run on a fresh chain: the rate (events/s) and each process's CPU µs per event."""
    cluster, addresses = start_feds_chain(protocol, None)
    pids = [proc.pid for proc in cluster.procs] + [os.getpid()]

    async def main() -> tuple[float, list[float]]:
        async with (
            connect(addresses[0], name="bench-sub") as sub,
            connect(addresses[-1], name="bench-pub") as pub,
        ):
            before = [process_cpu(pid) for pid in pids]
            if phase == "messages":
                rate = await feds_phase_messages(pub, sub, events, None, timeout)
                carried = events
            else:  # each of the ``events`` pairs is two changes
                rate = await feds_phase_changes(pub, sub, events // 2, None, timeout)
                carried = 2 * (events // 2)
            after = [process_cpu(pid) for pid in pids]
        return rate, [1e6 * (a - b) / carried for a, b in zip(after, before, strict=True)]

    try:
        return trio.run(main)
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", nargs="*", choices=PROTOCOLS, default=["aggregate-subs"])
    parser.add_argument("--phase", choices=("messages", "changes"), default="messages")
    parser.add_argument("--events", type=int, default=50000, help="events per run (50,000)")
    parser.add_argument("--reps", type=int, default=5, help="runs per protocol (median; 5)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per run")
    args = parser.parse_args(argv)
    samples: dict[str, list[tuple[float, list[float]]]] = {p: [] for p in args.protocols}
    for rep in range(args.reps):
        for protocol in args.protocols:
            rate, cpu = run_once(protocol, args.phase, args.events, args.timeout)
            samples[protocol].append((rate, cpu))
            print(
                f"  rep {rep + 1}/{args.reps} {protocol:15} {rate:9,.0f} {args.phase}/s, CPU µs"
                f" per event: " + ", ".join(f"{c:.1f}" for c in cpu),
                flush=True,
            )
    print(
        f"\n{args.phase}: CPU µs per event in each process, medians of {args.reps} run(s) of"
        f" {args.events:,} events (3-node chain, 64-byte payloads)"
    )
    print(f"| protocol | {args.phase}/s | " + " | ".join(PROCESSES) + " | sum |")
    print("|---|---|" + "---|" * (len(PROCESSES) + 1))
    for protocol, runs in samples.items():
        rate = statistics.median(r for r, _ in runs)
        parts = [statistics.median(cpu[i] for _, cpu in runs) for i in range(len(PROCESSES))]
        total = statistics.median(sum(cpu) for _, cpu in runs)
        cells = " | ".join(f"{p:.1f}" for p in parts)
        print(f"| {protocol} | {rate:,.0f} | {cells} | {total:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
