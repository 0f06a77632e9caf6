"""Faults with real `feds node` processes: kill -9 and SIGSTOP of a node, seen by its clients and
its neighbours (issue 11 defects 7 and 9)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
import trio

from benchmarks.soak import Overlay
from feds.actor import Turn
from feds.cli.common import run_trio
from feds.driver import Driver
from feds.runtime import NodeFailed, NodeRuntime, run_overlay
from feds.topology import from_parents
from tests.test_cli import FEDS, feds


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Overlay]:
    """A chain root <- mid <- tail of `feds node` processes, keep-alive timeout 2 s."""
    parents = {"root": None, "mid": "root", "tail": "mid"}
    chain = Overlay(tmp_path, parents, "observer-flood", keepalive=(0.3, 2.0))
    try:
        for name in parents:
            chain.start(name)
        yield chain
    finally:
        chain.stop()


@contextmanager
def holding(address: str, value: str) -> Iterator[subprocess.Popen]:
    """``feds assert ADDRESS VALUE`` running for the duration of the block."""
    holder = subprocess.Popen([*FEDS, "assert", address, value], stderr=subprocess.PIPE)
    try:
        yield holder
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(10)


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


def test_clients_of_a_killed_node_exit_1_with_the_reason(nodes: Overlay) -> None:
    tail = nodes.address["tail"]
    watcher = watch(tail, "<temp $v>")
    with holding(tail, "<temp 21>") as holder:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "+ [21]"
        nodes.procs["tail"].kill()
        for proc in (watcher, holder):
            assert proc.wait(20) == 1
            assert proc.stderr is not None
            assert "connection to the node lost" in str(proc.stderr.read())


def test_a_stopped_middle_node_is_cut_by_its_neighbours_and_heals_on_sigcont(
    nodes: Overlay,
) -> None:
    root, tail = nodes.address["root"], nodes.address["tail"]
    with holding(tail, "<temp 21>"):
        converge(root, "<temp $v>", ["[21]"])
        nodes.procs["mid"].send_signal(signal.SIGSTOP)
        started = time.monotonic()
        converge(root, "<temp $v>", [])  # the keep-alive cut the link: tail's assertion is gone
        cut_after = time.monotonic() - started
        nodes.procs["mid"].send_signal(signal.SIGCONT)
        converge(root, "<temp $v>", ["[21]"])  # mid's links are re-made, the state resynced
        assert cut_after < 10


@pytest.mark.parametrize(
    ("victim", "meanwhile", "seen"),
    [
        ("mid", "root", []),  # the root loses what the tail asserts
        ("root", "tail", ["[21]"]),  # the rest of the tree goes on
    ],
)
def test_a_killed_node_restarted_heals_the_overlay(
    nodes: Overlay, victim: str, meanwhile: str, seen: list[str]
) -> None:
    """Meanwhile ``meanwhile`` sees ``seen``; after the restart the links to the restarted node
    are made again (its children re-dial it) and the root sees the tail's assertion again."""
    root, tail = nodes.address["root"], nodes.address["tail"]
    with holding(tail, "<temp 21>"):
        converge(root, "<temp $v>", ["[21]"])
        nodes.procs[victim].kill()
        nodes.procs[victim].wait(10)
        converge(nodes.address[meanwhile], "<temp $v>", seen)
        nodes.start(victim)
        converge(root, "<temp $v>", ["[21]"])


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


def test_watch_with_reconnect_sees_the_gap_and_the_state_again(nodes: Overlay) -> None:
    tail, mid = nodes.address["tail"], nodes.address["mid"]
    watcher = watch(tail, "<temp $v>", "--reconnect")
    with holding(mid, "<temp 21>"):
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
            watcher.kill()
            watcher.wait(10)


@pytest.mark.parametrize("fault", [signal.SIGKILL, signal.SIGSTOP])
def test_a_killed_or_stopped_client_loses_its_assertions(nodes: Overlay, fault: int) -> None:
    root, tail = nodes.address["root"], nodes.address["tail"]
    with holding(tail, "<temp 21>") as holder:
        converge(root, "<temp $v>", ["[21]"])
        holder.send_signal(fault)
        converge(root, "<temp $v>", [])  # closed socket, or the keep-alive of its node


async def test_feds_up_ends_with_the_reason_when_one_of_its_nodes_fails() -> None:
    topology = from_parents({"r": None, "a": "r"})
    with pytest.raises(BaseExceptionGroup) as caught:
        async with trio.open_nursery() as nursery:
            overlay = await nursery.start(partial(run_overlay, topology, any_port=True))
            node = overlay.runtimes["a"].node

            def crash(turn: Turn) -> None:
                raise RuntimeError("broken invariant")

            overlay.driver.scheduler.enqueue(node.actor, node.facet, crash)
            with trio.fail_after(5):
                await trio.sleep_forever()
    assert caught.group_contains(NodeFailed, match="node a failed: RuntimeError", depth=None)
