"""Smoke test: benchmarks/codec.py (codec against msgpack, and the value cache) runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_codec_benchmark_short_run() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "codec.py"), "--number", "20"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("<temp", "pattern cached", "decode a turn packet of 100"):
        assert line in result.stdout
