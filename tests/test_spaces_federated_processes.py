"""Federated spaces for real: `feds node` processes in a chain, serving through the gates their
topology file declares.

Tuples put through the root's gate are taken by concurrent getters at the root's and the tail's
gates, also while the middle node (the only path between them, with no gate of its own) is killed
and restarted; getters that send a get and reset their connection mid-take lose nothing. Every
tuple is received exactly once. The captured jSpace exchange replays against the declared
gates' local spaces, and stopping a node closes its gates.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
from pathlib import Path

import trio

from feds.spaces import ANY, Formal, RemoteSpace, SpaceError, wire
from tests.test_cli import FEDS, free_ports, wait_for_line
from tests.test_spaces_wire import cannot_connect, replay_transcript

N = 30
LINGER_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on with a zero timeout: closing the socket resets the connection."""


class Chain:
    """root <- mid <- tail from one topology file: federated space ``jobs`` and the reference's
    local spaces (seq, queue, stack, pile) behind a KEEP gate at the root and a KEEP and a CONN
    gate at the tail; mid only relays."""

    def __init__(self, tmp_path: Path) -> None:
        ports = free_ports(6)
        self.topology = tmp_path / "chain.toml"
        self.gates = {
            "root": f"tcp://127.0.0.1:{ports[3]}",
            "tail": f"tcp://127.0.0.1:{ports[4]}",
            "tail-conn": f"tcp://127.0.0.1:{ports[5]}",
        }
        self.topology.write_text(
            'protocol = "observer-flood"\n'
            '[spaces]\njobs = "federated"\n'
            'seq = "sequential"\nqueue = "queue"\nstack = "stack"\npile = "pile"\n'
            f'[nodes.root]\nlisten = "127.0.0.1:{ports[0]}"\n'
            f'gates = ["{self.gates["root"]}/?keep"]\n'
            f'[nodes.mid]\nlisten = "127.0.0.1:{ports[1]}"\nparent = "root"\n'
            f'[nodes.tail]\nlisten = "127.0.0.1:{ports[2]}"\nparent = "mid"\n'
            f'gates = ["{self.gates["tail"]}/?keep", "{self.gates["tail-conn"]}/?conn"]\n'
        )
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        proc = subprocess.Popen(
            [*FEDS, "node", str(self.topology), "--name", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.procs[name] = proc
        wait_for_line(proc, "listening" if name == "mid" else "gate ")

    def uri(self, name: str, space: str = "jobs") -> str:
        mode = "conn" if name.endswith("-conn") else "keep"
        return f"{self.gates[name]}/{space}?{mode}"

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
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
                await stream.send_all(wire.encode_line(request.message()))
                await stream.aclose()  # a reset: whatever the gate writes now is lost
            received: list[int] = []
            async with RemoteSpace(chain.uri("root")) as root:
                while len(received) < N:  # tuples re-put at the tail may still be on their way
                    received += [k for _, k in await root.getAll("job", Formal(int))]
                    await trio.sleep(0.05)
        assert sorted(received) == list(range(N)), "a tuple was lost or received twice"
    finally:
        chain.stop()


async def test_a_declared_space_is_shared_through_gates_at_two_nodes(tmp_path: Path) -> None:
    chain = Chain(tmp_path)
    try:
        for name in ("root", "mid", "tail"):
            chain.start(name)
        with trio.fail_after(60):
            port = int(chain.gates["root"].rsplit(":", 1)[1])
            await replay_transcript("KEEP", port)  # the root's fresh local spaces
            port = int(chain.gates["tail-conn"].rsplit(":", 1)[1])
            await replay_transcript("CONN", port)  # the tail's own, through its CONN gate

            async with RemoteSpace(chain.uri("root")) as root:
                await root.put("hello", 1)
            async with RemoteSpace(chain.uri("tail-conn")) as tail:
                assert await tail.get("hello", Formal(int), timeout=30) == ("hello", 1)
                assert await tail.queryp("hello", ANY) is None

            got: list[tuple[str, int]] = []
            async with trio.open_nursery() as nursery:

                async def getter(name: str) -> None:
                    async with RemoteSpace(chain.uri(name)) as space:
                        while True:
                            got.append((name, (await space.get("race", Formal(int)))[1]))

                for name in ("root", "tail"):  # two getters at two nodes, concurrently
                    nursery.start_soon(getter, name)
                for k in range(N):
                    async with RemoteSpace(chain.uri("tail" if k % 2 else "root")) as space:
                        await space.put("race", k)
                while len(got) < N:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
            assert sorted(k for _, k in got) == list(range(N)), "lost or received twice"

            chain.procs["tail"].send_signal(signal.SIGINT)  # stopping the node closes its gates
            assert chain.procs["tail"].wait(10) == 0
            assert await cannot_connect(chain.uri("tail"))
            assert await cannot_connect(chain.uri("tail-conn"))
    finally:
        chain.stop()
