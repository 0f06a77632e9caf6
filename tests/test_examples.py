"""The runnable examples run and say what their docstrings promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_presence_example_shows_during_on_message_and_crash_cleanup() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "presence.py")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [
        "room: Alice arrived",
        "room: Alice says 'hello'",
        "room: Bob arrived",
        "room: Bob says 'hi Alice'",
        "-- Alice's next turn raises: none of its effects happen, her presence is retracted",
        "room: Alice left",
    ]
