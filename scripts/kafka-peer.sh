#!/usr/bin/env bash
# Apache Kafka 4.4 beside Odradek (peers/kafka_peer.py): fetched from Maven Central, started in KRaft mode.
#
#   bash scripts/kafka-peer.sh fetch                                   # jars into peers/kafka/target (once)
#   bash scripts/kafka-peer.sh start --brokers 3 --base-port 29092     # three combined nodes, until Ctrl-C
#   bash scripts/kafka-peer.sh tool kafka-topics --bootstrap-server 127.0.0.1:9092 --list
# Runs in the caller's directory (a tool's file arguments are relative to it).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=${ODRADEK_PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" "$ROOT/peers/kafka_peer.py" "$@"
