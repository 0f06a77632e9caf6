"""``feds simulate`` end to end: outputs, exit codes, workload files and errors."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from feds.cli import main
from feds.protocols import PROTOCOLS
from feds.protocols.observer_flood import ObserverFlood
from feds.sim.workload import WorkloadError, load_workload

SMALL = ["--events", "40", "--subscribers", "3", "--subscriptions", "4", "--publishers", "2"]


def test_a_run_writes_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    code = main(["simulate", "--generate", "chain:n=4", "--seed", "3", "--out", str(out), *SMALL])
    assert code == 0
    table = capsys.readouterr().out
    for protocol in PROTOCOLS:
        assert protocol in table
    for name in ("summary.csv", "links.csv", "nodes.csv", "latency.csv", "results.json"):
        assert (out / name).stat().st_size > 0
    results = json.loads((out / "results.json").read_text())
    assert [r["summary"]["protocol"] for r in results] == list(PROTOCOLS)
    assert all(r["violations"] == [] for r in results)
    assert len((out / "links.csv").read_text().splitlines()) == 1 + 3 * len(PROTOCOLS)


def test_json_summaries(capsys: pytest.CaptureFixture) -> None:
    code = main(["simulate", "--generate", "star:n=4", "--protocol", "copy-up", "--json", *SMALL])
    assert code == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["protocol"] == "copy-up" and summary["violations"] == 0


def test_plots_need_matplotlib(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    args = ["simulate", "--generate", "chain:n=3", "--protocol", "copy-up", *SMALL]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert "pip install 'feds[plot]'" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.png"))


def test_plots_are_drawn(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    args = ["simulate", "--generate", "chain:n=3", "--protocol", "copy-up", *SMALL]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "link_events.png",
        "state_by_depth.png",
        "latency.png",
    }


def test_workload_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "w.toml"
    path.write_text('kind = "presence"\nsubscribers = 4\nevents = 20\n')
    code = main(["simulate", "--generate", "balanced:k=2,depth=1", "--workload", str(path)])
    assert code == 0
    path.write_text("subscriberz = 4\n")
    code = main(["simulate", "--generate", "chain:n=2", "--workload", str(path)])
    assert code == 2
    assert "did you mean 'subscribers'" in capsys.readouterr().err


def test_example_workloads_are_valid() -> None:
    files = sorted(Path("examples/workloads").glob("*.toml"))
    assert files
    for path in files:
        load_workload(path)


@pytest.mark.parametrize(
    "args",
    [
        ["--generate", "chain:n=0"],
        ["--generate", "pyramid:n=3"],
        ["--topology", "no/such/file.toml"],
        ["--generate", "chain:n=3", "--selectivity", "2"],
        ["--generate", "chain:n=3", "--subscriber-placement", "nowhere"],
        ["--generate", "chain:n=3", "--bandwidth", "fast"],
    ],
)
def test_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture) -> None:
    try:
        code = main(["simulate", *args])
    except SystemExit as e:  # argparse rejects it
        code = e.code
    assert code == 2
    assert capsys.readouterr().err


class Broken(ObserverFlood):
    """Never floods subscriptions down to children."""

    def link(self, turn, node, peer, peer_is_parent) -> None:  # type: ignore[no-untyped-def]
        if peer_is_parent:
            super().link(turn, node, peer, peer_is_parent)


def test_a_violation_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(PROTOCOLS, "observer-flood", Broken)
    args = ["--generate", "chain:n=4", "--protocol", "observer-flood", "--events", "200"]
    code = main(["simulate", *args, "--subscribers", "4", "--subscriptions", "8", "--seed", "1"])
    assert code == 1
    assert "TRANSPARENCY VIOLATION" in capsys.readouterr().err


def test_workload_errors_name_the_key() -> None:
    from feds.sim.workload import WorkloadSpec

    with pytest.raises(WorkloadError, match="messages must be at most 1"):
        WorkloadSpec(messages=1.5)
    with pytest.raises(WorkloadError, match="events must be an integer"):
        WorkloadSpec(events=1.5)  # type: ignore[arg-type]


def test_a_run_leaves_the_feds_log_level_as_it_found_it() -> None:
    """Called in-process (as here), a quiet run used to leave the ``feds`` logger at CRITICAL:
    every later test in the process lost its feds warnings (a Spark test's lost uplink)."""
    log = logging.getLogger("feds")
    before = log.level
    assert main(["simulate", "--generate", "chain:n=2", "--protocol", "copy-up", *SMALL]) == 0
    assert log.level == before
