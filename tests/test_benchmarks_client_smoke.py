"""Smoke test of ``benchmarks/client.py``: a tiny run must work end to end (a feds node and a
floor node, each client in its own process, this tree's client against itself given as the
``--other`` checkout, both kinds of value); no timing is asserted, as the machine may be slow
or busy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = ROOT / "benchmarks" / "client.py"


def test_client_benchmark_quick() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--nodes", "1", "--other", str(ROOT)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    rows = [line.split("|")[1:-1] for line in result.stdout.splitlines() if line.startswith("| ")]
    names = [  # the rows with a figure (not an error) for the publisher
        cells[0].strip()
        for cells in rows
        if cells[0].strip() != "client" and cells[1].strip()[:1].isdigit()
    ]
    other = f"feds {ROOT.name}"
    assert names.count("floor trio") == 1, output  # messages only
    for row in ("feds this tree (loop)", "feds this tree (many)", f"{other} (loop)"):
        assert names.count(row) == 2, output  # messages and changes
