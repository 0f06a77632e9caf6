"""A publication of tens of thousands of rows made visible in one turn (a Spark commit) crosses a
chain of real ``feds node`` processes with tight keep-alives, and no link is cut: every node
keeps answering its links while it works through the big turn (issue 10's blocker, and issue 11's
"no input breaks the overlay")."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.soak import Overlay
from feds.spark.leaf import Leaf
from feds.spark.wire import COMMIT, LeafConnection
from feds.values import Record, record
from tests.test_cli import FEDS

ROWS = 60_000
"""At 20 to 70 µs per event per node, a turn this big keeps a node busy for longer than the
keep-alive timeout below unless the node works through it in slices."""
KEEPALIVE = (0.5, 3.0)
DEADLINE = 150.0


@pytest.fixture(params=["copy-up", "aggregate-subs"])
def chain(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Overlay]:
    """root <- mid <- tail, keep-alive timeout 3 s. Copy-up carries every row to the root;
    aggregate-subs is the default."""
    parents = {"root": None, "mid": "root", "tail": "mid"}
    overlay = Overlay(tmp_path, parents, request.param, keepalive=KEEPALIVE)
    try:
        for name in parents:
            overlay.start(name)
        yield overlay
    finally:
        overlay.stop()


def test_a_commit_of_many_rows_crosses_a_chain_without_cutting_a_link(chain: Overlay) -> None:
    protocol = chain.topology.read_text().split('"')[1]
    watch = [*FEDS, "watch", chain.address["root"], "<row $i>", "--count", str(ROWS)]
    watcher = subprocess.Popen(
        [*watch, "--timeout", str(DEADLINE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        with (
            Leaf(chain.address["tail"], protocol, name="leaf") as leaf,
            LeafConnection(leaf.stage_address) as task,
        ):
            leaf.wait_connected()
            task.stage(("job", None, 0, 0), [(record("row", i), None, None) for i in range(ROWS)])
            commit = Record(COMMIT, ("rows", "assert", "job", None, ((0, 0),), False))
            assert task.ask(commit)[0] == ROWS  # made visible at the leaf in one turn
            out, err = watcher.communicate(timeout=DEADLINE + 30)
    finally:
        watcher.kill()
        watcher.wait()
    # A cut link would retract what it carried (the watcher sees "-" lines), and the rows
    # asserted again after the re-link would arrive twice.
    lines = out.decode().splitlines()
    assert watcher.returncode == 0, err.decode()[-2000:]
    assert Counter(line[0] for line in lines) == {"+": ROWS}
    assert len(set(lines)) == ROWS
