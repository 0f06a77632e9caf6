"""Keeps the cyclic garbage collector from stopping a node for seconds.

A node that holds a million assertions (a Spark commit at its leaf, copy-up's root) holds tens
of millions of objects. CPython's full collection walks every one of them each time the number of
long-lived objects grew by a quarter: on this kind of machine a pause of 1 s per 2 million
objects, 4 s and more in a Spark driver during a commit of a million rows. In that time the
process answers no keep-alive, and its neighbours cut its links.

Those objects are values: immutable and free of reference cycles, so reference counting frees
them and the cyclic collector has nothing to find among them. :func:`pauses_bounded` therefore
watches full collections and, after one that took longer than :data:`SLOW` seconds, moves every
object then alive into the permanent generation (:func:`gc.freeze`): later collections walk only
what was allocated since. The cost is that reference cycles alive at that moment and dropped
later are never collected (a closed connection's actors and facets, some tens of KiB each), which
is why it happens only after a slow collection, that is only in a process that holds a great
deal of data.

The same holds for the young generation, the other way round: what a node allocates per event
(event tuples, records, captures vectors) lives for one batch and is freed by reference
counting, but a batch of a hundred events holds several hundred such objects at once, so
CPython's default (a young collection every 700 net allocations) walks the batches in flight
every few dozen events and finds nothing. :func:`node_collection` collects the young generation
every :data:`YOUNG_THRESHOLD` instead, for at most that many objects kept a little longer: up to
1.5 % of a TCP node's CPU, more in a process that holds several nodes (``docs/performance.md``).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

log = logging.getLogger("feds.gc")

SLOW: Final = 0.1
"""Seconds a full collection may take before the objects it walked are frozen."""

YOUNG_THRESHOLD: Final = 10_000
"""Net allocations of container objects between two young-generation collections in a node
process (CPython's default: 700)."""

_started: list[float] = []
_users: list[None] = []  # blocks of pauses_bounded() under way


def _watch(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
        return
    if info["generation"] != 2 or not _started:
        return
    took = time.perf_counter() - _started[0]
    if took > SLOW:
        gc.freeze()
        log.info(
            "a full garbage collection took %.2f s: froze %d objects (later ones skip them)",
            took,
            gc.get_freeze_count(),
        )


@contextmanager
def pauses_bounded() -> Iterator[None]:
    """Freeze what a slow full collection walked, for the duration of the block (nested blocks
    share one watch). When the last block ends, frozen objects go back to the collector, so a
    process that hosted a leaf for a while (a test run, a notebook) is left as it was."""
    _users.append(None)
    if _watch not in gc.callbacks:
        gc.callbacks.append(_watch)
    try:
        yield
    finally:
        _users.pop()
        if not _users:
            gc.callbacks.remove(_watch)
            gc.unfreeze()


@contextmanager
def node_collection() -> Iterator[None]:
    """The collector as a node process runs it, for the duration of the block: pauses bounded
    (:func:`pauses_bounded`) and the young generation collected every :data:`YOUNG_THRESHOLD`
    net allocations. The thresholds are restored afterwards."""
    old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, *old[1:])
    try:
        with pauses_bounded():
            yield
    finally:
        gc.set_threshold(*old)
