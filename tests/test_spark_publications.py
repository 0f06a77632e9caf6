"""Publications, staging and commit diffs (sans-IO; needs no Spark), against a naive model."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

import feds.spark.publications
from feds.spark.publications import (
    ASSERT,
    MESSAGE,
    UPSERT,
    Diff,
    PublicationError,
    Publications,
)
from feds.values import record


def staged(pubs: Publications, job: str, batch: int | None, parts: dict) -> list[tuple[int, int]]:
    """Stage ``parts[(partition, attempt)] = values`` (assert mode entries); return the keys."""
    for (partition, attempt), values in parts.items():
        pubs.stage((job, batch, partition, attempt), [(record("r", v), None, None) for v in values])
    return list(parts)


def apply(shown: Counter, diff: Diff) -> Counter:
    """What an observer sees after ``diff``: additions first, removals of held rows after."""
    after = shown + Counter(diff.adds)
    for value in diff.removes:
        assert after[value] > 0, "a diff removes only what is shown"
        after[value] -= 1
    return +after


def test_only_the_committed_attempts_become_visible() -> None:
    pubs = Publications()
    staged(pubs, "j", None, {(0, 0): [1, 2], (0, 1): [1, 2, 3], (1, 0): [4]})
    diff = pubs.commit("p", ASSERT, "j", None, [(0, 1), (1, 0)], overwrite=False)
    assert Counter(diff.adds) == Counter(record("r", v) for v in [1, 2, 3, 4])
    assert diff.removes == [] and pubs.staged == {}


def test_abort_drops_the_staged_rows_and_changes_nothing() -> None:
    pubs = Publications()
    staged(pubs, "j", None, {(0, 0): [1], (1, 0): [2]})
    staged(pubs, "other", None, {(0, 0): [3]})
    assert pubs.abort("j", None) == 2
    assert list(pubs.staged) == [("other", None, 0, 0)]
    assert "p" not in pubs.by_name


def test_a_replayed_batch_changes_nothing() -> None:
    pubs = Publications()
    staged(pubs, "q", 0, {(0, 0): [1]})
    assert pubs.commit("p", ASSERT, "q", 0, [(0, 0)], overwrite=False).adds
    staged(pubs, "q", 0, {(0, 0): [1]})
    replay = pubs.commit("p", ASSERT, "q", 0, [(0, 0)], overwrite=False)
    assert replay.replayed and replay.adds == [] and pubs.staged == {}


def test_a_batch_job_that_finished_refuses_late_attempts() -> None:
    """A straggling or speculative attempt that stages after its batch job committed (or
    aborted) is refused: nothing would ever take its rows out of the leaf again."""
    pubs = Publications()
    staged(pubs, "j", None, {(0, 0): [1]})
    pubs.commit("p", ASSERT, "j", None, [(0, 0)], overwrite=False)
    with pytest.raises(PublicationError, match="job j has committed: the rows of its partition 0"):
        staged(pubs, "j", None, {(0, 1): [1]})
    pubs.abort("k", None)
    with pytest.raises(PublicationError, match="job k has aborted"):
        staged(pubs, "k", None, {(1, 0): [2]})
    assert pubs.staged == {} and pubs.by_name["p"].shown() == [record("r", 1)]
    staged(pubs, "other", None, {(0, 0): [3]})  # other jobs stage as before
    assert list(pubs.staged) == [("other", None, 0, 0)]


def test_the_finished_jobs_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feds.spark.publications, "FINISHED_REMEMBERED", 3)
    pubs = Publications()
    for job in "abcd":
        pubs.abort(job, None)
    assert list(pubs.finished) == ["b", "c", "d"]
    staged(pubs, "a", None, {(0, 0): [1]})  # forgotten: accepted again
    assert list(pubs.staged) == [("a", None, 0, 0)]


def test_a_publication_keeps_its_mode() -> None:
    pubs = Publications()
    pubs.commit("p", ASSERT, None, None, [], overwrite=False)
    with pytest.raises(PublicationError, match="is in assert mode, not message"):
        pubs.commit("p", MESSAGE, None, None, [], overwrite=False)


def test_messages_are_never_retained() -> None:
    pubs = Publications()
    staged(pubs, "j", None, {(0, 0): [1, 1]})
    diff = pubs.commit("p", MESSAGE, "j", None, [(0, 0)], overwrite=False)
    assert diff.messages == [record("r", 1)] * 2 and diff.adds == []
    assert pubs.by_name["p"].shown() == []


def test_upsert_never_lets_an_older_row_replace_a_newer_one() -> None:
    pubs = Publications()

    def upsert(rows: list[tuple[str, int, int]], overwrite: bool = False) -> Diff:
        job = f"j{len(pubs.by_name.get('p').keyed) if 'p' in pubs.by_name else 0}-{rows}"
        entries = [(record("kv", k, v, t), (k,), t) for k, v, t in rows]
        pubs.stage((job, None, 0, 0), entries)
        return pubs.commit("p", UPSERT, job, None, [(0, 0)], overwrite)

    upsert([("a", 1, 10), ("b", 2, 10), ("a", 0, 5)])  # within a commit the newest wins too
    diff = upsert([("a", 3, 20), ("b", 4, 5)])
    assert diff.adds == [record("kv", "a", 3, 20)] and diff.removes == [record("kv", "a", 1, 10)]
    assert sorted(pubs.by_name["p"].shown(), key=repr) == [
        record("kv", "a", 3, 20),
        record("kv", "b", 2, 10),
    ]
    diff = upsert([("b", 2, 10)], overwrite=True)  # b unchanged, a goes
    assert diff.adds == [] and diff.removes == [record("kv", "a", 3, 20)]


commits = st.lists(
    st.tuples(
        st.booleans(),  # overwrite
        st.dictionaries(
            st.tuples(st.integers(0, 2), st.integers(0, 1)),
            st.lists(st.integers(0, 5), max_size=6),
            max_size=4,
        ),
        st.sets(st.tuples(st.integers(0, 2), st.integers(0, 1))),  # committed attempts
    ),
    max_size=6,
)


@given(commits)
def test_assert_mode_matches_a_naive_model(steps: list) -> None:
    """Append adds the committed attempts' rows, overwrite makes them the whole publication;
    every diff is additions then removals of rows actually shown (never a gap)."""
    pubs = Publications()
    shown: Counter = Counter()
    model: Counter = Counter()
    for n, (overwrite, parts, chosen) in enumerate(steps):
        job = f"job{n}"
        staged(pubs, job, None, parts)
        new = Counter(record("r", v) for key in chosen & set(parts) for v in parts[key])
        diff = pubs.commit("p", ASSERT, job, None, sorted(chosen), overwrite)
        shown = apply(shown, diff)
        model = new if overwrite else model + new
        assert shown == model
        assert Counter(pubs.by_name["p"].shown()) == shown
        assert not set(diff.adds) & set(diff.removes)
    assert pubs.staged == {}
