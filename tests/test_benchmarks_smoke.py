"""Smoke tests: the in-process benchmarks run end to end in a short mode (no timing checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks import hop

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def run_benchmark(script: str, *argv: str) -> str:
    """Run ``benchmarks/script`` with ``argv``; its output, once it has exited cleanly."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_dataspace_benchmark_quick_run() -> None:
    out = run_benchmark("dataspace.py", "--quick")
    assert "assert+retract pairs/s" in out
    assert "targets" in out


def test_hop_benchmark_short_run() -> None:
    out = run_benchmark("hop.py", "--events", "50", "--reps", "1")
    for name in ("one dataspace", "copy-up", "observer-flood", "aggregate-subs"):
        assert name in out


def test_hop_one_packet_sends_each_message_across_each_link_on_its_own() -> None:
    """``--one-packet`` settles the chain after every message, so each crosses every link in a
    packet of its own (what a round trip's message costs); without it a run of messages
    crosses each link in a packet or two."""

    def packets_per_link(one_packet: bool) -> list[int]:
        chain = hop.Chain("aggregate-subs", 3, hop.Arrivals(), one_packet=one_packet)
        relays = [link.child_relay for link in chain.network.links]
        before = [relay.stats.packets_out for relay in relays]
        chain.messages([hop.Record(hop.BENCH, (i, hop.PAYLOAD)) for i in range(20)])
        return [relay.stats.packets_out - b for relay, b in zip(relays, before, strict=True)]

    assert packets_per_link(one_packet=True) == [20, 20]
    assert max(packets_per_link(one_packet=False)) <= 2
    argv = ["--one-packet", "--events", "20", "--reps", "1", "--protocols", "observer-flood"]
    assert "one packet per event per link" in run_benchmark("hop.py", *argv)


def test_crossing_benchmark_short_run() -> None:
    """``crossing.py`` replays the packet node b received for one message (or ``--batch``
    messages); each replay must send every message on (the script checks it), and the floor
    node must route each."""
    out = run_benchmark("crossing.py", "--replays", "200", "--reps", "1")
    for row in ("decoding", "turns and packet out", "whole crossing", "floor node"):
        assert row in out
    for name in ("copy-up", "observer-flood", "aggregate-subs"):
        assert name in out
    assert "crossed by 10 messages" in run_benchmark(
        "crossing.py", "--batch", "10", "--replays", "20", "--reps", "1"
    )
    cooled = run_benchmark("crossing.py", "--cool", "0.1", "--replays", "20", "--reps", "1")
    assert "caches cooled by 0.1 MiB" in cooled and "whole crossing" in cooled
    changes = run_benchmark("crossing.py", "--changes", "--batch", "5", "--replays", "20")
    assert "crossed by 5 assertions, then their retractions" in changes
    assert "per change" in changes and "floor node" not in changes


def test_stream_cpu_benchmark_short_run() -> None:
    """``stream_cpu.py`` carries a short stream over a real 3-process chain and splits its CPU
    by process (no timing is asserted)."""
    out = run_benchmark("stream_cpu.py", "--reps", "1", "--events", "300")
    assert "| protocol | messages/s | node a | node b | node c | clients | sum |" in out
    assert "| aggregate-subs |" in out


def test_instructions_benchmark_workloads_run() -> None:
    """``instructions.py`` counts its workloads' instructions under valgrind; each workload
    (the child's side) must run on its own (a chain that loses an event fails it)."""
    for workload, system in [
        ("crossing", "aggregate-subs"),
        ("crossing", "floor node"),
        ("lone", "copy-up"),
        ("changes-crossing", "observer-flood"),
        ("messages", "observer-flood"),
        ("changes", "aggregate-subs"),
        ("batched-changes", "copy-up"),
    ]:
        run_benchmark("instructions.py", "--run", workload, system, "10", "1")
