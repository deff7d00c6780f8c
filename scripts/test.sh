#!/usr/bin/env bash
# The test command of the README and of .ci/run (after scripts/setup.sh): lint (ruff), types (mypy, strict
# on src/), then the whole suite under coverage, the broker and tool subprocesses it starts included
# ([tool.coverage.run] patch = ["subprocess"] in pyproject.toml), failing below the floor set there
# ([tool.coverage.report] fail_under). Any of the three failing fails the run.
#
#   bash scripts/test.sh                 # all of it, as CI runs it
#   bash scripts/test.sh tests/unit -x   # lint, types, then pytest with these arguments (no coverage floor)
#   bash scripts/test.sh --fast          # lint, types, then the fast tier (tests/unit: no broker process), timed
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
"$PY" -m mypy peers/kafka_peer.py peers/compatibility.py

if [ "${1:-}" = "--fast" ]; then
  shift
  start=$(date +%s)
  "$PY" -m pytest -q -n 2 tests/unit "$@"
  echo "fast tier: $(( $(date +%s) - start )) s"
  exit 0
fi
if [ $# -gt 0 ]; then
  exec "$PY" -m pytest "$@"
fi

echo "== pytest under coverage"
"$PY" -m coverage erase
# several pytest-xdist workers, whole files to each (module-scoped brokers and Spark sessions stay shared within a
# file); the tests mostly wait on brokers, ZooKeeper and Spark, so three workers fit two cores
"$PY" -m coverage run -m pytest -n "${ODRADEK_TEST_WORKERS:-3}" --dist loadfile
"$PY" -m coverage combine -q
total=$("$PY" -m coverage report --format=total --fail-under=0)
if ! "$PY" -m coverage report --format=total >/dev/null; then
  "$PY" -m coverage report --fail-under=0 | tail -40  # the least covered files
  echo "FAILED: line coverage of src/odradek is ${total}%, below the floor (fail_under in pyproject.toml)"
  exit 1
fi
echo "line coverage of src/odradek: ${total}% (floor: fail_under in pyproject.toml)"
