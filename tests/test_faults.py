"""Faults with real `feds node` processes: kill -9 and SIGSTOP of a node, seen by its clients and
its neighbours (issue 11 defects 7 and 9)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from feds.actor import Turn
from feds.cli.common import run_trio
from feds.driver import Driver
from feds.runtime import NodeFailed, NodeRuntime
from tests.test_cli import FEDS, feds, free_ports, wait_for_line


class Nodes:
    """`feds node` processes of one topology file, by name."""

    def __init__(self, topology: Path, names: list[str], ports: list[int]) -> None:
        self.topology = topology
        self.address = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports, strict=True)}
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        proc = subprocess.Popen(
            [*FEDS, "node", str(self.topology), "--name", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.procs[name] = proc
        wait_for_line(proc, "listening on")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait(10)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    names = ["root", "mid", "tail"]
    ports = free_ports(3)
    topology = tmp_path / "chain.toml"
    topology.write_text(
        'protocol = "observer-flood"\n'
        "[limits]\nkeepalive-interval = 0.2\nkeepalive-timeout = 1.0\n"
        f'[nodes.root]\nlisten = "127.0.0.1:{ports[0]}"\n'
        f'[nodes.mid]\nlisten = "127.0.0.1:{ports[1]}"\nparent = "root"\n'
        f'[nodes.tail]\nlisten = "127.0.0.1:{ports[2]}"\nparent = "mid"\n'
    )
    chain = Nodes(topology, names, ports)
    try:
        for name in names:
            chain.start(name)
        yield chain
    finally:
        chain.stop_all()


def watch(address: str, pattern: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*FEDS, "watch", address, pattern, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def converge(address: str, pattern: str, expected: list[str], timeout: float = 20) -> None:
    """Wait until ``feds query`` at ``address`` prints ``expected``."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        result = feds("query", address, pattern, "--timeout", "3")
        seen = result.stdout.split()
        if result.returncode == 0 and seen == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"query at {address} shows {seen}, expected {expected}")


def test_clients_of_a_killed_node_exit_1_with_the_reason(nodes: Nodes) -> None:
    tail = nodes.address["tail"]
    watcher = watch(tail, "<temp $v>")
    holder = subprocess.Popen(
        [*FEDS, "assert", tail, "<temp 21>"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert watcher.stdout is not None
    assert watcher.stdout.readline().strip() == "+ [21]"
    nodes.procs["tail"].kill()
    for proc in (watcher, holder):
        assert proc.wait(20) == 1
        assert proc.stderr is not None
        assert "connection to the node lost" in str(proc.stderr.read())


def test_a_stopped_middle_node_is_cut_by_its_neighbours_and_heals_on_sigcont(
    nodes: Nodes,
) -> None:
    root, tail = nodes.address["root"], nodes.address["tail"]
    holder = subprocess.Popen([*FEDS, "assert", tail, "<temp 21>"], stderr=subprocess.PIPE)
    try:
        converge(root, "<temp $v>", ["[21]"])
        nodes.procs["mid"].send_signal(signal.SIGSTOP)
        started = time.monotonic()
        converge(root, "<temp $v>", [])  # the keep-alive cut the link: tail's assertion is gone
        cut_after = time.monotonic() - started
        nodes.procs["mid"].send_signal(signal.SIGCONT)
        converge(root, "<temp $v>", ["[21]"])  # mid's links are re-made, the state resynced
        assert cut_after < 10
    finally:
        holder.kill()
        holder.wait(10)


def test_a_killed_middle_node_restarted_heals_the_overlay(nodes: Nodes) -> None:
    root, tail = nodes.address["root"], nodes.address["tail"]
    holder = subprocess.Popen([*FEDS, "assert", tail, "<temp 21>"], stderr=subprocess.PIPE)
    try:
        converge(root, "<temp $v>", ["[21]"])
        nodes.procs["mid"].kill()
        nodes.procs["mid"].wait(10)
        converge(root, "<temp $v>", [])
        nodes.start("mid")
        converge(root, "<temp $v>", ["[21]"])
    finally:
        holder.kill()
        holder.wait(10)


async def test_a_node_that_fails_as_a_whole_raises_so_its_process_exits_non_zero(
    nursery: trio.Nursery,
) -> None:
    driver = Driver()
    nursery.start_soon(driver.run)
    runtime = NodeRuntime(driver.scheduler, "n", "copy-up")
    node = runtime.node

    def crash(turn: Turn) -> None:
        raise RuntimeError("broken invariant")

    driver.scheduler.enqueue(node.actor, node.facet, crash)
    with trio.fail_after(5), pytest.raises(NodeFailed, match="n failed: RuntimeError: broken"):
        await runtime.watch()


def test_feds_node_exits_1_with_the_reason_when_its_node_fails() -> None:
    """``run_trio`` turns a NodeFailed into a message and exit code 1."""

    async def main() -> None:
        raise NodeFailed("node n failed: RuntimeError: broken")

    assert run_trio(main) == 1


def test_watch_with_reconnect_sees_the_gap_and_the_state_again(nodes: Nodes) -> None:
    tail, mid = nodes.address["tail"], nodes.address["mid"]
    holder = subprocess.Popen([*FEDS, "assert", mid, "<temp 21>"], stderr=subprocess.PIPE)
    watcher = watch(tail, "<temp $v>", "--reconnect")
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "+ [21]"
        nodes.procs["tail"].kill()
        nodes.procs["tail"].wait(10)
        assert watcher.stdout.readline().strip() == "- [21]"
        nodes.start("tail")
        assert watcher.stdout.readline().strip() == "+ [21]"
        assert watcher.poll() is None
    finally:
        for proc in (holder, watcher):
            proc.kill()
            proc.wait(10)
