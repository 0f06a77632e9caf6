"""Smoke test: the dataspace benchmark runs end to end in its quick mode (no timing checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "dataspace.py"


def test_dataspace_benchmark_quick_run() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "assert+retract pairs/s" in result.stdout
    assert "targets" in result.stdout
