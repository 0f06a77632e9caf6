"""Publications, staging and commit diffs (sans-IO): what a Spark leaf shows, and how it changes.

Executor tasks *stage* entries at the leaf under ``(job, batch, partition, attempt)``. A commit
names the attempts that succeeded; :meth:`Publications.commit` turns exactly those into a
:class:`Diff` against what the publication shows now, and drops every other attempt of that job
and batch. The caller applies a diff in one turn, additions before removals, so an observer
never sees a gap. An abort drops the staged entries and changes nothing.

An entry is ``(record, key, order)``: ``key`` and ``order`` matter only in ``upsert`` mode.

Modes:

* ``assert``: the rows are held as assertions. Appending adds the new rows; overwriting makes
  the publication exactly the new rows (rows in both stay, unchanged).
* ``message``: each row is sent once as a message and never retained.
* ``upsert``: one row per key. A new row replaces the row with the same key, unless both have
  an ``order`` (the timestamp column) and the new one is older: an older row never replaces a
  newer one. Among rows of one commit with the same key the newest wins (the last one on ties).

A commit with a streaming batch id at or below the publication's high-water mark is a replay
(after a restart) and changes nothing.

A batch job (no streaming batch id: its id is new for every write) that has committed or
aborted stages nothing more: a task attempt that stages after that (a speculative copy or a
straggler Spark gave up on) is refused, or its rows would stay staged for the leaf's lifetime.
A streaming query's batches may be run again after a commit (a restart replays them), so
those are always accepted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from feds.values import Value, sort_key

ASSERT, MESSAGE, UPSERT = "assert", "message", "upsert"
MODES = (ASSERT, MESSAGE, UPSERT)

Entry = tuple[Value, Any, Any]
"""(record, key, order): the key and order (a timestamp) are used in upsert mode only."""
Attempt = tuple[str, int | None, int, int]
"""(job, batch, partition, attempt): what a task staged its rows under."""


FINISHED_REMEMBERED = 4096
"""How many committed or aborted batch jobs a leaf remembers, to refuse their late attempts."""


class PublicationError(ValueError):
    """A commit that cannot be applied (for example a change of mode), or rows staged for a
    batch job that has already committed or aborted."""


@dataclass
class Diff:
    """What one commit changes: assertions to add, then to remove; messages to send."""

    adds: list[Value] = field(default_factory=list)
    removes: list[Value] = field(default_factory=list)
    messages: list[Value] = field(default_factory=list)
    replayed: bool = False


@dataclass
class Publication:
    """One named publication: its mode and what it currently shows."""

    name: str
    mode: str
    rows: Counter = field(default_factory=Counter)  # assert mode: record -> copies
    keyed: dict = field(default_factory=dict)  # upsert mode: key -> (record, order)
    high_water: int = -1  # the highest streaming batch id committed

    def shown(self) -> list[Value]:
        """Every record the publication shows now (with repeats)."""
        if self.mode == UPSERT:
            return [record for record, _ in self.keyed.values()]
        return list(self.rows.elements())


class Publications:
    """The publications of one leaf and the entries staged for them."""

    def __init__(self) -> None:
        self.by_name: dict[str, Publication] = {}
        self.staged: dict[Attempt, list[Entry]] = {}
        self.finished: dict[str, str] = {}
        """Batch jobs that committed or aborted → which, oldest first (at most
        :data:`FINISHED_REMEMBERED`)."""

    # -- staging ----------------------------------------------------------------------------

    def stage(self, attempt: Attempt, entries: list[Entry]) -> None:
        """Keep ``entries`` for ``attempt`` (a retried attempt number stages afresh)."""
        job, batch, partition, number = attempt
        if batch is None and job in self.finished:
            raise PublicationError(
                f"job {job} has {self.finished[job]}: the rows of its partition {partition},"
                f" attempt {number}, came too late and are not kept"
            )
        self.staged.setdefault(attempt, []).extend(entries)

    def _finish(self, job: str | None, batch: int | None, outcome: str) -> None:
        """Remember that batch job ``job`` has committed or aborted (``outcome``)."""
        if job is None or batch is not None:
            return
        self.finished.pop(job, None)
        self.finished[job] = outcome
        if len(self.finished) > FINISHED_REMEMBERED:
            del self.finished[next(iter(self.finished))]

    def _attempts(self, job: str, batch: int | None) -> list[Attempt]:
        return [a for a in self.staged if a[0] == job and a[1] == batch]

    def _take(self, job: str, batch: int | None, keep: set[tuple[int, int]]) -> list[Entry]:
        """Remove every attempt of ``(job, batch)``; return the entries of those in ``keep``."""
        taken: list[Entry] = []
        for attempt in self._attempts(job, batch):
            entries = self.staged.pop(attempt)
            if (attempt[2], attempt[3]) in keep:
                taken.extend(entries)
        return taken

    def abort(self, job: str, batch: int | None) -> int:
        """Drop everything staged for ``(job, batch)``; returns how many entries went."""
        self._finish(job, batch, "aborted")
        return sum(len(self.staged.pop(a)) for a in self._attempts(job, batch))

    # -- commit -----------------------------------------------------------------------------

    def commit(
        self,
        name: str,
        mode: str,
        job: str | None,
        batch: int | None,
        attempts: list[tuple[int, int]],
        overwrite: bool,
    ) -> Diff:
        """Make the staged entries of ``attempts`` (``(partition, attempt)`` pairs of ``job``)
        the next state of publication ``name``; return the change as a diff."""
        if mode not in MODES:
            raise PublicationError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
        entries = [] if job is None else self._take(job, batch, set(attempts))
        self._finish(job, batch, "committed")
        publication = self.by_name.get(name)
        if publication is None:
            publication = self.by_name[name] = Publication(name, mode)
        elif publication.mode != mode:
            raise PublicationError(
                f"publication {name!r} is in {publication.mode} mode, not {mode}; "
                "write it with its mode, or use another publication name"
            )
        if batch is not None:
            if batch <= publication.high_water:
                return Diff(replayed=True)
            publication.high_water = batch
        if mode == MESSAGE:
            return Diff(messages=[record for record, _, _ in entries])
        if mode == UPSERT:
            return _upsert(publication, entries, overwrite)
        new = Counter(record for record, _, _ in entries)
        if not overwrite:
            publication.rows.update(new)
            return Diff(adds=list(new.elements()))
        old = publication.rows
        publication.rows = new
        return Diff(adds=list((new - old).elements()), removes=list((old - new).elements()))

    def drop(self, name: str) -> Diff:
        """Withdraw publication ``name`` entirely."""
        publication = self.by_name.pop(name, None)
        return Diff() if publication is None else Diff(removes=publication.shown())


def _newer(order: Any, than: Any) -> bool:
    """Whether a row with ``order`` may replace one with ``than`` (no order: always)."""
    if order is None or than is None:
        return True
    return sort_key(order) >= sort_key(than)


def _upsert(publication: Publication, entries: list[Entry], overwrite: bool) -> Diff:
    incoming: dict[Any, tuple[Value, Any]] = {}
    for record, key, order in entries:
        held = incoming.get(key)
        if held is None or _newer(order, held[1]):
            incoming[key] = (record, order)
    old = publication.keyed
    if overwrite:
        new = incoming
    else:
        new = dict(old)
        for key, (record, order) in incoming.items():
            before = old.get(key)
            if before is None or _newer(order, before[1]):
                new[key] = (record, order)
    publication.keyed = new
    diff = Diff()
    for key in incoming:
        record, before = new[key][0], old.get(key)
        if before is None or before[0] != record:
            diff.adds.append(record)
            if before is not None:
                diff.removes.append(before[0])
    if overwrite:
        diff.removes.extend(record for key, (record, _) in old.items() if key not in new)
    return diff
