"""Tests for topology files: parsing, validation messages, spanning trees, generators, the CLI."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds import topology as topo
from feds.cli import main
from feds.topology import Link, NodeSpec, Topology, TopologyError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "topology"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.toml"))


def parents_of(t: Topology) -> dict[str, str | None]:
    return {n: s.parent for n, s in t.nodes.items()}


# --------------------------------------------------------------------------------------------
# example files


def test_all_expected_examples_exist() -> None:
    names = {p.name for p in EXAMPLE_FILES}
    assert {"chain3.toml", "star.toml", "binary7.toml", "tree15.toml", "mesh.toml"} <= names


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_loads_and_has_a_header(path: Path) -> None:
    t = topo.load(path)
    assert t.root in t.nodes
    assert t.order()[0] == t.root
    assert sorted(t.order()) == sorted(t.nodes)
    assert path.read_text().startswith("#"), "each example starts with a comment header"
    ports = [s.port for s in t.nodes.values()]
    assert all(7400 <= p <= 7499 for p in ports)
    assert topo.loads(topo.dumps(t)) == t


def test_example_ports_are_distinct_across_files() -> None:
    seen: dict[int, str] = {}
    for path in EXAMPLE_FILES:
        for spec in topo.load(path).nodes.values():
            assert spec.port not in seen, f"{path.name} reuses {spec.port} of {seen[spec.port]}"
            seen[spec.port] = path.name


def test_chain3() -> None:
    t = topo.load(EXAMPLES / "chain3.toml")
    assert (len(t), t.root, t.protocol, t.height()) == (3, "root", "aggregate-subs", 2)
    assert t.order() == ["root", "mid", "tail"]
    assert t.path_to_root("tail") == ["tail", "mid", "root"]
    assert t.leaves() == ["tail"]
    assert t.address("mid") == ("127.0.0.1", 7401)


def test_star() -> None:
    t = topo.load(EXAMPLES / "star.toml")
    assert (len(t), t.root, t.protocol, t.height()) == (6, "hub", "copy-up", 1)
    assert t.children("hub") == ["leaf1", "leaf2", "leaf3", "leaf4", "leaf5"]
    assert t.leaves() == t.children("hub")


def test_binary7() -> None:
    t = topo.load(EXAMPLES / "binary7.toml")
    assert (len(t), t.protocol, t.height()) == (7, "aggregate-subs", 2)
    for name in t:
        assert len(t.children(name)) == (0 if t.depth(name) == 2 else 2)
    assert t.listen_address("b2") == ("127.0.0.1", 7426)


def test_tree15() -> None:
    t = topo.load(EXAMPLES / "tree15.toml")
    assert (len(t), t.root, t.height()) == (15, "hq", 3)
    assert t.description
    assert {t.depth(leaf) for leaf in t.leaves()} == {2, 3}


def test_mesh_is_the_true_minimum_spanning_tree() -> None:
    t = topo.load(EXAMPLES / "mesh.toml")
    assert t.links is not None and len(t.links) > len(t) - 1
    g = t.graph()
    expected = nx.minimum_spanning_tree(g, weight="cost").size(weight="cost")
    assert t.total_cost() == pytest.approx(expected) == 8
    # the documented tie: dc2-e3 beats e2-e4 (both cost 2) because ("dc2", "e3") sorts first
    assert t.parent("e3") == "dc2"
    assert t.parent("e4") == "e3"
    assert t.edge_cost("e3") == 2
    assert t.edge_cost("core") is None
    tree = t.tree()
    assert tree.number_of_edges() == len(t) - 1
    assert all(g.has_edge(u, v) for u, v in tree.edges)
    assert tree.edges["dc2", "e3"]["cost"] == 2


# --------------------------------------------------------------------------------------------
# helpers


def test_tree_helpers() -> None:
    t = topo.from_parents({"r": None, "a": "r", "b": "r", "c": "a", "d": "c"})
    assert t.children("r") == ["a", "b"]
    assert t.children("d") == []
    assert [t.depth(n) for n in "rabcd"] == [0, 1, 1, 2, 3]
    assert t.path_to_root("d") == ["d", "c", "a", "r"]
    assert t.path_to_root("r") == ["r"]
    assert t.leaves() == ["b", "d"]
    assert t.order() == ["r", "a", "b", "c", "d"]
    assert t.height() == 3
    tree = t.tree()
    assert isinstance(tree, nx.DiGraph)
    assert set(tree.edges) == {("r", "a"), ("r", "b"), ("a", "c"), ("c", "d")}
    assert tree.nodes["c"] == {"host": "127.0.0.1", "port": 7403}
    assert t.edge_cost("a") is None and t.total_cost() is None
    assert len(t) == 5 and "a" in t and "z" not in t and list(t) == list("rabcd")
    with pytest.raises(KeyError, match="no node named 'z'"):
        t.children("z")


def test_single_node() -> None:
    t = topo.loads('[nodes.solo]\nlisten = "127.0.0.1:7400"\n')
    assert (t.root, t.height(), t.leaves(), t.order()) == ("solo", 0, ["solo"], ["solo"])


def test_address_uses_advertise_and_maps_wildcards() -> None:
    t = topo.loads(
        """
        [nodes.r]
        listen = "0.0.0.0:7400"
        [nodes.a]
        listen = "0.0.0.0:7401"
        advertise = "10.0.0.5:7401"
        parent = "r"
        [nodes.b]
        listen = "[::]:7402"
        parent = "r"
        """
    )
    assert t.address("r") == ("127.0.0.1", 7400)
    assert t.listen_address("r") == ("0.0.0.0", 7400)
    assert t.address("a") == ("10.0.0.5", 7401)
    assert t.address("b") == ("::1", 7402)
    assert t.nodes["b"].listen == "[::]:7402"


def test_defaults_host_and_description() -> None:
    t = topo.loads(
        """
        description = "d"
        [defaults]
        host = "10.1.1.1"
        [nodes.r]
        port = 7400
        description = "the root"
        [nodes.a]
        port = 7401
        host = "10.1.1.2"
        parent = "r"
        """
    )
    assert t.listen_address("r") == ("10.1.1.1", 7400)
    assert t.listen_address("a") == ("10.1.1.2", 7401)
    assert t.nodes["r"].description == "the root"
    assert topo.loads(topo.dumps(t)) == t


@pytest.mark.parametrize(
    "text",
    [
        '[defaults]\ntls = {cert = "c.pem"}\n[nodes.r]\nport = 7400\n',
        '[nodes.r]\nport = 7400\ntls = {cert = "c.pem"}\n',
    ],
)
def test_per_node_tls_is_refused_not_ignored(text: str) -> None:
    with pytest.raises(topo.TopologyError, match="per-node tls settings are not supported"):
        topo.loads(text)


def test_limits_and_security_are_read_checked_and_written_back(tmp_path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        "[limits]\nkeepalive-timeout = 9\nmax-connections = 10\n"
        '[security]\nsecret-file = "secrets.toml"\n'
        "[nodes.r]\nport = 7400\n"
    )
    t = topo.load(path)
    assert t.limits.keepalive_timeout == 9 and t.limits.max_connections == 10
    assert t.secret_file == str(tmp_path / "secrets.toml")  # next to the topology file
    assert topo.loads(topo.dumps(t)) == t
    with pytest.raises(topo.TopologyError, match="unknown limit 'max-conections'"):
        topo.loads("[limits]\nmax-conections = 3\n[nodes.r]\nport = 7400\n")
    with pytest.raises(topo.TopologyError, match="unknown key 'secret' in \\[security\\]"):
        topo.loads('[security]\nsecret = "x"\n[nodes.r]\nport = 7400\n')


def test_port_zero_only_when_allowed() -> None:
    text = '[nodes.r]\nlisten = "127.0.0.1:0"\n[nodes.a]\nport = 0\nparent = "r"\n'
    with pytest.raises(TopologyError, match="port 0"):
        topo.loads(text)
    t = topo.loads(text, allow_ephemeral=True)  # two port-0 nodes are not a clash
    assert t.listen_address("a") == ("127.0.0.1", 0)
    g = topo.generate("chain:n=3", base_port=0)
    assert {s.port for s in g.nodes.values()} == {0}


def test_parse_address() -> None:
    assert topo.parse_address("example.org:80") == ("example.org", 80)
    assert topo.parse_address("[::1]:7400") == ("::1", 7400)
    assert topo.format_address("::1", 7400) == "[::1]:7400"
    for bad in ["7400", ":7400", "host:", "host:x", "::1:7400", "a b:1", "h:65536"]:
        with pytest.raises(TopologyError):
            topo.parse_address(bad)


# --------------------------------------------------------------------------------------------
# errors: each names what is at fault


def node(name: str, port: int, parent: str | None = None) -> str:
    text = f'[nodes.{name}]\nlisten = "127.0.0.1:{port}"\n'
    return text + (f'parent = "{parent}"\n' if parent else "")


def link(a: str, b: str, cost: object = None) -> str:
    return f'[[links]]\na = "{a}"\nb = "{b}"\n' + (f"cost = {cost}\n" if cost is not None else "")


GRAPH3 = 'root = "r"\n' + node("r", 7400) + node("a", 7401) + node("b", 7402)

ERRORS = {
    "toml-syntax": ("[nodes.r]\nlisten = \n", ["invalid TOML", "line 2"]),
    "unknown-protocol": (
        'protocol = "gossip"\n' + node("r", 7400),
        ["unknown protocol 'gossip'", "copy-up", "observer-flood", "aggregate-subs"],
    ),
    "missing-listen": (node("r", 7400) + "[nodes.a]\nparent = 'r'\n", ["node 'a' has no listen"]),
    "bad-address": (
        '[nodes.r]\nlisten = "localhost"\n',
        ["node 'r'", "bad address 'localhost'", "host:port"],
    ),
    "bad-port": ('[nodes.r]\nlisten = "h:99999"\n', ["node 'r'", "99999"]),
    "port-not-int": ('[nodes.r]\nport = "7400"\n', ["node 'r'", "port '7400'"]),
    "v6-without-brackets": ('[nodes.r]\nlisten = "::1:7400"\n', ["node 'r'", "brackets"]),
    "unknown-parent": (
        node("r", 7400) + node("c", 7401, "x"),
        ["node 'c' names parent 'x', which is not a node"],
    ),
    "self-parent": (node("r", 7400) + node("a", 7401, "a"), ["node 'a' names itself as parent"]),
    "two-roots": (
        node("a", 7400) + node("b", 7401) + node("c", 7402, "a"),
        ["nodes 'a' and 'b' both have no parent"],
    ),
    "three-roots": (
        node("a", 7400) + node("b", 7401) + node("c", 7402),
        ["nodes 'a', 'b' and 'c' all have no parent"],
    ),
    "no-root": (
        node("a", 7400, "b") + node("b", 7401, "a"),
        ["no root", "parent links form a cycle: a -> b -> a"],
    ),
    "cycle": (
        node("r", 7400)
        + node("d", 7404, "b")
        + node("a", 7401, "b")
        + node("b", 7402, "c")
        + node("c", 7403, "a"),
        ["parent links form a cycle: a -> b -> c -> a", "'d'", "not connected to root 'r'"],
    ),
    "root-key-mismatch": (
        'root = "a"\n' + node("r", 7400) + node("a", 7401, "r"),
        ["root is 'a' but 'r' is the node without a parent"],
    ),
    "duplicate-address": (
        node("a", 7400) + node("b", 7400, "a"),
        ["nodes 'a' and 'b' both listen on 127.0.0.1:7400"],
    ),
    "duplicate-address-defaults": (
        '[defaults]\nhost = "127.0.0.1"\n[nodes.a]\nport = 7400\n'
        '[nodes.b]\nlisten = "127.0.0.1:7400"\nparent = "a"\n',
        ["nodes 'a' and 'b' both listen on 127.0.0.1:7400"],
    ),
    "listen-and-port": ('[nodes.r]\nlisten = "h:1"\nport = 2\n', ["node 'r'", "not both"]),
    "no-nodes": ('protocol = "copy-up"\n', ["no nodes"]),
    "bad-node-name": ('[nodes."a b"]\nlisten = "h:1"\n', ["node name 'a b' is not allowed"]),
    "unknown-top-key": (
        'protcol = "copy-up"\n' + node("r", 7400),
        ["unknown key 'protcol'", "top level", "did you mean 'protocol'"],
    ),
    "unknown-node-key": (
        node("r", 7400) + node("a", 7401) + 'parnet = "r"\n',
        ["unknown key 'parnet'", "[nodes.a]", "did you mean 'parent'"],
    ),
    "unknown-defaults-key": ("[defaults]\nport = 1\n" + node("r", 7400), ["unknown key 'port'"]),
    "unknown-link-key": (GRAPH3 + link("r", "a") + "weight = 2\n", ["unknown key 'weight'"]),
    "mixed-styles": (
        node("r", 7400) + node("a", 7401, "r") + link("r", "a"),
        ["node 'a' has a parent", "[[links]]", "not both"],
    ),
    "links-without-root": (node("r", 7400) + node("a", 7401) + link("r", "a"), ["needs root"]),
    "graph-root-unknown": (
        'root = "x"\n' + node("r", 7400) + link("r", "r2"),
        ["root 'x' is not a node"],
    ),
    "link-unknown-node": (
        GRAPH3 + link("r", "a") + link("a", "q"),
        ["link 'a' -- 'q' names 'q', which is not a node"],
    ),
    "self-loop": (GRAPH3 + link("r", "a") + link("b", "b"), ["link 'b' -- 'b' is a self-loop"]),
    "negative-cost": (
        GRAPH3 + link("r", "a") + link("a", "b", -1),
        ["link 'a' -- 'b' has negative cost -1"],
    ),
    "cost-not-number": (GRAPH3 + link("r", "a", '"cheap"'), ["link 'r' -- 'a'", "'cheap'"]),
    "cost-nan": (GRAPH3 + link("r", "a", "nan"), ["link 'r' -- 'a'", "not a number"]),
    "duplicate-link": (
        GRAPH3 + link("r", "a") + link("a", "r", 2) + link("a", "b"),
        ["link 'a' -- 'r' is given twice"],
    ),
    "link-missing-end": (GRAPH3 + '[[links]]\na = "r"\n', ["link #1 has no 'b'"]),
    "disconnected-graph": (
        'root = "r"\n' + node("r", 7400) + node("a", 7401) + node("z", 7402) + link("r", "a"),
        ["node 'z' is not connected to root 'r'"],
    ),
    "disconnected-graph-many": (
        GRAPH3 + node("z", 7403) + link("a", "b"),
        ["nodes 'a', 'b' and 'z' are not connected to root 'r'"],
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_name_what_is_at_fault(case: str) -> None:
    text, fragments = ERRORS[case]
    with pytest.raises(TopologyError) as info:
        topo.loads(text, source="bad.toml")
    message = str(info.value)
    assert message.startswith("bad.toml: ")
    assert info.value.source == "bad.toml"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_error_is_a_value_error_and_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text(node("r", 7400) + node("c", 7401, "x"))
    with pytest.raises(ValueError, match=r"x\.toml: node 'c' names parent 'x'"):
        topo.load(path)
    with pytest.raises(FileNotFoundError):
        topo.load(tmp_path / "missing.toml")


def test_direct_construction_is_validated() -> None:
    nodes = {"r": NodeSpec("r", "h", 1), "a": NodeSpec("a", "h", 2, "r")}
    assert Topology("copy-up", nodes, "r").children("r") == ["a"]
    with pytest.raises(TopologyError, match="root is 'a' but 'r'"):
        Topology("copy-up", nodes, "a")
    with pytest.raises(TopologyError, match="root 'x' is not a node"):
        Topology("copy-up", nodes, "x")
    with pytest.raises(TopologyError, match="unknown protocol"):
        Topology("nope", nodes, "r")
    with pytest.raises(TopologyError, match="stored under"):
        Topology("copy-up", {"q": NodeSpec("r", "h", 1)}, "q")
    graph_nodes = {"r": NodeSpec("r", "h", 1), "a": NodeSpec("a", "h", 2, "b"), **{
        "b": NodeSpec("b", "h", 3)}}  # fmt: skip
    links = (Link("r", "a"), Link("r", "b"), Link("a", "b", 5))
    with pytest.raises(TopologyError, match="node 'a' has parent 'b' but the minimum spanning"):
        Topology("copy-up", graph_nodes, "r", links)


# --------------------------------------------------------------------------------------------
# spanning trees: deterministic under ties, and minimal


def tie_graph(names: list[str], order_seed: int) -> nx.Graph:
    """The complete graph on ``names``, every cost 1, nodes and edges inserted in a shuffled
    order."""
    rng = random.Random(order_seed)
    nodes = names[:]
    rng.shuffle(nodes)
    edges = list(itertools.combinations(names, 2))
    rng.shuffle(edges)
    edges = [(b, a) if rng.random() < 0.5 else (a, b) for a, b in edges]
    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges, cost=1)
    return g


def test_all_ties_are_broken_by_sorted_endpoint_names() -> None:
    names = ["m", "c", "x", "a", "q", "f"]
    trees = [parents_of(topo.from_graph(tie_graph(names, s), "q")) for s in range(30)]
    assert all(tree == trees[0] for tree in trees)
    # Kruskal takes (a, c), (a, f), (a, m), (a, q), (a, x) first: a star around 'a'
    assert trees[0] == {"q": None, "a": "q", "c": "a", "f": "a", "m": "a", "x": "a"}


def test_ties_in_files_do_not_depend_on_link_order() -> None:
    names = ["n1", "n2", "n3", "n4", "n5"]
    pairs = list(itertools.combinations(names, 2))
    results = set()
    for seed in range(20):
        rng = random.Random(seed)
        rng.shuffle(pairs)
        text = 'root = "n3"\n' + "".join(node(n, 7400 + i) for i, n in enumerate(names))
        text += "".join(link(*(p if rng.random() < 0.5 else p[::-1]), 2) for p in pairs)
        results.add(tuple(sorted(parents_of(topo.loads(text)).items(), key=str)))
    assert len(results) == 1


def test_partial_ties() -> None:
    # a square r-a-b-c-r with one cheap diagonal; the three cost-2 sides tie for two places
    g = nx.Graph()
    g.add_edge("r", "a", cost=2)
    g.add_edge("a", "b", cost=2)
    g.add_edge("b", "c", cost=2)
    g.add_edge("c", "r", cost=3)
    g.add_edge("r", "b", cost=1)
    t = topo.from_graph(g, "r")
    # (r, b) first; then among cost 2: (a, b) joins a, (b, c) joins c; (a, r) would close a loop
    assert parents_of(t) == {"r": None, "a": "b", "b": "r", "c": "b"}
    assert t.total_cost() == 5


@given(st.integers(0, 10_000), st.integers(2, 14), st.floats(0.1, 0.9), st.integers(1, 4))
def test_tree_is_minimal_on_random_graphs(seed: int, n: int, p: float, maxcost: int) -> None:
    t = topo.generate(f"random-graph:n={n},p={p},maxcost={maxcost}", seed)
    assert len(t) == n and nx.is_tree(t.tree().to_undirected())
    best = nx.minimum_spanning_tree(t.graph(), weight="cost").size(weight="cost")
    assert t.total_cost() == pytest.approx(best)


def test_from_graph_names_and_weight() -> None:
    g = nx.cycle_graph(4)
    nx.set_edge_attributes(g, {(0, 1): 5, (1, 2): 1, (2, 3): 1, (3, 0): 1}, "latency")
    t = topo.from_graph(g, 0, weight="latency", base_port=9000, protocol="observer-flood")
    assert parents_of(t) == {"0": None, "1": "2", "2": "3", "3": "0"}
    assert t.listen_address("3") == ("127.0.0.1", 9003)
    assert t.protocol == "observer-flood"
    with pytest.raises(TopologyError, match="undirected"):
        topo.from_graph(nx.DiGraph(g), 0)
    with pytest.raises(TopologyError, match="root 9"):
        topo.from_graph(g, 9)


def test_from_parents_errors() -> None:
    with pytest.raises(TopologyError, match="nodes 'a' and 'b' both have no parent"):
        topo.from_parents({"a": None, "b": None})
    with pytest.raises(TopologyError, match="outside"):
        topo.from_parents({"a": None, "b": "a"}, base_port=65535)


# --------------------------------------------------------------------------------------------
# generators


def test_generate_chain() -> None:
    t = topo.generate("chain:n=10")
    assert len(t) == 10 and t.root == "n0" and t.height() == 9
    assert t.order() == [f"n{i}" for i in range(10)]
    assert t.leaves() == ["n9"]
    assert [t.listen_address(f"n{i}")[1] for i in range(3)] == [7400, 7401, 7402]


def test_generate_star() -> None:
    t = topo.generate("star:n=20", base_port=7000)
    assert len(t) == 20 and t.height() == 1 and len(t.leaves()) == 19
    assert t.address("n19") == ("127.0.0.1", 7019)


@pytest.mark.parametrize(("k", "depth"), [(3, 4), (2, 3), (1, 5), (4, 0), (5, 2)])
def test_generate_balanced(k: int, depth: int) -> None:
    t = topo.generate(f"balanced:k={k},depth={depth}")
    expected = depth + 1 if k == 1 else (k ** (depth + 1) - 1) // (k - 1)
    assert len(t) == expected and t.height() == depth
    for name in t:
        assert len(t.children(name)) == (0 if t.depth(name) == depth else k)


def test_generate_random_tree() -> None:
    t = topo.generate("random-tree:n=50", seed=4)
    assert len(t) == 50 and t.root == "n0"
    assert nx.is_tree(t.tree().to_undirected())
    assert topo.generate("random-tree:n=50", seed=4) == t
    assert topo.generate("random-tree:n=50", seed=5) != t
    assert len(topo.generate("random-tree:n=1")) == 1
    assert len(topo.generate("random-tree:n=2")) == 2


def test_generate_random_graph_is_connected_and_seeded() -> None:
    t = topo.generate("random-graph:n=50,p=0.1", seed=1)
    assert len(t) == 50 and t.links is not None
    assert nx.is_connected(t.graph())
    assert topo.generate("random-graph:n=50,p=0.1", seed=1) == t
    assert topo.generate("random-graph:n=50,p=0.1", seed=2) != t
    # p=0: no random edges at all; the components (single nodes) are joined in a chain
    empty = topo.generate("random-graph:n=5,p=0")
    assert parents_of(empty) == {"n0": None, "n1": "n0", "n2": "n1", "n3": "n2", "n4": "n3"}
    assert topo.loads(topo.dumps(t)) == t


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("ring:n=4", "unknown generator 'ring'"),
        ("chain", "chain needs n="),
        ("chain:n=x", "n must be an integer"),
        ("chain:n=0", "n must be at least 1"),
        ("chain:n=3,k=2", "unknown parameter 'k'"),
        ("balanced:k=2", "needs depth="),
        ("random-graph:n=5,p=2", "p must be between 0 and 1"),
        ("random-graph:n=5,p=x", "p must be a number"),
        ("star:n5", "expected key=value"),
    ],
)
def test_generate_errors(spec: str, fragment: str) -> None:
    with pytest.raises(TopologyError, match=fragment):
        topo.generate(spec)


# --------------------------------------------------------------------------------------------
# dumps / loads round trip

NAMES = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)


@st.composite
def parent_topologies(draw: st.DrawFn) -> Topology:
    names = draw(st.lists(NAMES, min_size=1, max_size=12, unique=True))
    parents: dict[str, str | None] = {names[0]: None}
    for i, name in enumerate(names[1:], start=1):
        parents[name] = names[draw(st.integers(0, i - 1))]
    order = draw(st.permutations(names))
    parents = {n: parents[n] for n in order}
    t = topo.from_parents(
        parents,
        protocol=draw(st.sampled_from(topo.PROTOCOLS)),
        host=draw(st.sampled_from(["127.0.0.1", "::1", "node.example"])),
        base_port=draw(st.integers(1, 60000)),
    )
    extras = {}
    for name, spec in t.nodes.items():
        description = draw(st.none() | st.text(max_size=12))
        extras[name] = NodeSpec(name, spec.host, spec.port, spec.parent, None, description)
    return Topology(t.protocol, extras, t.root, None, draw(st.none() | st.text(max_size=20)))


@given(parent_topologies())
def test_dumps_loads_round_trip(t: Topology) -> None:
    text = topo.dumps(t)
    back = topo.loads(text)
    assert back == t
    assert list(back.nodes) == list(t.nodes)
    assert back.order() == t.order()


def test_dump_writes_a_file(tmp_path: Path) -> None:
    t = topo.load(EXAMPLES / "mesh.toml")
    topo.dump(t, tmp_path / "m.toml")
    assert topo.load(tmp_path / "m.toml") == t


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in EXAMPLE_FILES]
    assert main(["topology", "check", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(files)
    star = str(EXAMPLES / "star.toml")
    assert f"ok: {star}: 6 nodes, root hub, protocol copy-up, depth 1" in out


def test_cli_check_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(node("r", 7400) + node("c", 7401, "x"))
    good = str(EXAMPLES / "chain3.toml")
    assert main(["topology", "check", good, str(bad), str(tmp_path / "none.toml")]) == 1
    captured = capsys.readouterr()
    assert f"ok: {good}: 3 nodes, root root, protocol aggregate-subs, depth 2" in captured.out
    assert f"error: {bad}: node 'c' names parent 'x', which is not a node" in captured.err
    assert "none.toml: cannot read" in captured.err


def test_cli_show_parent_style(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "show", str(EXAMPLES / "binary7.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "7 nodes, root top" in lines[0]
    assert lines[1].split() == ["top", "127.0.0.1:7420"]
    assert lines[2].startswith("├── a ") and lines[2].endswith("127.0.0.1:7421")
    assert lines[3].startswith("│   ├── a1")
    assert lines[-1].startswith("    └── b2")
    assert "cost" not in "\n".join(lines[1:])


def test_cli_show_lists_declared_spaces_and_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "show", str(EXAMPLES / "spaces3.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("spaces jobs (federated), scratch (queue)")
    assert lines[1].split() == ["root", "127.0.0.1:7460", "gates", "tcp://127.0.0.1:31421/?keep"]
    assert lines[2].split() == ["└──", "mid", "127.0.0.1:7461"]
    assert lines[3].split()[-3:] == [
        "gates",
        "tcp://127.0.0.1:31422/?keep",
        "tcp://127.0.0.1:31423/?conn",
    ]


def test_cli_show_graph_style_ascii(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "show", "--ascii", str(EXAMPLES / "mesh.toml")]) == 0
    out = capsys.readouterr().out
    assert "tree cost 8" in out
    assert "`-- e3" in out
    e3 = next(line for line in out.splitlines() if "-- e3" in line)
    assert e3.endswith("127.0.0.1:7455  cost 2")


def test_cli_show_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(node("a", 7400) + node("b", 7400, "a"))
    assert main(["topology", "show", str(bad)]) == 1
    assert "nodes 'a' and 'b' both listen on 127.0.0.1:7400" in capsys.readouterr().err


def test_cli_show_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    for name in ("mesh.toml", "tree15.toml", "chain3.toml"):
        out = tmp_path / f"{name}.png"
        assert main(["topology", "show", str(EXAMPLES / name), "--png", str(out)]) == 0
        assert out.read_bytes().startswith(b"\x89PNG")
        assert f"wrote {out}" in capsys.readouterr().out


def test_cli_show_png_without_matplotlib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    out = tmp_path / "x.png"
    assert main(["topology", "show", str(EXAMPLES / "star.toml"), "--png", str(out)]) == 1
    assert "install the plot extra: pip install 'feds[plot]'" in capsys.readouterr().err
    assert not out.exists()


def test_layout_is_layered_and_centred() -> None:
    from feds.cli.topology_cmd import layout

    t = topo.load(EXAMPLES / "binary7.toml")
    pos = layout(t)
    assert pos["top"] == (1.5, 0.0)
    assert [pos[n] for n in ("a1", "a2", "b1", "b2")] == [(0, -2), (1, -2), (2, -2), (3, -2)]
    assert pos["a"] == (0.5, -1.0)
    deep = topo.generate("chain:n=3000", base_port=0)  # no recursion limit trouble
    assert layout(deep)["n2999"] == (0.0, -2999.0)


def test_cli_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "generate", "balanced:k=2,depth=2", "--base-port", "7600"]) == 0
    t = topo.loads(capsys.readouterr().out)
    assert t == topo.generate("balanced:k=2,depth=2", base_port=7600)
    out = tmp_path / "g.toml"
    argv = ["topology", "generate", "random-graph:n=9,p=0.3", "--seed", "3", "-o", str(out)]
    assert main([*argv, "--protocol", "copy-up"]) == 0
    assert topo.load(out) == topo.generate("random-graph:n=9,p=0.3", 3, protocol="copy-up")
    assert main(["topology", "generate", "ring:n=3"]) == 2
    assert "unknown generator 'ring'" in capsys.readouterr().err


def test_cli_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["topology", "check"])
    assert info.value.code == 2
    for argv in (["topology", "--help"], ["topology", "show", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
    assert "examples:" in capsys.readouterr().out
