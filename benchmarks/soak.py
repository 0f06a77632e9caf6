"""Bounded soak and fault timings on a 7-node overlay of real ``feds node`` processes.

Phase 1, **churn**: for ``--seconds`` (default 60), ``--clients`` concurrent client loops
(default 8), each attached to a random node, connect, assert a few values, observe a pattern,
send messages, sometimes leave abruptly (the connection is cut, not closed in order) and start
over. Before and after (once every client has left and the overlay is quiet), it prints per
node the state (assertions in the fragment, handlers in the index) and the RSS of its process.
The targets of issue 11: state back to the start, RSS growth under 10 % per node.

Phase 2, **faults** (``--faults``): with one assertion held at a leaf and queried at the root,
kill -9 its middle node (time until the root's view loses it), restart it (time until the view
has it again), then SIGSTOP the middle node (time until the keep-alive cuts it) and SIGCONT it
(time until healed).

Run::

    .venv/bin/python benchmarks/soak.py --seconds 60 --faults
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from feds import client
from feds.values import record

FEDS = [sys.executable, "-m", "feds.cli"]
NODES = {"top": None, "a": "top", "b": "top", "a1": "a", "a2": "a", "b1": "b", "b2": "b"}
KEEPALIVE = (0.5, 2.0)  # interval, timeout (seconds) of the soak's topology


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class Overlay:
    """``feds node`` processes on 127.0.0.1 for a tree given as ``{name: parent}`` (also used
    by ``tests/test_faults.py``)."""

    def __init__(
        self,
        where: Path,
        parents: dict[str, str | None],
        protocol: str = "aggregate-subs",
        keepalive: tuple[float, float] = KEEPALIVE,
    ) -> None:
        ports = free_ports(len(parents))
        self.address = {n: f"127.0.0.1:{p}" for n, p in zip(parents, ports, strict=True)}
        lines = [f'protocol = "{protocol}"', "[limits]"]
        lines += [f"keepalive-interval = {keepalive[0]}", f"keepalive-timeout = {keepalive[1]}"]
        for name, parent in parents.items():
            lines += [f"[nodes.{name}]", f'listen = "{self.address[name]}"']
            if parent:
                lines.append(f'parent = "{parent}"')
        self.topology = where / "overlay.toml"
        self.topology.write_text("\n".join(lines) + "\n")
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        """Start node ``name`` and wait until it listens."""
        proc = subprocess.Popen(
            [*FEDS, "node", str(self.topology), "--name", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        if "listening on" not in proc.stdout.readline():
            raise RuntimeError(f"feds node {name} did not start (exit {proc.wait()})")
        self.procs[name] = proc

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait()

    def rss_kib(self, name: str) -> int:
        status = Path(f"/proc/{self.procs[name].pid}/status").read_text()
        return int(
            next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]
        )

    async def state(self, name: str) -> tuple[int, int]:
        figures = (await client.status(self.address[name])).fields[0]
        return figures["fragment-assertions"], figures["index-handlers"]

    async def snapshot(self) -> dict[str, tuple[int, int, int]]:
        return {n: (*await self.state(n), self.rss_kib(n)) for n in NODES}


async def churn_loop(overlay: Overlay, seed: int, until: float, counts: dict) -> None:
    rng = random.Random(seed)
    while trio.current_time() < until:
        node = rng.choice(list(NODES))
        try:
            async with client.connect(overlay.address[node], name=f"soak{seed}") as ds:
                for i in range(rng.randint(1, 5)):
                    ds.assert_(record("soak", seed, i, b"x" * rng.randint(0, 2000)))
                async with ds.observe("<soak $who $i _>") as events:
                    for i in range(rng.randint(0, 20)):
                        ds.send(record("soak", seed, -i, b""))
                    await ds.sync(30)
                    with trio.move_on_after(0.05):
                        async for _ in events:
                            counts["events"] += 1
                    if rng.random() < 0.3:  # leave abruptly: cut the connection
                        ds.relay.close("soak: abrupt leave")
                        counts["abrupt"] += 1
                        continue
            counts["sessions"] += 1
        except client.FedsError:
            counts["errors"] += 1


async def churn(overlay: Overlay, seconds: float, clients: int) -> dict:
    counts = {"sessions": 0, "abrupt": 0, "events": 0, "errors": 0}
    until = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for seed in range(clients):
            nursery.start_soon(churn_loop, overlay, seed, until, counts)
    return counts


async def quiet(overlay: Overlay, start: dict[str, tuple[int, int, int]]) -> None:
    """Wait (up to 30 s) until every node's state is back to ``start``."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = {n: await overlay.state(n) for n in NODES}
        if all(states[n] == start[n][:2] for n in NODES):
            return
        await trio.sleep(0.5)


async def timed(condition, timeout: float = 60.0) -> float:
    """Seconds until ``await condition()`` is true."""
    started = time.monotonic()
    while not await condition():
        if time.monotonic() - started > timeout:
            return float("inf")
        await trio.sleep(0.02)
    return time.monotonic() - started


async def faults(overlay: Overlay) -> dict[str, float]:
    top = overlay.address["top"]

    async def seen() -> bool:
        try:
            async with client.connect(top, name="probe", timeout=5) as ds:
                return bool(await ds.query("<held $x>", 5))
        except client.FedsError:
            return False

    async def gone() -> bool:
        return not await seen()

    times: dict[str, float] = {}
    async with client.connect(overlay.address["a1"], name="holder", reconnect=True) as holder:
        holder.assert_(record("held", 1))
        await holder.sync()
        assert await seen()
        overlay.procs["a"].kill()
        await trio.to_thread.run_sync(overlay.procs["a"].wait)
        times["kill -9 middle: root's view loses it"] = await timed(gone)
        await trio.to_thread.run_sync(overlay.start, "a")  # (reading its output blocks)
        times["restart middle: root's view has it again"] = await timed(seen)
        overlay.procs["a"].send_signal(signal.SIGSTOP)
        times["SIGSTOP middle: root's view loses it"] = await timed(gone)
        overlay.procs["a"].send_signal(signal.SIGCONT)
        times["SIGCONT middle: root's view has it again"] = await timed(seen)
    return times


def table(before: dict, after: dict) -> str:
    rows = ["| node | assertions | handlers | RSS start (KiB) | RSS end (KiB) | growth |"]
    rows.append("| --- | --- | --- | --- | --- | --- |")
    for n in NODES:
        (a0, h0, r0), (a1, h1, r1) = before[n], after[n]
        rows.append(
            f"| {n} | {a0} → {a1} | {h0} → {h1} | {r0} | {r1} | {100 * (r1 - r0) / r0:+.1f} % |"
        )
    return "\n".join(rows)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as where:
        overlay = Overlay(Path(where), NODES, args.protocol)
        try:
            for name in NODES:
                overlay.start(name)
            await trio.sleep(2)
            # Warm up (first imports, first connections), then take the start figures.
            await churn(overlay, 3, args.clients)
            await trio.sleep(1)
            before = await overlay.snapshot()
            counts = await churn(overlay, args.seconds, args.clients)
            await quiet(overlay, before)
            await trio.sleep(1)
            after = await overlay.snapshot()
            print(f"churn: {args.seconds:g} s, {args.clients} client loops, {json.dumps(counts)}")
            print(table(before, after))
            if args.faults:
                for what, seconds in (await faults(overlay)).items():
                    print(f"{what}: {seconds:.2f} s")
        finally:
            overlay.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--protocol", default="aggregate-subs")
    parser.add_argument("--faults", action="store_true")
    trio.run(main, parser.parse_args())
