"""Runs a sans-IO :class:`~feds.actor.Scheduler` inside a trio program.

The driver's task sleeps while the scheduler is idle, wakes when work is queued (from trio code
in the same thread), and runs turns in slices so I/O tasks get their share of the loop.

Turns need not wait for the driver's task, though: the scheduler is single-threaded and
sans-IO, so any task of the driver's trio run may run them, between two awaits.
:meth:`Driver.run_now` lets a transport's reader task run the turns a packet caused right after
handing the bytes to its relay, and :meth:`Driver.after_turns` lets a transport write their
output right after they ran, in whichever task ran them. A packet crossing a node then costs one
task wakeup (the reader's) instead of three (reader, driver, writer). And what a task queues (a
client's send) runs as that task's step ends, in a trio instrument of the driver's run, not in
a step of the driver's task: a round trip's client process takes as many task steps and waits
for I/O as the floor's client (``docs/performance.md``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import ClassVar

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

    def __init__(self, scheduler: Scheduler | None = None, *, at_step_end: bool = True) -> None:
        """``at_step_end``: run what a task queues as its step ends (:meth:`run`); a node
        process, whose reader tasks run what their packets cause themselves, spares the
        instrument's two calls per task step (about 1.4 µs) with False."""
        self.scheduler = scheduler or Scheduler()
        self.at_step_end = at_step_end
        self._wakeup = trio.Event()
        self._running = False  # turns are being run (by any task)
        self._flushing = False  # after-turns callbacks are being called
        self._after: list[Callable[[], None]] = []
        self._step_end: _StepEnd | None = None  # the run's, while :meth:`run` runs (at_step_end)
        self._due = False  # work queued in a task step, to run when that step ends
        self._failure: BaseException | None = None  # raised by turns run at a step's end
        self.scheduler.on_work = self._wake
        _drivers[self.scheduler] = weakref.ref(self)

    @staticmethod
    def of(scheduler: Scheduler) -> Driver | None:
        """The driver of ``scheduler``, if one was made for it."""
        ref = _drivers.get(scheduler)
        return None if ref is None else ref()

    def _wake(self) -> None:
        """Work was queued: have it run, by the end of the current task step if one is running
        (:class:`_StepEnd`), else by the driver's task."""
        if self._running or self._due:  # whoever is running turns now runs the new ones too
            return
        step_end = self._step_end
        if step_end is not None and step_end.stepping:
            self._due = True
            step_end.due.append(self)
        else:
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
        if not self._flushing:
            self._wake()

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
            if not scheduler.idle():  # (a message passed on by its bytes queues no turn)
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
        """Run turns forever (cancel the enclosing scope to stop).

        Work queued by a task (a session's action) runs when that task's step ends, before
        trio goes on (:class:`_StepEnd`): as the turns would run in this task's next step, but
        without waking it, one task step and one pass of trio's loop fewer per action. This task
        takes what a step's end leaves (a slice's rest) and work queued outside any task.
        """
        scheduler = self.scheduler
        if self.at_step_end:
            self._step_end = _StepEnd.join()
        try:
            while True:
                if scheduler.idle() and not self._after:
                    await self._wakeup.wait()
                if self._failure is not None:
                    failure, self._failure = self._failure, None
                    raise failure
                self._wakeup = trio.Event()
                if not self.run_now():  # more to do: let the other tasks run first
                    await trio.sleep(0)
        finally:
            if self._step_end is not None:
                self._step_end.leave(self)
                self._step_end = None
            if self._due:  # queued in the last step: for whoever runs the driver next
                self._due = False
                self._wakeup.set()

    def _run_due(self) -> None:
        """Run what a task step queued, as the step ends (:class:`_StepEnd`); a failure goes
        to the driver's task, which is woken to raise it."""
        self._due = False
        try:
            self.run_now()
        except BaseException as exc:  # handed to the driver's task
            self._failure = exc
            self._wakeup.set()


class _StepEnd(trio.abc.Instrument):
    """Runs drivers' turns as the task step that queued them ends (a trio instrument: the task
    has yielded, trio has not gone on), as the floor's client flushes its outbox: what the
    turns wake runs in trio's next batch, with no wait for I/O before it. One per trio run,
    shared by its drivers (a process with many sessions has one driver each), so a task step
    costs its two calls however many there are. A failure is raised in the failing driver's
    task (an instrument that raises is removed)."""

    _by_run: ClassVar[dict[trio.lowlevel.TrioToken, _StepEnd]] = {}

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token
        self.stepping = False  # a task's step is running, and this step end is still to come
        self.due: list[Driver] = []  # drivers with work queued in this step
        self.drivers = 0  # running drivers of this trio run

    @classmethod
    def join(cls) -> _StepEnd:
        """The current trio run's (installed by its first running driver)."""
        token = trio.lowlevel.current_trio_token()
        step_end = cls._by_run.get(token)
        if step_end is None:
            step_end = cls._by_run[token] = cls(token)
            trio.lowlevel.add_instrument(step_end)
        step_end.drivers += 1
        return step_end

    def leave(self, driver: Driver) -> None:
        """``driver`` stops running; the last one removes the instrument."""
        if driver in self.due:
            self.due.remove(driver)
        self.drivers -= 1
        if not self.drivers:
            del self._by_run[self.token]
            trio.lowlevel.remove_instrument(self)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.stepping = True

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.stepping = False
        if self.due:
            due, self.due = self.due, []
            for driver in due:
                driver._run_due()
