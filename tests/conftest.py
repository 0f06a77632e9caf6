"""Shared pytest configuration: hypothesis profiles (CI runs more examples), the Spark session."""

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


# -- Spark: one local session for every Spark test (tests/test_spark*.py) -------------------------

SPARK_LOG4J = """\
rootLogger.level = off
rootLogger.appenderRef.stderr.ref = console
logger.spark.name = org.apache.spark
logger.spark.level = off
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c: %m%n
"""


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A quiet ``local[2]`` SparkSession (2 attempts per task, so retries can be tested).

    UI off, driver bound to 127.0.0.1, C1-only JIT (half the start-up CPU), logs off (a failing
    job still raises its Python exception in the driver), workers on this interpreter.
    Skips where pyspark is not installed.
    """
    pytest.importorskip("pyarrow")
    sql = pytest.importorskip("pyspark.sql")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    log4j = tmp_path_factory.mktemp("spark") / "log4j2.properties"
    log4j.write_text(SPARK_LOG4J)
    java = f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{log4j}"
    session = (
        sql.SparkSession.builder.master("local[2,2]")
        .appName("feds-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", java)
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()
