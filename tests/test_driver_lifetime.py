"""Issue 11 defect 5 (memory kept after a connection): a :class:`~feds.driver.Driver` and its
scheduler are garbage once nothing uses them. Every client session makes one
(``feds.client.connect``), so a process that opens sessions one after another kept about
2.4 KB per session for good (measured over 100 sessions) while the driver table held its
drivers strongly."""

from __future__ import annotations

import gc
import weakref

from feds.driver import Driver


def test_a_driver_nothing_uses_is_freed_with_its_scheduler() -> None:
    driver = Driver()
    refs = [weakref.ref(driver), weakref.ref(driver.scheduler)]
    del driver
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
