"""Runs a sans-IO :class:`~feds.actor.Scheduler` inside a trio program.

The driver sleeps while the scheduler is idle, wakes when work is queued (from trio code in the
same thread), and runs turns in slices so I/O tasks get their share of the loop.
"""

from __future__ import annotations

import trio

from feds.actor import Facet, Scheduler, TurnAction

SLICE = 256
"""Turns run before the driver yields to other trio tasks."""


class Driver:
    """Owns a scheduler for the lifetime of :meth:`run`."""

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler or Scheduler()
        self._wakeup = trio.Event()
        self.scheduler.on_work = self._wake

    def _wake(self) -> None:
        self._wakeup.set()

    def act(self, facet: Facet, action: TurnAction) -> None:
        """Queue ``action`` as a turn in ``facet`` (call from trio code in the driver's thread)."""
        self.scheduler.enqueue(facet.actor, facet, action)

    async def run(self) -> None:
        """Run turns forever (cancel the enclosing scope to stop)."""
        scheduler = self.scheduler
        while True:
            if scheduler.idle():
                await self._wakeup.wait()
                self._wakeup = trio.Event()
            scheduler.run_until_idle(max_turns=SLICE)
            await trio.sleep(0)
