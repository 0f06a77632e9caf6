"""Smoke test of ``benchmarks/overlay.py``: a tiny feds-only run must work end to end.

It starts three node processes per protocol, attaches clients at both ends of the chain and
prints the table. No timing is asserted: the machine may be slow or busy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "overlay.py"


def test_overlay_benchmark_quick_feds_only() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick", "--feds-only"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| feds ")]
    assert {row.split("|")[1].strip() for row in rows} == {
        "feds copy-up",
        "feds observer-flood",
        "feds aggregate-subs",
    }, result.stdout
    assert not any("failed" in row for row in rows), result.stdout
