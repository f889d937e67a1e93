"""Building a SparkSession that works for matview, and the set-up traps it avoids.

* Workers run ``python3`` from PATH unless ``PYSPARK_PYTHON`` is set, and the context reads only
  the environment variable (not ``spark.pyspark.python``): set before the session is built.
* ``SPARK_LOCAL_IP=127.0.0.1`` silences the hostname-resolves-to-loopback warning.
* Task code lives in `matview.spark.tasks`, an importable module (code in ``__main__`` is
  pickled by value, and apsw's module object cannot be).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from matview.errors import Error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from matview.spark.sources import Source

#: a line naming a raised exception: `module.SomeError: message` (group 2: the message)
_RAISED = re.compile(r"^([\w.$]*(?:Error|Exception)):\s*(.*)$")
#: JVM flags that halve a small session's start (serial GC, C1 JIT only): tests, not heavy jobs
FAST_START_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def prepare_environment() -> None:
    """The environment variables the session and its workers need; call before building it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def build_session(
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
    app_name: str = "matview backfill",
    quiet: bool = True,
    fast_start: bool = False,
) -> SparkSession:
    """A session for `backfill` (under spark-submit, `getOrCreate` keeps the submitted conf)."""
    prepare_environment()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise Error("matview backfill needs PySpark: pip install 'matview[spark]' (and Java 17)") from None
    builder = SparkSession.builder.appName(app_name)
    if "SPARK_SUBMIT_OPTS" not in os.environ and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = builder.master(master)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if quiet:
        settings["spark.ui.showConsoleProgress"] = "false"
    if fast_start:
        settings["spark.driver.extraJavaOptions"] = FAST_START_JAVA_OPTIONS
        settings["spark.ui.enabled"] = "false"
        settings["spark.sql.shuffle.partitions"] = "2"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:
        raise Error(f"cannot start Spark (is Java 17 installed? apt install openjdk-17-jre-headless): {exc}") from None
    if quiet:
        session.sparkContext.setLogLevel("ERROR")
    return session


def spark_call(source: Source, run):  # type: ignore[no-untyped-def]
    """Run a Spark action; its failure (a corrupt file, a failed task) as a matview.Error."""
    try:
        return run()
    except Error:
        raise
    except Exception as exc:
        raise Error(
            f"Spark job over {source.table}={source.uri} failed (nothing was written): {spark_failure(exc)}"
        ) from None


def spark_failure(exc: BaseException) -> str:
    """What a Spark failure says, in a line: the exception a Python worker raised (the last
    line of its traceback), else the first a JVM stack names — not Py4J's wrapper line."""
    # (Py4J writes a JVM exception's line as ": org.apache…Exception: …")
    lines = [line.strip().lstrip(":").strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED.match(line)]
    python = [line for line in raised if not line.startswith(("org.", "java.", "py4j."))]
    reason = (python[-1] if python else raised[0]) if raised else (lines[0] if lines else type(exc).__name__)
    reason = _RAISED.sub(r"\2", reason) if reason.startswith("matview.errors.") else reason
    return reason[:500]
