"""A quiet local SparkSession for tests, examples, the demo and benchmarks.

The settings come from measurements on a 2-core machine (``pyspark-facts.md``): the UI off and
the driver bound to 127.0.0.1 (no port on :4040, no name lookups), a C1-only JIT (half the
start-up CPU; not for long production jobs), Spark's own logs off (a failing job still raises
its Python exception in the driver) and Python workers on this interpreter (else they run
whatever ``python3`` is on ``PATH``, without this virtualenv's packages).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

LOG4J = """\
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


def local_session(app: str = "feds", cores: int = 2, attempts: int = 1) -> Any:
    """A ``local[cores, attempts]`` SparkSession with the settings above."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    log4j = Path(tempfile.mkdtemp(prefix="feds-spark-")) / "log4j2.properties"
    log4j.write_text(LOG4J)
    java = f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{log4j}"
    return (
        SparkSession.builder.master(f"local[{cores},{attempts}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", java)
        .config("spark.sql.shuffle.partitions", str(cores))
        .getOrCreate()
    )
