"""The `feds` command for real: separate `feds node` processes driven through the CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.soak import free_ports

FEDS = [sys.executable, "-m", "feds.cli"]
TIMEOUT = 60


def feds(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([*FEDS, *args], capture_output=True, text=True, timeout=timeout)


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"{needle!r} never printed (exit {proc.poll()})")


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[list[str]]:
    """Three `feds node` processes in a chain root <- mid <- tail; yields their addresses."""
    ports = free_ports(3)
    topology = tmp_path / "chain.toml"
    topology.write_text(
        'protocol = "observer-flood"\n'
        f'[nodes.root]\nlisten = "127.0.0.1:{ports[0]}"\n'
        f'[nodes.mid]\nlisten = "127.0.0.1:{ports[1]}"\nparent = "root"\n'
        f'[nodes.tail]\nlisten = "127.0.0.1:{ports[2]}"\nparent = "mid"\n'
    )
    procs = [
        subprocess.Popen(
            [*FEDS, "node", str(topology), "--name", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for name in ("tail", "mid", "root")  # children first: they must re-dial
    ]
    try:
        for proc in procs:
            wait_for_line(proc, "listening on")
        addresses = [f"127.0.0.1:{p}" for p in ports]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # wait until both uplinks are up
            status = feds("status", addresses[1], "--json")
            if status.returncode == 0 and json.loads(status.stdout)["neighbours"] == 2:
                break
            time.sleep(0.2)
        yield addresses
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            assert proc.wait(10) == 0


def test_watch_sees_assertions_and_messages_from_another_process(chain: list[str]) -> None:
    root, mid, tail = chain
    watch = subprocess.Popen(
        [*FEDS, "watch", tail, "<temp $room $v>", "--json", "--count", "3", "--timeout", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)  # let the watcher's subscription reach the root
    held = subprocess.Popen([*FEDS, "assert", root, '<temp "kitchen" 21.5>'])
    deadline = time.monotonic() + 20
    while (query := feds("query", mid, "<temp $room _>")).stdout.strip() != '["kitchen"]':
        assert query.returncode == 0 and time.monotonic() < deadline
    assert feds("send", root, '<temp "porch" 8>').returncode == 0
    held.send_signal(signal.SIGINT)  # retracts, after the message has reached every node
    assert held.wait(TIMEOUT) == 0
    out, err = watch.communicate(timeout=TIMEOUT)
    assert watch.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["event"] for e in events] == ["+", "!", "-"]
    assert events[0]["bindings"] == {"room": "kitchen", "v": 21.5}
    assert events[1]["captures"] == ["porch", 8]


def test_status_prints_figures_per_link(chain: list[str]) -> None:
    result = feds("status", chain[1])
    assert result.returncode == 0
    assert "protocol: observer-flood" in result.stdout
    assert "peer root" in result.stdout and "peer tail" in result.stdout


def test_bad_input_gets_a_clear_message_and_exit_code_2() -> None:
    result = feds("send", "127.0.0.1:9", "<temp")
    assert result.returncode == 2 and "invalid value" in result.stderr and "1:" in result.stderr
    result = feds("watch", "127.0.0.1:9", "<temp $x:nonsense>")
    assert result.returncode == 2 and "invalid pattern" in result.stderr
    result = feds("send", "nowhere", "1")
    assert result.returncode == 1 and "bad address" in result.stderr


def test_an_unreachable_node_fails_with_exit_code_1() -> None:
    port = free_ports(1)[0]
    result = feds("query", f"127.0.0.1:{port}", "<a $x>", "--timeout", "5")
    assert result.returncode == 1 and "cannot connect" in result.stderr


def test_watch_times_out_with_exit_code_1_when_count_is_not_met(chain: list[str]) -> None:
    result = feds("watch", chain[0], "<nothing $x>", "--count", "1", "--timeout", "1")
    assert result.returncode == 1 and "0 of 1 events" in result.stderr


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_up_runs_a_topology_and_stops_cleanly_on_ctrl_c_or_sigterm(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM is what process supervisors and ``docker stop`` send (as a container's first
    process, a feds command that did not handle it would ignore it until killed)."""
    proc = subprocess.Popen(
        [*FEDS, "up", "topology/binary7.toml", "--any-port"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = wait_for_line(proc, "node a1 listening on")
        address = line.split()[4]
        assert feds("send", address, "<hello>").returncode == 0
    finally:
        proc.send_signal(stop)
    assert proc.wait(10) == 0
    assert proc.stderr is not None and "stopped" in proc.stderr.read()


def test_demo_runs_to_the_end() -> None:
    result = feds("demo", "--pause", "0", "--no-spark")  # the Spark part: tests/test_spark.py
    assert result.returncode == 0, result.stderr
    assert "watcher: + " in result.stdout and "watcher: ! " in result.stdout
    assert result.stdout.rstrip().endswith("== done")
