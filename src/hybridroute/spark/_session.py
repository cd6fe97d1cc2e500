"""A quiet local Spark session for development, tests and single-machine runs.

On a cluster, build the session the cluster's way (``spark-submit --master ...`` or the
platform's notebook) and pass it in; nothing in :mod:`hybridroute.spark` needs this
helper.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["local_session"]

# Only errors from Spark's own loggers: the JVM's INFO/WARN start-up chatter would
# otherwise interleave with our output (set before the JVM starts, so it covers start-up).
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j2_file() -> Path:
    path = Path(tempfile.gettempdir()) / "hybridroute-spark-log4j2.properties"
    if not path.is_file() or path.read_text(encoding="utf-8") != _LOG4J2:
        path.write_text(_LOG4J2, encoding="utf-8")
    return path


@contextlib.contextmanager
def _workers_run_this_python() -> Iterator[None]:
    """``PYSPARK_PYTHON`` = this interpreter while the session starts, unless the user set it.

    The SparkContext reads it once, when it starts, as the Python its workers run; it is
    put back afterwards so that the host's environment is left as it was.
    """
    if "PYSPARK_PYTHON" in os.environ:
        yield
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        yield
    finally:
        os.environ.pop("PYSPARK_PYTHON", None)


def local_session(
    app_name: str = "hybridroute",
    *,
    master: str = "local[2]",
    driver_memory: str = "1g",
    shuffle_partitions: int = 4,
    quiet: bool = True,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """Start (or reuse) a local SparkSession set up for hybridroute jobs.

    Parameters
    ----------
    app_name : str
        The application name.
    master : str
        ``local[N]`` (N worker threads); any master URL also works, but on a cluster the
        cluster's own launcher should build the session.
    driver_memory : str
        JVM heap of the driver (in local mode the executors live in it too).
    shuffle_partitions : int
        ``spark.sql.shuffle.partitions``; the aggregations here are small, and Spark's
        default of 200 only adds task overhead on a laptop.
    quiet : bool
        Keep Spark's log to errors and turn the web UI off (for a session started here;
        a running session is returned as it is).
    conf : mapping, optional
        Further Spark settings; they win over the ones above.

    Returns
    -------
    pyspark.sql.SparkSession

    Notes
    -----
    Python workers run the interpreter that runs this code (unless ``PYSPARK_PYTHON``
    names another), so they see the same installed hybridroute and MLflow; the
    environment is left as it was.
    If a session is already running, Spark returns it and ignores JVM-level settings.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "hybridroute.spark needs pyspark: pip install 'hybridroute[spark]' (and Java 17)"
        ) from exc

    settings: dict[str, str] = {
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if master.startswith("local"):
        # a laptop or CI box: never depend on the host name resolving
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if quiet:
        settings["spark.ui.enabled"] = "false"
        settings["spark.ui.showConsoleProgress"] = "false"
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile={_log4j2_file().as_uri()}"
        )
    settings.update({str(k): str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    running = SparkSession.getActiveSession() is not None
    with _workers_run_this_python():
        spark = builder.getOrCreate()
    if quiet and not running:
        # only a session started here: a running one keeps the log level its owner chose
        spark.sparkContext.setLogLevel("ERROR")
    return spark
