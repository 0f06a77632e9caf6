"""``benchmarks/timeline.py``: its division of a timeline, on a made-up one, and a tiny run.

No timing is asserted: the run only has to produce the table for the floor and feds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timeline import READ, SLEEP, WAKE, WRITE, divide, handoffs, spells

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "timeline.py"


def test_a_round_trip_divides_into_its_spells_and_hand_offs() -> None:
    """A client writes at 0 µs; the node reads at 10, writes at 15, sleeps at 18; the client
    reads at 30, writes at 50 (the next ping), and the node reads it at 70 and writes at 80,
    which the client reads at 100: two round trips' worth of parts that add up to the time."""
    us = 1000
    client = [(0, WRITE), (30 * us, READ), (50 * us, WRITE), (100 * us, READ)]
    node = [
        (10 * us, READ),
        (15 * us, WRITE),
        (18 * us, SLEEP),
        (65 * us, WAKE),
        (70 * us, READ),
        (80 * us, WRITE),
    ]
    assert spells(node, READ, WRITE) == [5.0, 10.0]
    assert spells(node, WRITE, SLEEP) == [3.0]
    assert spells(node, WAKE, READ) == [5.0]
    assert handoffs([client, node]) == [10.0, 15.0, 20.0, 20.0]
    rows = divide(client, [node], 1)
    parts = ("node: read → write (sum)", "client: read → write (sum)")
    assert sum(rows[p] for p in parts) + rows["write → the next read (sum)"] == 100.0


def test_timeline_benchmark_tiny_run() -> None:
    command = [sys.executable, str(BENCHMARK), "--reps", "1", "--round-trips", "50"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    table = [line.split("|")[1:-1] for line in result.stdout.splitlines() if line.startswith("| ")]
    head = [cell.strip() for cell in table[0]]
    assert head == ["part", "floor trio µs", "feds aggregate-subs µs"], output
    rows = {cells[0].strip(): cells[1:] for cells in table[2:]}
    assert "node: read → write (sum)" in rows, output
    assert all(cell.strip()[:1].isdigit() for cells in rows.values() for cell in cells), output
