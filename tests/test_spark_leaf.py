"""The Spark leaf without Spark: its node, the staging protocol and commits (no pyspark needed).

Tasks' side of the protocol is :class:`feds.spark.wire.LeafConnection`, used here directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from feds.auth import Secrets
from feds.blocking import BlockingClient
from feds.client import FedsError
from feds.runtime import InsecureListen, Overlay, run_overlay
from feds.spark.leaf import Leaf
from feds.spark.wire import ABORT, COMMIT, LeafConnection, LeafError
from feds.topology import load
from feds.values import Record, record
from tests.threaded import served_in_thread

CHAIN = load(Path(__file__).resolve().parent.parent / "topology" / "chain3.toml")


@pytest.fixture
def overlay() -> Iterator[Overlay]:
    start = partial(run_overlay, CHAIN, any_port=True, tcp_links=True)
    with served_in_thread(lambda nursery: nursery.start(start)) as running:
        yield running


def test_a_leaf_without_its_parent_says_which_parent_it_waited_for() -> None:
    waited = pytest.raises(TimeoutError, match=r"lonely could not reach its parent 127\.0\.0\.1:1")
    with Leaf("127.0.0.1:1", "aggregate-subs", name="lonely") as leaf, waited:
        leaf.wait_connected(0.3)
    with pytest.raises(RuntimeError, match="is closed"):
        leaf.published("x")


def test_a_leaf_listens_beyond_loopback_only_where_the_network_is_trusted() -> None:
    with pytest.raises(InsecureListen, match="allow-unauthenticated = true in the topology"):
        Leaf("127.0.0.1:1", "aggregate-subs", host="0.0.0.0")
    trusted = Leaf(
        "127.0.0.1:1",
        "aggregate-subs",
        host="0.0.0.0",
        advertise="127.0.0.1",
        allow_unauthenticated=True,
    )
    with trusted as leaf, LeafConnection(leaf.stage_address) as task:
        assert leaf.stage_address.startswith("127.0.0.1:")
        assert task.ask(Record(ABORT, ("job", None))) == (0,)


def test_a_task_staging_after_its_job_aborted_is_told_why() -> None:
    with (
        Leaf("127.0.0.1:1", "aggregate-subs", name="lonely") as leaf,
        LeafConnection(leaf.stage_address) as task,
    ):
        assert task.ask(Record(ABORT, ("job", None))) == (0,)
        late = pytest.raises(LeafError, match="job job has aborted: the rows of its partition 2")
        with late:
            task.stage(("job", None, 2, 1), [(record("t", 1), None, None)])
        assert leaf.staged_rows() == 0


def test_a_leaf_that_cannot_listen_raises_the_reason_itself() -> None:
    with pytest.raises(OSError):  # not an exception group from the leaf's thread
        Leaf(
            "127.0.0.1:1", "aggregate-subs", host="no-such-host.invalid", allow_unauthenticated=True
        )


def test_staged_rows_appear_on_commit_and_an_abort_drops_them(overlay: Overlay) -> None:
    with (
        Leaf(overlay.address("tail"), CHAIN.protocol) as leaf,
        BlockingClient(overlay.address("root")) as root,
        LeafConnection(leaf.stage_address) as task,
    ):
        leaf.wait_connected()
        rows = [(record("t", i), None, None) for i in range(3000)]
        assert task.stage(("job", None, 0, 0), rows) == 3000
        assert task.stage(("job", None, 1, 0), rows[:10]) == 10
        assert leaf.staged_rows() == 3010
        assert root.query("<t $i>", timeout=120) == []
        assert task.ask(Record(COMMIT, ("t", "assert", "job", None, ((0, 0),), False))) == (
            3000,
            0,
            0,
            False,
        )
        assert sorted(root.query("<t $i>", timeout=120)) == [(i,) for i in range(3000)]
        assert leaf.staged_rows() == 0
        task.stage(("other", None, 0, 0), rows)
        assert task.ask(Record(ABORT, ("other", None))) == (3000,)
        assert leaf.staged_rows() == 0 and len(root.query("<t $i>", timeout=120)) == 3000


def test_a_bad_commit_is_refused_with_its_reason(overlay: Overlay) -> None:
    with (
        Leaf(overlay.address("tail"), CHAIN.protocol) as leaf,
        LeafConnection(leaf.stage_address) as task,
    ):
        with pytest.raises(LeafError, match="unknown mode 'sometimes'"):
            task.ask(Record(COMMIT, ("t", "sometimes", "job", None, (), False)))
        task.ask(Record(COMMIT, ("t", "assert", "job", None, (), False)))
        with pytest.raises(LeafError, match="is in assert mode, not message"):
            task.ask(Record(COMMIT, ("t", "message", "job2", None, (), False)))
        with pytest.raises(LeafError, match="unknown request"):
            task.ask(record("bogus", 1))
        with pytest.raises(LeafError, match="bad request"):
            task.ask(42)
        assert task.ask(Record(ABORT, ("job", None))) == (0,), "the leaf still answers"


def test_a_leaf_that_cannot_be_reached_is_a_clear_error() -> None:
    with pytest.raises(LeafError, match=r"cannot reach the feds leaf at 127\.0\.0\.1:1"):
        LeafConnection("127.0.0.1:1")


class Registry:
    """Stands in for ``spark.dataSource``: keeps what ``join`` registers."""

    def __init__(self) -> None:
        self.registered: list[type] = []

    def register(self, source: type) -> None:
        self.registered.append(source)


def test_join_finds_its_parent_in_a_topology_file(overlay: Overlay, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    import feds.spark

    lines = [f'protocol = "{CHAIN.protocol}"']
    for name, parent in (("root", None), ("mid", "root"), ("tail", "mid")):
        lines += [f"[nodes.{name}]", f'listen = "{overlay.address(name)}"']
        lines += [f'parent = "{parent}"'] if parent else []
    lines += ["[security]", "allow-unauthenticated = true", "[limits]", "max-client-handles = 3"]
    topology = tmp_path / "running.toml"
    topology.write_text("\n".join(lines) + "\n")
    spark = type("Spark", (), {"dataSource": Registry()})()
    joined = feds.spark.join(
        spark, topology=str(topology), parent="mid", name="j", host="0.0.0.0", advertise="127.0.0.1"
    )
    with joined as leaf:  # on 0.0.0.0: the file's allow-unauthenticated
        assert leaf.connected and leaf.parent == ("127.0.0.1", int(overlay.ports["mid"]))
        (source,) = spark.dataSource.registered
        assert source.name() == "feds"
        assert source.defaults == {"stage": leaf.stage_address, "client": leaf.client_address}
        with BlockingClient(leaf.client_address) as app:  # the leaf takes the file's [limits]
            app.publish_many([record("t", i) for i in range(3)])
            app.sync()
            with pytest.raises(FedsError, match=r"too many live handles \(max 3\)"):
                app.assert_(record("t", 3))
                app.sync()


def test_join_refuses_a_secured_deployment_with_the_reason(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    import feds.spark

    (tmp_path / "secret.toml").write_text(Secrets.generate().dumps())
    topology = tmp_path / "secured.toml"
    topology.write_text(
        '[security]\nsecret-file = "secret.toml"\n[nodes.root]\nlisten = "127.0.0.1:7400"\n'
    )
    spark = type("Spark", (), {"dataSource": Registry()})()
    with pytest.raises(ValueError, match="cannot join a deployment with a secret file or TLS"):
        feds.spark.join(spark, topology=str(topology), parent="root")
    assert spark.dataSource.registered == []
