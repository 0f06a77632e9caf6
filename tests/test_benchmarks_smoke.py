"""Smoke tests: the in-process benchmarks run end to end in a short mode (no timing checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_dataspace_benchmark_quick_run() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "dataspace.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "assert+retract pairs/s" in result.stdout
    assert "targets" in result.stdout


def test_hop_benchmark_short_run() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "hop.py"), "--events", "50", "--reps", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("one dataspace", "copy-up", "observer-flood", "aggregate-subs"):
        assert name in result.stdout
