"""The record tables in `protocols/*.md` agree with the records the code really uses.

For each protocol a small federation runs a workload while every assertion and message entering
any fragment is recorded. Every top-level record seen must be documented (label and arity) in
the protocol's schema file, or be an `Observe`; every documented record must be seen.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from feds.actor import Scheduler
from feds.dataspace import OBSERVE, Dataspace
from feds.node import (
    ACCEPTED,
    FSYNC,
    LOCAL_SYNC,
    REFUSED,
    UPLINK,
    Node,
    NodeService,
    _UplinkReply,
    connect_in_process,
)
from feds.pattern_forms import bind, rec_group
from feds.protocols import protocol_names
from feds.runtime import STATUS
from feds.sim.reference import Workload
from feds.values import Record, Symbol, record

SCHEMAS = Path(__file__).resolve().parents[1] / "protocols"
ROW = re.compile(r"^\| `<([^ >`]+)((?: [^ >`]+)*)>` \|", re.M)


def documented(name: str) -> dict[Symbol, int]:
    text = (SCHEMAS / f"{name}.md").read_text()
    return {Symbol(label): len(fields.split()) for label, fields in ROW.findall(text)}


def seen_records(
    monkeypatch: pytest.MonkeyPatch, cls: type, methods: tuple[str, ...], seen: list | None = None
) -> list:
    """Record the value of every call of ``cls.method`` (for each method) into ``seen``."""
    seen = [] if seen is None else seen
    for method in methods:
        original = getattr(cls, method)

        def spy(self, turn, value, *rest, _original=original):
            seen.append(value)
            return _original(self, turn, value, *rest)

        monkeypatch.setattr(cls, method, spy)
    return seen


def run_small_federation(protocol: str) -> None:
    scheduler = Scheduler()
    nodes = [Node(scheduler, f"n{i}", protocol) for i in range(4)]
    scheduler.run_until_idle()
    for child, parent in ((1, 0), (2, 0), (3, 1)):
        connect_in_process(scheduler, nodes[child], nodes[parent])
    scheduler.run_until_idle()
    work = Workload(scheduler)
    clients = [work.attach(node) for node in nodes]
    for c in clients:
        work.observe(c, rec_group(Symbol("a"), [bind()]))
    scheduler.run_until_idle()
    for i, c in enumerate(clients):
        work.assert_(c, record("a", i))
        work.send(c, record("a", 10 + i))
    facet = clients[3].actor_facet
    scheduler.enqueue(facet.actor, facet, lambda t: t.sync(nodes[3].access, lambda t: None))
    scheduler.run_until_idle()
    assert not scheduler.crashes


@pytest.mark.parametrize("protocol", protocol_names())
def test_fragment_records_match_the_schema_file(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = seen_records(monkeypatch, Dataspace, ("on_publish", "on_message"))
    run_small_federation(protocol)
    schema = documented(protocol)
    labels_seen = set()
    for value in seen:
        assert value.__class__ is Record, value
        if value.label == OBSERVE:
            continue
        assert value.label in schema, f"{value.label.name} is not documented in {protocol}.md"
        assert len(value.fields) == schema[value.label], f"{value.label.name} arity"
        labels_seen.add(value.label)
    assert labels_seen == set(schema), f"documented but never used: {set(schema) - labels_seen}"


def test_node_records_match_the_schema_file(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = seen_records(monkeypatch, NodeService, ("on_publish",))
    seen_records(monkeypatch, _UplinkReply, ("on_publish",), seen)
    run_small_federation("aggregate-subs")
    schema = documented("node")
    for value in seen:
        assert value.label in schema and len(value.fields) == schema[value.label], value
    assert {v.label for v in seen} == {UPLINK, ACCEPTED, FSYNC}
    # LOCAL_SYNC: local access; REFUSED: tests/test_protocol_mismatch.py
    assert set(schema) == {UPLINK, ACCEPTED, FSYNC, STATUS, LOCAL_SYNC, REFUSED}
