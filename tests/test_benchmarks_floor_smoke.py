"""Smoke tests of ``benchmarks/floor.py``.

A tiny run without NATS or Zenoh must work end to end (three floor nodes per implementation and
three feds nodes, clients at both ends, a table); no timing is asserted, as the machine may be
slow or busy. The floor router itself is checked in one process: routing by subject, and a
subscription travelling along a chain.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floor import SUBSCRIBE, Port, Router

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "floor.py"


class Recorder(Port):
    """A port that keeps the items written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[list[Any]] = []

    def write(self, data: bytes) -> None:
        assert int.from_bytes(data[:4], "big") == len(data) - 4
        self.items += msgpack.unpackb(data[4:])


def frame(*items: list[Any]) -> bytes:
    body = msgpack.packb(list(items))
    return len(body).to_bytes(4, "big") + body


def deliver(router: Router, source: Port, data: bytes) -> None:
    for port in router.route(source, data):
        port.flush()


def test_router_routes_by_subject_and_forwards_subscriptions() -> None:
    router = Router()
    up, sub, pub = Recorder(), Recorder(), Recorder()
    for port in (up, sub, pub):
        router.attach(port)
    deliver(router, sub, frame([SUBSCRIBE, "news"]))
    # Both other ports are asked for the subject, once, and never the one that asked.
    assert up.items == [[SUBSCRIBE, "news"]] and pub.items == [[SUBSCRIBE, "news"]]
    assert sub.items == []
    deliver(router, up, frame([SUBSCRIBE, "news"]))
    assert sub.items == [[SUBSCRIBE, "news"]] and pub.items == [[SUBSCRIBE, "news"]]
    # A frame split anywhere is routed once whole; other subjects are dropped.
    data = frame(["news", b"a"], ["other", b"x"], ["news", b"b"]) + frame(["news", b"c"])
    deliver(router, pub, data[:7])
    assert up.items[1:] == [] and sub.items[1:] == []
    deliver(router, pub, data[7:])
    assert up.items[1:] == sub.items[1:] == [["news", b"a"], ["news", b"b"], ["news", b"c"]]
    # Nothing goes back to its sender; a port attached later is asked at once.
    deliver(router, sub, frame(["news", b"d"]))
    assert up.items[-1] == ["news", b"d"] and sub.items[-1] == ["news", b"c"]
    late = Recorder()
    router.attach(late)
    late.flush()
    assert late.items == [[SUBSCRIBE, "news"]]
    router.detach(sub)
    deliver(router, pub, frame(["news", b"e"]))
    assert up.items[-1] == ["news", b"e"] and sub.items[-1] == ["news", b"c"]


def test_floor_benchmark_quick_without_peers() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--no-peers"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    table = [line.split("|")[1:-1] for line in result.stdout.splitlines() if line.startswith("| ")]
    body = {cells[0].strip(): cells[2].strip() for cells in table[1:]}  # system -> msgs/s
    assert set(body) == {"floor trio", "floor asyncio", "feds aggregate-subs"}, output
    assert all(rate[:1].isdigit() for rate in body.values()), output  # no "failed: ..."


def test_floor_breakdown_quick() -> None:
    command = [
        sys.executable,
        str(BENCHMARK),
        "--breakdown",
        "--quick",
        "--impls",
        "trio",
        "--nodes",
        "1",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    table = [line.split("|")[1:-1] for line in result.stdout.splitlines() if line.startswith("| ")]
    first = {cells[0].strip() for cells in table}
    assert {"floor trio", "feds aggregate-subs", "feds aggregate-subs, traced"} <= first, output
    assert {"decode", "turns", "encode", "rest"} <= first, output  # the traced parts
    header = next(cells for cells in table if cells[0].strip() == "system")
    assert [c.strip() for c in header[-2:]] == ["client task steps", "client I/O waits"], output
