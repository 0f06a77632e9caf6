"""Federated spaces for real: `feds spaces node` processes in a chain, used through their gates.

Tuples put through the root's gate are taken by concurrent getters at the other nodes' gates
while the middle node (the only path between them) is killed and restarted; getters that
send a get and reset their connection mid-take lose nothing. Every tuple is received exactly once.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
from pathlib import Path

import trio

from feds.spaces import ANY, Formal, RemoteSpace, SpaceError, wire
from tests.test_cli import FEDS, feds, free_ports, wait_for_line

N = 30
LINGER_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on with a zero timeout: closing the socket resets the connection."""


class Chain:
    """root <- mid <- tail, each hosting federated space ``jobs`` behind a KEEP gate."""

    def __init__(self, tmp_path: Path) -> None:
        ports = free_ports(6)
        self.topology = tmp_path / "chain.toml"
        self.topology.write_text(
            'protocol = "observer-flood"\n'
            f'[nodes.root]\nlisten = "127.0.0.1:{ports[0]}"\n'
            f'[nodes.mid]\nlisten = "127.0.0.1:{ports[1]}"\nparent = "root"\n'
            f'[nodes.tail]\nlisten = "127.0.0.1:{ports[2]}"\nparent = "mid"\n'
        )
        self.gates = {
            n: f"tcp://127.0.0.1:{p}"
            for n, p in zip(("root", "mid", "tail"), ports[3:], strict=True)
        }
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        proc = subprocess.Popen(
            [*FEDS, "spaces", "node", str(self.topology), name, f"{self.gates[name]}/?keep",
             "--federated", "jobs"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        self.procs[name] = proc
        wait_for_line(proc, "spaces jobs")

    def uri(self, name: str) -> str:
        return f"{self.gates[name]}/jobs?keep"

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGINT)
        for proc in self.procs.values():
            proc.wait(10)


async def wait_visible(uri: str, template: tuple, count: int) -> None:
    async with RemoteSpace(uri) as space:
        while len(await space.queryAll(*template)) < count:
            await trio.sleep(0.05)


async def test_getters_at_the_root_and_the_tail_take_each_tuple_once_while_mid_restarts(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path)
    try:
        for name in ("root", "mid", "tail"):
            chain.start(name)
        got: list[int] = []
        with trio.fail_after(60):
            await wait_visible(chain.uri("tail"), (ANY,), 0)  # the gate answers

            async def getter(name: str) -> None:
                async with RemoteSpace(chain.uri(name)) as space:
                    while len(got) < N:
                        try:
                            _, k = await space.get("job", Formal(int), timeout=0.5)
                        except SpaceError:
                            continue
                        got.append(k)

            async with RemoteSpace(chain.uri("root")) as root:
                for k in range(N):
                    await root.put("job", k)
                async with trio.open_nursery() as nursery:
                    for name in ("root", "tail", "tail"):
                        nursery.start_soon(getter, name)
                    while len(got) < N // 3:
                        await trio.sleep(0.01)
                    chain.procs["mid"].kill()  # the tail's link to the owner fails mid-stream
                    chain.procs["mid"].wait(10)
                    chain.start("mid")
        assert sorted(got) == list(range(N)), "a tuple was lost or received twice"
    finally:
        chain.stop()


async def test_a_getter_that_disconnects_mid_get_loses_nothing(tmp_path: Path) -> None:
    chain = Chain(tmp_path)
    try:
        for name in ("root", "mid", "tail"):
            chain.start(name)
        host, port = chain.gates["tail"].removeprefix("tcp://").split(":")
        request = wire.Request("get", "jobs", ("job", Formal(int)), True, False, "0")
        with trio.fail_after(60):
            async with RemoteSpace(chain.uri("root")) as root:
                for k in range(N):
                    await root.put("job", k)
            await wait_visible(chain.uri("tail"), ("job", ANY), N)
            for _ in range(N):  # each getter sends a get and resets: its take is on the way
                stream = await trio.open_tcp_stream(host, int(port))
                await stream.send_all(wire.encode_line(request.message()))
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
                await stream.aclose()  # a reset: whatever the gate writes now is lost
            received: list[int] = []
            async with RemoteSpace(chain.uri("mid")) as mid:
                while len(received) < N:  # tuples re-put at the tail may still be on their way
                    received += [k for _, k in await mid.getAll("job", Formal(int))]
                    await trio.sleep(0.05)
        assert sorted(received) == list(range(N)), "a tuple was lost or received twice"
    finally:
        chain.stop()


def test_spaces_node_refuses_bad_arguments_with_exit_code_2(tmp_path: Path) -> None:
    gate = "tcp://127.0.0.1:0/?keep"
    result = feds("spaces", "node", "nosuch.toml", "a", gate)
    assert result.returncode == 2 and "at least one --federated" in result.stderr
    result = feds("spaces", "node", "nosuch.toml", "a", gate, "--federated", "jobs")
    assert result.returncode == 2 and "nosuch.toml" in result.stderr
    topology = Chain(tmp_path).topology
    result = feds("spaces", "node", str(topology), "nobody", gate, "--federated", "jobs")
    assert result.returncode == 2 and "no node 'nobody'" in result.stderr
