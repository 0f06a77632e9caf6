"""Shared pytest configuration: hypothesis profiles (CI runs more examples), the Spark session."""

import os
import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# Many tests stop a `feds` process with SIGINT (Ctrl-C) and expect a clean exit. A suite started
# in the background by a non-interactive shell (`make test &`, nohup) inherits SIGINT ignored,
# and so would every process it starts: Python then installs no KeyboardInterrupt handler, and
# those processes never stop. Restored here, the processes start with the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# -- Spark: one local session for every Spark test (tests/test_spark*.py) -------------------------


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A quiet ``local[2]`` SparkSession (:func:`feds.spark.session.local_session`) allowing 2
    attempts per task, so retries can be tested. Skips where pyspark is not installed."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Spark needs Java 17 or 21 (no java on PATH, no JAVA_HOME)")
    from feds.spark.session import local_session

    session = local_session("feds-tests", attempts=2)
    try:
        yield session
    finally:
        session.stop()
