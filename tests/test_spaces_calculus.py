"""The space calculus on local spaces: items, links, policies, and the paper's examples."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from feds.spaces import ANY, SpaceTimeout
from feds.spaces.calculus import Agent, Network, Op, run


def test_information_is_a_set_and_lookups_leave_it() -> None:
    net = Network()
    net.space("A")
    net.write("A", (1, 2))
    net.write("A", (1, 2))
    assert net.spaces["A"].items == [(1, 2)]
    assert net.read("A", (1, ANY)) == (1, 2)
    assert net.read_e("A", (1, ANY)) == (1, 2)
    assert net.spaces["A"].items == [(1, 2)]


@pytest.mark.parametrize("declare", ["space", "template"])
def test_resources_are_a_multiset_and_lookups_take_them(declare) -> None:
    net = Network()
    net.space("A", resources=declare == "space")
    if declare == "template":
        net.declare_resource((1, ANY))
    net.write("A", (1, 2))
    net.write("A", (1, 2))
    net.write("A", (2, 2))
    assert net.spaces["A"].items == [(1, 2), (1, 2), (2, 2)]
    assert net.read("A", (1, ANY)) == (1, 2)
    assert net.read_e("A", (1, ANY)) == (1, 2)
    assert net.read_e("A", (1, ANY)) is None  # the paper's ⊥
    assert net.read("A", (2, ANY)) == (2, 2)
    left = [] if declare == "space" else [(2, 2)]  # (2, 2) is information by template
    assert net.spaces["A"].items == left


def test_ldel_is_local_and_gdel_is_global_including_items_in_flight() -> None:
    net = Network()
    for name in "ABC":
        net.space(name, resources=name == "C")
    net.publish("C", (ANY,))
    net.subscribe("A", (ANY,))
    for name in "AB":
        net.write(name, (1,))
        net.write(name, (2,))
    net.write("C", (1,))  # a resource in flight to A or C
    assert net.ldel("A", (1,)) == 1
    assert net.spaces["A"].items == [(2,)] and net.spaces["B"].items == [(1,), (2,)]
    assert net.gdel((1,)) == 2
    assert [net.spaces[n].items for n in "ABC"] == [[(2,)], [(2,)], []]
    assert net.in_flight == []


def test_lazy_links_copy_information_and_move_resources() -> None:
    net = Network()
    net.space("here")
    net.space("there")
    net.space("far")
    net.lazy_link("here", "there")
    net.declare_resource(("job", ANY))
    net.write("there", ("info", 1))
    net.write("there", ("job", 1))
    net.write("far", ("info", 2))
    assert net.read_e("here", ("info", ANY)) is None  # readE is local
    assert net.read("here", ("info", ANY)) == ("info", 1)
    assert net.spaces["here"].items == [("info", 1)]  # copied
    assert net.read("here", ("job", ANY)) == ("job", 1)
    assert net.spaces["there"].items == [("info", 1)]  # moved (and taken)
    assert net.read("here", ("info", 2)) is None  # not a neighbour
    assert net.read("there", ("info", ANY)) == ("info", 1)  # the link is symmetric


def test_eager_links_forward_what_matches_both_marks() -> None:
    net = Network()
    for name in ("pub", "a", "b"):
        net.space(name)
    net.publish("pub", (1, ANY))
    net.subscribe("a", (ANY, ANY))
    net.subscribe("b", (ANY, "x"))
    net.write("pub", (1, "x"))
    net.write("pub", (1, "y"))
    net.write("pub", (2, "x"))  # not published
    assert net.spaces["a"].items == [(1, "x"), (1, "y")]
    assert net.spaces["b"].items == [(1, "x")]
    assert net.spaces["pub"].items == [(1, "x"), (1, "y"), (2, "x")]


def test_overwrite_by_key() -> None:
    net = Network()
    net.space("src")
    net.space("dst")
    net.publish("src", (ANY, ANY))
    net.subscribe("dst", (ANY, ANY), key=[0])
    for item in (("t", 20), ("h", 50), ("t", 21), ("t", 19)):
        net.write("src", item)
    assert sorted(net.spaces["dst"].items) == [("h", 50), ("t", 19)]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 5), st.integers(0, 9))))
def test_overwrite_by_key_with_timestamp_keeps_the_freshest_per_key(arrivals) -> None:
    net = Network()
    net.space("src")
    net.space("dst")
    net.publish("src", (ANY, ANY, ANY))
    net.subscribe("dst", (ANY, ANY, ANY), key=[0], timestamp=1)
    model: dict[str, tuple] = {}
    for key, ts, payload in arrivals:
        net.write("src", (key, ts, payload))
        if key not in model or model[key][1] <= ts:  # an older item never overwrites a newer
            model[key] = (key, ts, payload)
    assert sorted(net.spaces["dst"].items) == sorted(model.values())


async def test_read_wait_blocks_until_a_write_and_times_out() -> None:
    net = Network()
    net.space("A")
    net.space("B")
    net.lazy_link("A", "B")
    async with trio.open_nursery() as n:
        got = []

        async def reader():
            got.append(await net.read_wait("A", ("go", ANY)))

        n.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        net.write("B", ("go", 1))
    assert got == [("go", 1)]
    with pytest.raises(SpaceTimeout):
        await net.read_wait("A", ("never",), timeout=0.05)


# ---------------------------------------------------------------------------------------------
# The paper's Ping-Pong (Fig. 3): one JavaSpace, or two replicas eagerly linked both ways


def ping():
    for _ in range(2):
        yield Op("write", (1,))
        yield Op("ext", "ping")
        yield Op("read", (0,))


def pong():
    for _ in range(2):
        yield Op("read", (1,))
        yield Op("write", (0,))
        yield Op("ext", "pong")


def ping_pong(config: str, seed: int) -> tuple[list, Network, list[Agent]]:
    net = Network()
    net.declare_resource((ANY,))  # res <*>
    net.space("JS")
    pong_at = "JS"
    if config == "replicated":
        net.space("JSbis")
        for name in ("JS", "JSbis"):
            net.publish(name, (ANY,))
            net.subscribe(name, (ANY,))
        pong_at = "JSbis"
    elif config == "lazy":
        net.space("JSbis")
        net.lazy_link("JS", "JSbis")
        pong_at = "JSbis"
    agents = [Agent("Ping", "JS", ping()), Agent("Pong", pong_at, pong())]
    trace = run(net, agents, random.Random(seed).choice)
    return trace, net, agents


@settings(max_examples=100)
@given(st.integers(0, 2**32))
def test_ping_pong_on_one_space_and_on_two_linked_spaces_behaves_the_same(seed) -> None:
    expected = [("Ping", "ping"), ("Pong", "pong"), ("Ping", "ping"), ("Pong", "pong")]
    for config in ("single", "replicated", "lazy"):
        trace, net, agents = ping_pong(config, seed)
        assert trace == expected, config
        assert all(a.done for a in agents), config  # no deadlock
        assert all(not s.items for s in net.spaces.values()) and not net.in_flight, config


def test_producer_transformer_consumer_example_runs() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "space_calculus.py"
    result = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "one transformer and two transformers: the consumer saw the same" in lines[-1]
