"""Suite-wide hooks.

A failing test that started broker processes gets the tail of each broker's log
(``<name>.stderr.log`` under the test's ``tmp_path``) in its report, so a failure seen only in CI
can be read from CI's output.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

LOG_TAIL_BYTES = 12_000

# Property tests run beside brokers, ZooKeeper and Spark on two cores: a slow example is the machine's load, not
# the property's failure, so neither Hypothesis's per-example deadline nor its "generation is slow" check
# applies (a test may still set its own). The examples themselves are unchanged.
settings.register_profile("odradek", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("odradek")

# Broker and tool subprocesses run in their own directories: a relative PYTHONPATH (``PYTHONPATH=src`` from a
# checkout) would no longer name the checkout there, and they would import another copy of odradek.
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p
    )


# The Spark drivers the tests start (the pipeline tests' session, every ``odradek pipeline run`` job: Spark's
# launcher adds SPARK_SUBMIT_OPTS to the driver's JVM) live seconds to minutes on small data, so, as for Kafka's
# admin tools (peers/kafka_peer.py QUICK_START_OPTS): C1 alone and the serial collector. Measured on 2 loaded
# cores, a driver's JVM from launch to its first job: 16-17 s of CPU with Spark's defaults, 7.4 s with these.
# What the drivers do is unchanged; a job run by hand keeps the defaults.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    tmp = funcargs.get("tmp_path")
    if not isinstance(tmp, Path) or not tmp.is_dir():
        return
    for log in sorted(tmp.rglob("*.stderr.log")):
        data = log.read_bytes()
        tail = data[-LOG_TAIL_BYTES:].decode(errors="replace")
        if len(data) > LOG_TAIL_BYTES:
            tail = "[...]" + tail[tail.find("\n"):]
        report.sections.append((f"broker log {log.relative_to(tmp)} (last {LOG_TAIL_BYTES} bytes)", tail))
