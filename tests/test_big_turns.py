"""A publication of tens of thousands of rows made visible in one turn (a Spark commit) crosses a
chain of real ``feds node`` processes with tight keep-alives, and no link is cut: every node
keeps answering its links while it works through the big turn (issue 10's blocker, and issue 11's
"no input breaks the overlay")."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from benchmarks.soak import Overlay
from feds.actor import Turn
from feds.codec import encode_frame
from feds.driver import SLICE_EVENTS, Driver
from feds.limits import NetLimits
from feds.relay import CLIENT, PROTOCOL_VERSION, Hello
from feds.spark.leaf import Leaf
from feds.spark.wire import COMMIT, LeafConnection
from feds.values import FrozenDict, Record, Symbol, record
from tests.net_helpers import start_node
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


async def test_time_spent_on_a_big_turn_does_not_count_against_a_frame_being_received(
    nursery: trio.Nursery,
) -> None:
    """A frame begun just before its node got busy for longer than ``frame_timeout`` and
    completed soon after is accepted: the node was not reading meanwhile."""
    limits = NetLimits(frame_timeout=1.0, keepalive_interval=0.2, keepalive_timeout=100.0)
    runtime, port = await start_node(nursery, limits)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(
        encode_frame(Hello(PROTOCOL_VERSION, CLIENT, "raw", FrozenDict()).to_value())
    )
    with trio.fail_after(10):
        while not any(relay.ready for relay in runtime.relays):
            await trio.sleep(0.01)
    done = trio.Event()

    def busy(turn: Turn) -> Iterator[int]:  # two seconds of work in parts
        for _ in range(100):
            time.sleep(0.02)
            yield SLICE_EVENTS
        done.set()

    ping = encode_frame(Record(Symbol("ping"), ()))
    Driver.of(runtime.scheduler).act(runtime.node.facet, busy)  # type: ignore[union-attr]
    await stream.send_all(ping[:5])  # read while the node is busy
    await done.wait()
    await trio.sleep(0.5)
    await stream.send_all(ping[5:])
    received = b""
    with trio.fail_after(5):
        while encode_frame(Record(Symbol("pong"), ())) not in received:
            chunk = await stream.receive_some(65536)
            assert chunk, f"closed: {received!r}"
            received += chunk


async def test_a_stream_of_frames_each_read_ending_inside_one_is_not_a_slow_frame(
    nursery: trio.Nursery,
) -> None:
    """A link streaming frames for longer than ``frame_timeout``, each read ending in the
    middle of the next frame, keeps going: every frame is completed quickly."""
    limits = NetLimits(frame_timeout=0.5, keepalive_interval=0.1, keepalive_timeout=100.0)
    runtime, port = await start_node(nursery, limits)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(
        encode_frame(Hello(PROTOCOL_VERSION, CLIENT, "raw", FrozenDict()).to_value())
    )
    ping = encode_frame(Record(Symbol("ping"), ()))
    await stream.send_all(ping[:3])
    for _ in range(40):  # 2 s: each send completes a frame and begins the next
        await stream.send_all(ping[3:] + ping[:3])
        await trio.sleep(0.05)
    await stream.send_all(ping[3:])
    assert runtime.relays
    assert [relay.close_reason for relay in runtime.relays if relay.closed] == []
