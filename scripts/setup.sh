#!/usr/bin/env bash
# One-shot set-up on a fresh Debian machine: system packages, a virtualenv in .venv,
# and the package with its test extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# Java: Spark for the pipeline tests and Kafka 4.4 (the peer and judge); maven: fetches Kafka's jars from Maven
# Central and builds the Java harness (peers/kafka); chromium: the console tests; clang with its runtime
# libraries (libFuzzer, sanitizers) and gcc with libasan8/libubsan1: tests/fuzz/test_sanitizers.py builds
# the C extension's decoders with AddressSanitizer and UBSan; postgresql: the database whose changes Debezium
# captures in tests/cdc (odradek.devcluster.postgres starts clusters of its own; Debian's own cluster is unused);
# libfaketime: the clock nemesis of odradek.verify (a broker's wall clock moved, its monotonic clock left alone)
APT_PACKAGES=(kcat zookeeper openjdk-17-jdk-headless maven chromium gcc libasan8 libubsan1 clang libclang-rt-14-dev nftables iproute2 postgresql libfaketime)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

# Apache Kafka 4.4's jars (broker, tools, Java client, Streams) from Maven Central into peers/kafka/target (once)
.venv/bin/python peers/kafka_peer.py fetch >/dev/null
# Spark's own JVM Kafka connector (spark-sql-kafka-0-10), judged beside the project's Python source
.venv/bin/python peers/kafka_peer.py fetch-spark >/dev/null
# Kafka Connect 4.4 and Debezium's PostgreSQL connector 3.6.1.Final into peers/connect/target (once)
.venv/bin/python peers/connect_peer.py fetch >/dev/null
