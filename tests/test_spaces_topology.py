"""Spaces and gates declared in a topology file: the schema, its errors, and `feds up`."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from feds import topology as topo
from feds.spaces import Formal, RemoteSpace
from feds.spaces.topology_spaces import KINDS, TopologySpaces
from feds.topology import TopologyError
from tests.test_cli import FEDS, feds, wait_for_line

SPACES = '[spaces]\njobs = "federated"\nscratch = "queue"\n'


def nodes(root_extra: str = "", leaf_extra: str = "") -> str:
    return (
        f'[nodes.root]\nlisten = "127.0.0.1:7400"\n{root_extra}\n'
        f'[nodes.leaf]\nlisten = "127.0.0.1:7401"\nparent = "root"\n{leaf_extra}\n'
    )


def gates(*uris: str) -> str:
    return "gates = [" + ", ".join(f'"{u}"' for u in uris) + "]"


GOOD = SPACES + nodes(gates("tcp://127.0.0.1:31415/?keep"), gates("tcp://127.0.0.1:31416/?conn"))


def test_a_topology_declares_spaces_and_the_gates_of_its_nodes() -> None:
    t = topo.loads(GOOD)
    assert t.spaces is not None
    assert t.spaces.spaces == {"jobs": "federated", "scratch": "queue"}
    assert t.spaces.of("root") == ("tcp://127.0.0.1:31415/?keep",)
    assert t.spaces.of("leaf") == ("tcp://127.0.0.1:31416/?conn",)
    assert topo.loads(topo.dumps(t)) == t
    assert topo.loads(nodes()).spaces is None  # a file without spaces has none
    assert topo.loads("[spaces]\n" + nodes("gates = []")).spaces is None  # nor one with no entry


def test_every_kind_is_accepted_and_round_trips() -> None:
    text = (
        "[spaces]\n"
        + "".join(
            f'{kind}-space = "{kind}"\n'
            for kind in ("federated", "sequential", "queue", "stack", "pile", "random")
        )
        + nodes(gates("127.0.0.1/?mode=KEEP", "tcp://127.0.0.1:31416"))
    )
    t = topo.loads(text)
    assert len(t.spaces.spaces) == 6
    assert topo.loads(topo.dumps(t)) == t


@st.composite
def topologies_with_spaces(draw: st.DrawFn) -> topo.Topology:
    """A parent-style topology, and spaces served at some of its nodes' gates."""
    t = topo.generate(f"random-tree:n={draw(st.integers(1, 6))}", draw(st.integers(0, 99)))
    names = st.from_regex(r"[A-Za-z0-9_.-]{1,8}", fullmatch=True)
    spaces = draw(st.dictionaries(names, st.sampled_from(KINDS), min_size=1, max_size=4))
    ports = iter(range(31415, 31500))
    modes = st.sampled_from(["?keep", "?conn", "?KEEP", "?mode=conn", ""])
    gates = {
        n: tuple(
            f"tcp://127.0.0.1:{next(ports)}/{draw(modes)}" for _ in range(draw(st.integers(1, 2)))
        )
        for n in draw(st.lists(st.sampled_from(list(t.nodes)), min_size=1, unique=True))
    }
    return replace(t, spaces=TopologySpaces(spaces, gates))


@given(topologies_with_spaces())
def test_spaces_and_gates_round_trip_through_toml(t: topo.Topology) -> None:
    back = topo.loads(topo.dumps(t))
    assert back == t
    assert list(back.spaces.spaces) == list(t.spaces.spaces)  # file order is kept


