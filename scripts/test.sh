#!/usr/bin/env bash
# The test command of the README and of .ci/run (after scripts/setup.sh): lint (ruff), types (mypy, strict
# on src/), then the whole suite. Any of them failing fails the run.
#
#   bash scripts/test.sh                 # all of it, as CI runs it
#   bash scripts/test.sh --coverage      # all of it under coverage, broker and tool subprocesses included
#                                        # ([tool.coverage.run] patch = ["subprocess"]), failing below the floor
#                                        # ([tool.coverage.report] fail_under in pyproject.toml)
#   bash scripts/test.sh tests/unit -x   # lint, types, then pytest with these arguments (no coverage floor)
#   bash scripts/test.sh --fast          # lint, types, then the fast tier (tests/unit: no broker process), timed
#
# Coverage is not part of CI's run: its tracer doubles the CPU time of Python code (the fast tier: 48 s of
# CPU plain, 90 s under coverage), and on CI's two cores the whole suite under it took 28.6 minutes, with
# the brokers of the fault-injection and client-judge tests slowed enough to miss their deadlines.
#
# ODRADEK_TEST_WORKERS sets the number of pytest-xdist workers of the full run (default 3; 0 runs in-process).
# ODRADEK_PYTHON names another interpreter than .venv/bin/python (one with the test extras installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${ODRADEK_PYTHON:-.venv/bin/python}

echo "== ruff check src tests bench peers"
"$PY" -m ruff check src tests bench peers
echo "== mypy src peers"
"$PY" -m mypy src
"$PY" -m mypy peers/kafka_peer.py peers/compatibility.py peers/connect_peer.py peers/maven_fetch.py peers/procs.py

if [ "${1:-}" = "--fast" ]; then
  shift
  start=$(date +%s)
  "$PY" -m pytest -q -n 2 tests/unit "$@"
  echo "fast tier: $(( $(date +%s) - start )) s"
  exit 0
fi
COVERAGE=0
if [ "${1:-}" = "--coverage" ]; then
  COVERAGE=1
  shift
fi
if [ $# -gt 0 ]; then
  exec "$PY" -m pytest "$@"
fi

# several pytest-xdist workers, whole files to each (module-scoped brokers and Spark sessions stay shared within a
# file); the tests mostly wait on brokers, ZooKeeper and Spark, so three workers fit two cores
PYTEST_ARGS=(-n "${ODRADEK_TEST_WORKERS:-3}" --dist loadfile --durations=60)  # the slowest, for the time budget
if [ "$COVERAGE" = 0 ]; then
  echo "== pytest"
  exec "$PY" -m pytest "${PYTEST_ARGS[@]}"
fi
echo "== pytest under coverage"
"$PY" -m coverage erase
"$PY" -m coverage run -m pytest "${PYTEST_ARGS[@]}"
"$PY" -m coverage combine -q
total=$("$PY" -m coverage report --format=total --fail-under=0)
if ! "$PY" -m coverage report --format=total >/dev/null; then
  "$PY" -m coverage report --fail-under=0 | tail -40  # the least covered files
  echo "FAILED: line coverage of src/odradek is ${total}%, below the floor (fail_under in pyproject.toml)"
  exit 1
fi
echo "line coverage of src/odradek: ${total}% (floor: fail_under in pyproject.toml)"
