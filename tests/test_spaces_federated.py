"""Federated spaces in the simulator: real nodes and relays on virtual links that can fail.

The property test lets hypothesis choose a tree, a protocol, link latencies and an interleaving
of puts at any node, blocking and non-blocking gets and queries at any node, callers giving up
mid-take, links failing right after an owner answered a take (and coming back later), and how
many chunks the network delivers between them. At the end every link is healed and the overlay
settles; then no tuple was delivered twice, every tuple put was delivered exactly once or is
still owned by exactly one member, no take exchange is left half-done (nor any of its records
asserted), and every member's view is exactly the others' tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import trio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from feds import topology
from feds.actor import Entity, Facet, Handle, Scheduler, Turn
from feds.dataspace import observe
from feds.node import Node
from feds.protocols import protocol_names
from feds.runtime import Overlay, run_overlay
from feds.sim.network import LinkParams, Network, SimLink
from feds.spaces import ANY, SpaceTimeout
from feds.spaces.federated import ACK, CAPTURE, GIVEN, TAKE, SpaceMember, Want, _pattern
from feds.spaces.hosting import FederatedSpace
from feds.spaces.jtypes import Long
from feds.spaces.templates import Formal
from feds.values import Value

JOB = ("job", Formal(int))


@dataclass
class Cluster:
    """Nodes in a tree on a virtual network, each with a member of federated space ``jobs``."""

    parents: dict[str, str | None]
    protocol: str = "observer-flood"
    latency: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scheduler = Scheduler()
        self.nodes = {n: Node(self.scheduler, n, self.protocol) for n in self.parents}
        self.scheduler.run_until_idle()
        self.network = Network(self.scheduler)
        self.links: dict[str, SimLink] = {}
        for child, parent in self.parents.items():
            if parent is not None:
                self.heal(child)
        self.members: dict[str, SpaceMember] = {}
        self.exchanges = Seen()
        """Every take, answer and ack record any node can see."""
        self.facets: dict[str, Facet] = {}
        for name, node in self.nodes.items():
            member = SpaceMember("jobs", name, node.access)
            self.members[name] = member

            def boot(t: Turn, name: str = name, member: SpaceMember = member) -> None:
                self.facets[name] = t.facet
                member.start(t)
                for label, arity in ((TAKE, 4), (GIVEN, 4), (ACK, 3)):
                    pattern = _pattern(label, "jobs", *[CAPTURE] * arity)
                    t.publish(self.nodes[name].access, observe(pattern, t.ref(self.exchanges)))

            self.actor_of = getattr(self, "actor_of", {})
            self.actor_of[name] = self.scheduler.spawn(boot, name=f"member {name}")
        self.settle()

    def act(self, name: str, action) -> None:
        self.scheduler.enqueue(self.actor_of[name], self.facets[name], action)
        self.scheduler.run_until_idle()

    def step(self) -> bool:
        """Run every turn, send what was written, deliver the next chunk; False if quiet."""
        self.scheduler.run_until_idle()
        self.network.flush()
        if self.network.next_time() is None:
            return False
        self.network.deliver_next()
        self.scheduler.run_until_idle()
        return True

    def settle(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if not self.step():
                return
        raise AssertionError("the overlay did not settle")

    def fail(self, child: str) -> None:
        """Cut the link above ``child``: both ends close, bytes in flight are lost."""
        link = self.links.pop(child, None)
        if link is not None:
            for relay in link.relays():
                relay.on_output = None
                relay.close("link failed")
            self.scheduler.run_until_idle()

    def heal(self, child: str) -> None:
        if child not in self.links:
            params = LinkParams(latency=self.latency.get(child, 0.001))
            parent = self.nodes[self.parents[child]]
            self.links[child] = self.network.connect(self.nodes[child], parent, params)


class Seen(Entity):
    """The records an observer matches now."""

    def __init__(self) -> None:
        self.current: dict[Handle, Value] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.current[handle] = value

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        del self.current[handle]


@dataclass
class Caller:
    """One get or query and what it received."""

    node: str
    want: Want
    got: list = field(default_factory=list)


def start(cluster: Cluster, node: str, remove: bool, blocking: bool) -> Caller:
    caller = Caller(node, Want(JOB, remove, blocking, lambda f: caller.got.append(f)))
    cluster.act(node, lambda t: cluster.members[node].want(t, caller.want))
    return caller


def put(cluster: Cluster, node: str, k: int) -> None:
    cluster.act(node, lambda t: cluster.members[node].put(t, ("job", k)))


def check_exactly_once(cluster: Cluster, puts: set[int], callers: list[Caller]) -> None:
    for child in cluster.parents:
        if cluster.parents[child] is not None:
            cluster.heal(child)
    cluster.settle()
    taken = [f[1] for c in callers if c.want.remove for f in c.got if f is not None]
    owned = [f[1] for m in cluster.members.values() for f in m.owned.values()]
    assert len(taken) == len(set(taken)), f"a tuple was delivered twice: {sorted(taken)}"
    assert sorted(taken + owned) == sorted(puts), "a tuple was lost or duplicated"
    for c in callers:
        assert len(c.got) <= 1, "a caller was answered twice"
        if c.got and c.got[0] is not None:
            assert c.got[0][1] in puts
    for name, m in cluster.members.items():
        assert not m.asking and not m.answers and not m.acking, f"{name}: a take is half-done"
        others = {
            (o, i): f
            for o, other in cluster.members.items()
            if o != name
            for i, f in other.owned.items()
        }
        assert m.view == others, f"{name}'s view is not the others' tuples"
    assert not cluster.exchanges.current, "a take, answer or ack record was left behind"
    if owned:
        waiting = [c for c in callers if c.want.blocking and c.want.remove and not c.want.done]
        assert not waiting, "a blocked get waits while a tuple is in the space"


PATH = {"a": None, "b": "a", "c": "b", "d": "a"}


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_tuple_put_at_one_node_is_queried_and_taken_at_another(protocol: str) -> None:
    cluster = Cluster(PATH, protocol)
    put(cluster, "c", 1)
    cluster.settle()
    q = start(cluster, "d", remove=False, blocking=False)
    assert q.got == [("job", 1)]
    g = start(cluster, "d", remove=True, blocking=True)
    cluster.settle()
    assert g.got == [("job", 1)]
    assert not cluster.members["c"].owned
    assert start(cluster, "b", remove=False, blocking=False).got == [None]


def test_a_blocked_get_wakes_on_a_put_elsewhere_and_typed_values_survive() -> None:
    cluster = Cluster(PATH)
    g = start(cluster, "c", remove=True, blocking=True)
    cluster.settle()
    assert g.got == []
    cluster.act("d", lambda t: cluster.members["d"].put(t, ("job", Long(7))))
    cluster.settle()
    assert g.got == [] and len(cluster.members["d"].owned) == 1  # a long is not an int
    put(cluster, "d", 7)
    cluster.settle()
    assert g.got == [("job", 7)]
    assert list(cluster.members["d"].owned.values()) == [("job", Long(7))]


def test_two_getters_race_for_one_tuple_and_only_one_wins() -> None:
    cluster = Cluster(PATH)
    put(cluster, "a", 1)
    cluster.settle()
    first, second = (start(cluster, n, remove=True, blocking=True) for n in ("c", "d"))
    cluster.settle()
    assert sorted(len(x.got) for x in (first, second)) == [0, 1]
    check_exactly_once(cluster, {1}, [first, second])


def test_a_getter_that_gives_up_mid_take_loses_nothing() -> None:
    cluster = Cluster(PATH)
    put(cluster, "c", 1)
    cluster.settle()
    g = start(cluster, "d", remove=True, blocking=True)
    assert cluster.members["d"].asking  # the take is on its way
    cluster.act("d", lambda t: cluster.members["d"].cancel(g.want))
    cluster.settle()
    assert g.got == []
    assert list(cluster.members["d"].owned.values()) == [("job", 1)]  # it lives at d now
    check_exactly_once(cluster, {1}, [g])


def test_a_link_failure_after_the_owner_answered_resumes_on_recovery() -> None:
    cluster = Cluster(PATH)
    put(cluster, "c", 1)
    cluster.settle()
    g = start(cluster, "d", remove=True, blocking=True)
    while not cluster.members["c"].answers:  # until the owner has taken it for d
        assert cluster.step()
    cluster.fail("c")
    cluster.settle()
    assert g.got == [] and not cluster.members["c"].owned
    cluster.heal("c")
    cluster.settle()
    assert g.got == [("job", 1)]
    check_exactly_once(cluster, {1}, [g])


NODES = ["a", "b", "c", "d", "e"]

PUT = st.tuples(st.just("put"), st.sampled_from(NODES))
GET = st.tuples(
    st.just("get"),
    st.sampled_from(NODES),
    st.sampled_from([True, True, False]),
    st.booleans(),
    st.none() | st.integers(0, 4),
)
STEPS = st.tuples(st.just("steps"), st.integers(1, 6))
ops = st.one_of(
    *[PUT, GET, STEPS] * 2,
    st.tuples(st.just("cut"), st.integers(0, 4), st.booleans(), st.integers(0, 6)),
    st.tuples(st.just("fail"), st.sampled_from(NODES[1:])),
    st.tuples(st.just("heal"), st.sampled_from(NODES[1:])),
    st.tuples(st.just("settle")),
)
"""``get node remove blocking k``: unless ``k`` is None, the caller gives up ``k`` chunks after
its take went out.
``cut k above_owner down_for``: once some owner has answered a take and ``k`` more chunks were
delivered, the link above that owner (or above the getter) fails for ``down_for`` chunks."""


@st.composite
def trees(draw: st.DrawFn) -> dict[str, str | None]:
    parents: dict[str, str | None] = {"a": None}
    for i, name in enumerate(NODES[1:], 1):
        parents[name] = NODES[draw(st.integers(0, i - 1))]
    return parents


@dataclass
class Script:
    """Runs one interleaving; the armed triggers fire between chunk deliveries."""

    cluster: Cluster
    puts: set[int] = field(default_factory=set)
    callers: list[Caller] = field(default_factory=list)
    give_up: dict[int, int] = field(default_factory=dict)
    """Callers (by index) that give up, and how many more chunks they wait once asking."""
    cuts: list[list] = field(default_factory=list)
    down: dict[str, int] = field(default_factory=dict)

    def tick(self) -> None:
        cluster = self.cluster
        for i, left in list(self.give_up.items()):
            c = self.callers[i]
            if c.want.done:
                del self.give_up[i]
            elif c.want.asking is not None and left:
                self.give_up[i] = left - 1
            elif c.want.asking is not None:
                del self.give_up[i]
                event("a caller gave up mid-take")
                cluster.act(c.node, lambda t, c=c: cluster.members[c.node].cancel(c.want))
        for cut in list(self.cuts):
            answered = [(g, m.me) for m in cluster.members.values() for g, _ in m.answers]
            if not answered:
                continue
            if cut[0] > 0:
                cut[0] -= 1
                continue
            self.cuts.remove(cut)
            getter, owner = answered[0]
            node = owner if cut[1] and cluster.parents[owner] else getter
            if cluster.parents[node] is not None and node in cluster.links:
                event("a link failed after an owner answered")
                cluster.fail(node)
                self.down[node] = cut[2]
        for node, left in list(self.down.items()):
            if left:
                self.down[node] = left - 1
            else:
                del self.down[node]
                cluster.heal(node)

    def step(self) -> None:
        self.cluster.step()
        self.tick()

    def run(self, op: tuple) -> None:
        cluster = self.cluster
        match op:
            case ("put", node):
                self.puts.add(len(self.puts))
                put(cluster, node, len(self.puts) - 1)
            case ("get", node, remove, blocking, give_up):
                if give_up is not None:
                    self.give_up[len(self.callers)] = give_up
                self.callers.append(start(cluster, node, remove, blocking))
            case ("cut", k, above_owner, down_for):
                self.cuts.append([k, above_owner, down_for])
            case ("fail", node):
                cluster.fail(node)
            case ("heal", node):
                cluster.heal(node)
            case ("steps", k):
                for _ in range(k):
                    self.step()
            case ("settle",):
                while cluster.network.next_time() is not None:
                    self.step()
        self.tick()


@settings(max_examples=100, deadline=None)
@given(
    parents=trees(),
    protocol=st.sampled_from(protocol_names()),
    latency=st.dictionaries(st.sampled_from(NODES[1:]), st.sampled_from([0.001, 0.003, 0.01])),
    script=st.lists(ops, min_size=5, max_size=30),
)
def test_get_across_nodes_is_exactly_once_under_failures(parents, protocol, latency, script):
    run = Script(Cluster(parents, protocol, latency))
    for op in script:
        run.run(op)
    check_exactly_once(run.cluster, run.puts, run.callers)


@pytest.mark.parametrize("protocol", protocol_names())
def test_query_all_and_get_all_see_every_tuple_put_anywhere_before_the_call(protocol) -> None:
    cluster = Cluster({"a": None, "b": "a", "c": "b", "d": "a", "e": "d"}, protocol)
    for k, node in enumerate("abcde"):
        put(cluster, node, k)
    # no settling: the calls at e must wait for the federated sync to bring everything
    seen: list[list[tuple]] = []
    taken: list[list[tuple]] = []
    cluster.act("e", lambda t: cluster.members["e"].want_all(t, JOB, False, seen.append))
    cluster.act("c", lambda t: cluster.members["c"].want_all(t, JOB, True, taken.append))
    cluster.settle()
    assert sorted(seen[0]) == sorted(taken[0]) == [("job", k) for k in range(5)]
    assert not any(m.owned for m in cluster.members.values())
    check_exactly_once(cluster, set(), [])  # nothing half-done or left behind


async def test_federated_space_api_on_an_overlay_in_this_process() -> None:
    chain = topology.load("topology/chain3.toml")
    async with trio.open_nursery() as nursery:
        overlay: Overlay = await nursery.start(
            lambda task_status: run_overlay(chain, any_port=True, task_status=task_status)
        )
        root, tail = (
            FederatedSpace.on_node(overlay.runtimes[n], overlay.driver, "jobs")
            for n in ("root", "tail")
        )
        with trio.fail_after(20):
            assert root.put("job", 1) and root.put("job", Long(2))
            assert await tail.query("job", Formal(int)) == ("job", 1)
            assert await tail.query_all("job", ANY) == [("job", 1), ("job", Long(2))]
            assert await tail.getp("job", Formal(Long)) == ("job", Long(2))
            assert await tail.queryp("job", Formal(Long)) is None
            with pytest.raises(SpaceTimeout, match=r"within 0\.2 s"):
                await tail.get("nothing", ANY, timeout=0.2)
            with trio.move_on_after(0.01):  # a cancelled get loses nothing
                await tail.get("later", ANY)
            root.put("later", 3)
            assert await root.get("later", ANY) == ("later", 3)
            assert await tail.get_all("job", ANY) == [("job", 1)]
            assert await root.queryAll(ANY, ANY) == []
        nursery.cancel_scope.cancel()