BAD = {
    "unknown-top-key": (
        '[space]\njobs = "federated"\n' + nodes(),
        ["unknown key 'space'", "top level", "did you mean 'spaces'"],
    ),
    "unknown-node-key": (
        SPACES + nodes('gate = ["tcp://127.0.0.1:31415/?keep"]'),
        ["unknown key 'gate'", "[nodes.root]", "did you mean 'gates'"],
    ),
    "unknown-kind": (
        '[spaces]\njobs = "fedrated"\n' + nodes(gates("tcp://127.0.0.1:31415/?keep")),
        ["[spaces] jobs", "unknown kind 'fedrated'", "did you mean 'federated'"],
    ),
    "kind-not-a-string": (
        "[spaces]\njobs = 3\n" + nodes(gates("tcp://127.0.0.1:31415/?keep")),
        ["[spaces] jobs must be a kind"],
    ),
    "bad-space-name": (
        '[spaces]\n"a/b" = "queue"\n' + nodes(gates("tcp://127.0.0.1:31415/?keep")),
        ["[spaces]", "'a/b' cannot be a space name"],
    ),
    "spaces-not-a-table": (
        'spaces = ["jobs"]\n' + nodes(gates("tcp://127.0.0.1:31415/?keep")),
        ["[spaces] must be a table"],
    ),
    "gates-not-an-array": (
        SPACES + nodes('gates = "tcp://127.0.0.1:31415/?keep"'),
        ["node 'root'", "gates must be an array"],
    ),
    "gate-not-a-string": (SPACES + nodes("gates = [31415]"), ["node 'root'", "gates", "31415"]),
    "bad-scheme": (
        SPACES + nodes(gates("udp://127.0.0.1:31415/?keep")),
        ["node 'root': gates", "only tcp://"],
    ),
    "bad-port": (
        SPACES + nodes(gates("tcp://127.0.0.1:99999/?keep")),
        ["node 'root': gates", "bad port"],
    ),
    "unknown-mode": (
        SPACES + nodes(gates("tcp://127.0.0.1:31415/?fast")),
        ["node 'root': gates", "unknown mode 'fast'"],
    ),
    "push-mode": (
        SPACES + nodes(gates("tcp://127.0.0.1:31415/?push")),
        ["node 'root': gates", "PUSH is not supported"],
    ),
    "pull-mode": (
        SPACES + nodes("", gates("tcp://127.0.0.1:31415/?mode=pull")),
        ["node 'leaf': gates", "PULL is not supported"],
    ),
    "gate-names-a-space": (
        SPACES + nodes(gates("tcp://127.0.0.1:31415/jobs?keep")),
        ["node 'root': gates", "names a space"],
    ),
    "port-0": (
        SPACES + nodes(gates("tcp://127.0.0.1:0/?keep")),
        ["node 'root': gates", "port 0"],
    ),
    "same-port-two-nodes": (
        SPACES + nodes(gates("tcp://127.0.0.1:31415/?keep"), gates("tcp://127.0.0.1:31415/?conn")),
        ["node 'leaf': gates", "127.0.0.1:31415", "node 'root'"],
    ),
    "same-port-one-node": (
        SPACES + nodes(gates("tcp://127.0.0.1:31415/?keep", "127.0.0.1:31415/?conn")),
        ["node 'root': gates", "127.0.0.1:31415", "the gate tcp://127.0.0.1:31415/?keep"],
    ),
    "gate-on-a-node-port": (
        SPACES + nodes("", gates("tcp://127.0.0.1:7400/?keep")),
        ["node 'leaf': gates", "127.0.0.1:7400", "as node 'root' does"],
    ),
    "gate-beyond-loopback": (
        SPACES + nodes(gates("tcp://0.0.0.0:31415/?keep")),
        ["node 'root': gates", "beyond loopback", "allow-unauthenticated"],
    ),
    "gates-without-spaces": (
        nodes(gates("tcp://127.0.0.1:31415/?keep")),
        ["node 'root'", "[spaces] table, but there is none"],
    ),
    "spaces-without-gates": (SPACES + nodes(), ["[spaces]", "no node serves them"]),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_bad_spaces_declaration_is_refused_naming_the_file_node_and_key(case) -> None:
    text, needles = BAD[case]
    with pytest.raises(TopologyError) as info:
        topo.loads(text, source="deploy.toml")
    message = str(info.value)
    assert message.startswith("deploy.toml: "), message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


def test_a_port_0_gate_is_allowed_only_for_tests_and_in_process_runs() -> None:
    text = SPACES + nodes(gates("tcp://127.0.0.1:0/?keep", "tcp://127.0.0.1:0/?conn"))
    t = topo.loads(text, allow_ephemeral=True)
    assert t.spaces.of("root") == ("tcp://127.0.0.1:0/?keep", "tcp://127.0.0.1:0/?conn")


def test_a_gate_beyond_loopback_needs_allow_unauthenticated() -> None:
    security = "[security]\nallow-unauthenticated = true\n"
    t = topo.loads(security + SPACES + nodes(gates("tcp://0.0.0.0:31415/?keep")))
    assert t.spaces.of("root") == ("tcp://0.0.0.0:31415/?keep",)
    assert topo.loads(topo.dumps(t)) == t


def test_a_programmatic_topology_checks_its_spaces_against_its_nodes() -> None:
    t = topo.loads(GOOD)
    with pytest.raises(TopologyError, match="gates are given for 'nobody', which is not a node"):
        replace(t, spaces=TopologySpaces({"jobs": "federated"}, {"nobody": ("127.0.0.1:1/",)}))
    with pytest.raises(TopologyError, match="PUSH is not supported"):
        TopologySpaces({"jobs": "federated"}, {"root": ("127.0.0.1:1/?push",)})


def test_feds_topology_check_and_feds_node_report_a_bad_gate_with_the_file_name(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(SPACES + nodes(gates("tcp://127.0.0.1:31415/?push")))
    result = feds("topology", "check", str(path))
    assert result.returncode == 1  # check's "invalid"
    assert f"{path}: node 'root': gates" in result.stdout + result.stderr
    result = feds("node", str(path), "--name", "root")
    assert result.returncode == 2  # a usage error: nothing starts
    assert f"{path}: node 'root': gates" in result.stderr


async def test_feds_up_serves_the_declared_spaces_at_every_gate(tmp_path: Path) -> None:
    """`feds up --any-port`: a federated space through two nodes' gates, a local queue at each."""
    path = tmp_path / "spaces.toml"
    path.write_text(GOOD)
    proc = subprocess.Popen(
        [*FEDS, "up", str(path), "--any-port"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        uris = [wait_for_line(proc, "gate ").split()[1] for _ in range(2)]
        assert all(":31415/" not in u and ":31416/" not in u for u in uris), "--any-port"
        first, second = (u.replace("/?", "/{}?") for u in uris)
        with trio.fail_after(30):
            async with RemoteSpace(first.format("jobs")) as a:
                await a.put("job", 1)
            async with RemoteSpace(second.format("jobs")) as b:
                assert await b.get("job", Formal(int), timeout=20) == ("job", 1)
            async with RemoteSpace(first.format("scratch")) as a:
                await a.put("only here")
            async with RemoteSpace(second.format("scratch")) as b:
                assert await b.queryAll(Formal(str)) == []  # a local space at each node
    finally:
        proc.terminate()
        proc.wait(10)
