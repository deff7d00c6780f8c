"""``odradek elect-leaders``: kafka-leader-election.sh through ElectLeaders (API 43).

Partitions come from exactly one of ``--all-topic-partitions``, ``--topic T [--partition P]``
(every partition of T without ``--partition``) or ``--path-to-json-file F`` in Kafka's format
``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. The output follows Kafka's tool::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE: ...

and the exit code is 1 when any partition failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from odradek.protocol.errors import ELECTION_NOT_NEEDED

TP = tuple[str, int]


class ElectionArgumentError(ValueError):
    pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser("elect-leaders", help="preferred or unclean leader election (kafka-leader-election.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--election-type", required=True, type=str.lower, choices=["preferred", "unclean"],
                   help="preferred: move leadership back to the first live in-sync replica; "
                        "unclean: elect an out-of-sync replica of a leaderless partition")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition in the cluster")
    which.add_argument("--topic", help="the partitions of this topic (with --partition: that one)")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions": [{"topic": "t", "partition": 0}, ...]}')
    p.add_argument("--partition", type=int, help="with --topic: only this partition")
    p.add_argument("--admin.config", "--command-config", dest="admin_config", metavar="FILE",
                   help="a client properties file (security settings; Java client or librdkafka names)")
    p.add_argument("--command-timeout", type=float, default=60.0)
    p.set_defaults(func=run)


def parse_partitions_json(text: str) -> list[TP]:
    """Kafka's election JSON; duplicates and malformed entries are errors."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ElectionArgumentError(f"invalid JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ElectionArgumentError('expected {"partitions": [{"topic": ..., "partition": ...}, ...]}')
    out: list[TP] = []
    for item in doc["partitions"]:
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str) \
                or not isinstance(item.get("partition"), int) or isinstance(item.get("partition"), bool):
            raise ElectionArgumentError(f"invalid partition entry: {json.dumps(item)}")
        out.append((item["topic"], item["partition"]))
    if not out:
        raise ElectionArgumentError("the JSON file lists no partitions")
    dups = sorted(tp for tp, n in Counter(out).items() if n > 1)
    if dups:
        raise ElectionArgumentError(
            "Replica election data contains duplicate partitions: " + ",".join(f"{t}-{p}" for t, p in dups))
    return out


def classify(results: dict[TP, Any]) -> tuple[list[TP], list[TP], list[tuple[TP, Any]]]:
    """(elected, already elected, failed with their errors); ``results`` maps each partition to
    None or an error object with ``code()`` (a KafkaError or anything shaped like it)."""
    done: list[TP] = []
    noop: list[TP] = []
    failed: list[tuple[TP, Any]] = []
    for tp in sorted(results):
        err = results[tp]
        code = getattr(err, "code", None)
        if err is None:
            done.append(tp)
        elif callable(code) and int(code()) == ELECTION_NOT_NEEDED:
            noop.append(tp)
        else:
            failed.append((tp, err))
    return done, noop, failed


def _tp(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def describe_error(err: Any) -> str:
    name = err.name() if hasattr(err, "name") else str(err.code())
    text = err.str() if hasattr(err, "str") else str(err)
    return f"{name}: {text}" if text and text != name else str(name)


def format_results(election_type: str, results: dict[TP, Any]) -> tuple[list[str], list[str]]:
    """Kafka's lines: (stdout lines, stderr lines)."""
    label = election_type.upper()
    done, noop, failed = classify(results)
    out: list[str] = []
    if done:
        out.append(f"Successfully completed leader election ({label}) for partitions {', '.join(map(_tp, done))}")
    if noop:
        out.append(f"Valid replica already elected for partitions {', '.join(map(_tp, noop))}")
    for tp, err in failed:
        out.append(f"Error completing leader election ({label}) for partition: {_tp(tp)}: {describe_error(err)}")
    errs = [f"Error: {len(failed)} replica(s) could not be elected"] if failed else []
    return out, errs


def _client_config(args: argparse.Namespace) -> dict[str, str | int | float | bool]:
    from odradek.client.command_config import admin_config

    conf: dict[str, str | int | float | bool] = dict(admin_config(args.bootstrap_server, args.admin_config))
    conf.setdefault("socket.timeout.ms", int(args.command_timeout * 1000))
    return conf


def _wanted(args: argparse.Namespace, admin: Any) -> list[TP] | None:
    if args.partition is not None and not args.topic:
        raise ElectionArgumentError("--partition needs --topic")
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file:
        return parse_partitions_json(Path(args.path_to_json_file).read_text())
    if args.partition is not None:
        return [(args.topic, args.partition)]
    md = admin.list_topics(timeout=args.command_timeout)  # all topics: asking for one may auto-create it
    t = md.topics.get(args.topic)
    if t is None or (t.error is not None and t.error.code() == 3) or not t.partitions:
        raise ElectionArgumentError(f"Topic '{args.topic}' does not exist")
    return [(args.topic, p) for p in sorted(t.partitions)]


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient(_client_config(args))
        wanted = _wanted(args, admin)
        election = ElectionType.PREFERRED if args.election_type == "preferred" else ElectionType.UNCLEAN
        parts = None if wanted is None else [TopicPartition(t, p) for t, p in wanted]
        # confluent-kafka 2.16 rejects request_timeout/operation_timeout here (SystemError from its
        # C argument parsing): socket.timeout.ms in the client config bounds the call instead
        raw = admin.elect_leaders(election, parts).result(args.command_timeout + 5)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        print(f"Error: {describe_error(err) if hasattr(err, 'code') else err}", file=sys.stderr)
        return 1
    except (ElectionArgumentError, OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except TimeoutError:
        print(f"Error: no answer within {args.command_timeout:.0f}s", file=sys.stderr)
        return 1
    results: dict[TP, Any] = {}
    for tp, exc in raw.items():
        err = exc  # a KafkaError (2.16), or a KafkaException wrapping one
        if isinstance(exc, KafkaException) and exc.args:
            err = exc.args[0]
        results[(tp.topic, tp.partition)] = err
    out, errs = format_results(args.election_type, results)
    for line in out:
        print(line)
    for line in errs:
        print(line, file=sys.stderr)
    return 1 if errs else 0
