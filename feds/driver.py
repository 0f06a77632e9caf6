"""Runs a sans-IO :class:`~feds.actor.Scheduler` inside a trio program.

The driver's task sleeps while the scheduler is idle, wakes when work is queued (from trio code
in the same thread), and runs turns in slices so I/O tasks get their share of the loop.

Turns need not wait for the driver's task, though: the scheduler is single-threaded and
sans-IO, so any task of the driver's trio run may run them, between two awaits.
:meth:`Driver.run_now` lets a transport's reader task run the turns a packet caused right after
handing the bytes to its relay, and :meth:`Driver.after_turns` lets a transport write their
output right after they ran, in whichever task ran them. A packet crossing a node then costs one
task wakeup (the reader's) instead of three (reader, driver, writer).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import trio

from feds.actor import Facet, Scheduler, TurnAction

SLICE = 256
"""Turns begun before the driver yields to other trio tasks."""
SLICE_EVENTS = 512
"""Events handled before the driver yields to other trio tasks: a turn of more (a Spark commit
of a million rows) is handled in parts, so that the node keeps answering keep-alives and reading
its links meanwhile (:meth:`~feds.actor.Scheduler.run_until_idle`)."""

_drivers: weakref.WeakKeyDictionary[Scheduler, weakref.ref[Driver]] = weakref.WeakKeyDictionary()
"""Each scheduler's driver, both held weakly (a strong value would keep its own key alive)."""


class Driver:
    """Owns a scheduler for the lifetime of :meth:`run` (the latest driver made for a scheduler
    replaces earlier ones, as it takes over ``scheduler.on_work``)."""

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler or Scheduler()
        self._wakeup = trio.Event()
        self._running = False  # turns are being run (by any task)
        self._flushing = False  # after-turns callbacks are being called
        self._after: list[Callable[[], None]] = []
        self.scheduler.on_work = self._wake
        _drivers[self.scheduler] = weakref.ref(self)

    @staticmethod
    def of(scheduler: Scheduler) -> Driver | None:
        """The driver of ``scheduler``, if one was made for it."""
        ref = _drivers.get(scheduler)
        return None if ref is None else ref()

    def _wake(self) -> None:
        if not self._running:  # whoever is running turns now runs the new ones too
            self._wakeup.set()

    def act(self, facet: Facet, action: TurnAction) -> None:
        """Queue ``action`` as a turn in ``facet`` (call from trio code in the driver's thread)."""
        self.scheduler.enqueue(facet.actor, facet, action)

    def after_turns(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the turns being run (or the next ones) have run.

        Callbacks run in the task that ran the turns, in the order they were registered; a
        transport uses this to write everything a run of turns produced with one write.
        """
        self._after.append(callback)
        if not (self._running or self._flushing):
            self._wakeup.set()

    def run_now(self, cause: Callable[[], object] | None = None) -> bool:
        """Call ``cause`` (code that may queue turns, such as ``relay.receive``), then run up to
        :data:`SLICE` queued turns (or :data:`SLICE_EVENTS` events) and the :meth:`after_turns`
        callbacks in the calling task.

        Returns whether the scheduler is idle afterwards; if not, the driver's task is woken for
        the rest. Call it from a task of the driver's trio run, never from inside a turn (there
        it only calls ``cause``: the turns run once the current ones have).
        """
        if self._running:
            if cause is not None:
                cause()
            return False
        scheduler = self.scheduler
        self._running = True
        try:
            if cause is not None:
                cause()
            scheduler.run_until_idle(max_turns=SLICE, max_events=SLICE_EVENTS)
        finally:
            self._running = False
        self._flushing = True
        try:
            while self._after:
                callbacks, self._after = self._after, []
                for callback in callbacks:
                    callback()
        finally:
            self._flushing = False
        if scheduler.idle():
            return True
        self._wakeup.set()
        return False

    async def run(self) -> None:
        """Run turns forever (cancel the enclosing scope to stop)."""
        scheduler = self.scheduler
        while True:
            if scheduler.idle() and not self._after:
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            self.run_now()
            await trio.sleep(0)
