"""``odradek topics``: kafka-topics.sh through the broker's own APIs."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    action = p.add_mutually_exclusive_group(required=True)
    for a in ("create", "list", "describe", "delete", "alter"):
        action.add_argument(f"--{a}", action="store_true")
    p.add_argument("--topic", help="topic name")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="broker lists per partition: 0:1,1:2,...")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--command-timeout", type=float, default=30.0)
    p.set_defaults(func=run)


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    from odradek.client.command_config import admin_config

    conf: dict[str, Any] = admin_config(args.bootstrap_server, getattr(args, "command_config", None))
    conf["socket.timeout.ms"] = int(args.command_timeout * 1000)
    return AdminClient(conf)


def _fail(msg: str) -> int:
    print(f"Error: {msg}", file=sys.stderr)
    return 1


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--config expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _assignment(raw: str | None) -> list[list[int]] | None:
    if not raw:
        return None
    return [[int(b) for b in part.split(":")] for part in raw.split(",")]


def partition_line(topic: str, partition: int, leader: int, replicas: list[int], isr: list[int],
                   live: set[int]) -> str:
    """Kafka's describe line; ``Leader: none`` without a leader, and ``Offline:`` listing the
    replicas on brokers that are not alive (the metadata's offline replicas) when there are any."""
    line = (
        f"\tTopic: {topic}\tPartition: {partition}\tLeader: {leader if leader >= 0 else 'none'}\t"
        f"Replicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}"
    )
    offline = [b for b in replicas if b not in live]
    if offline:
        line += f"\tOffline: {','.join(map(str, offline))}"
    return line


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

    admin = _admin(args)
    timeout = args.command_timeout
    try:
        if args.list:
            md = admin.list_topics(timeout=timeout)
            for name in sorted(md.topics):
                if args.exclude_internal and name.startswith("__"):
                    continue
                print(name)
            return 0
        if args.create:
            if not args.topic:
                return _fail("--topic is required with --create")
            assignment = _assignment(args.replica_assignment)
            kwargs: dict[str, Any] = {"config": _configs(args.config)}
            if assignment:
                kwargs["replica_assignment"] = assignment
            else:
                kwargs["num_partitions"] = args.partitions if args.partitions is not None else -1
                kwargs["replication_factor"] = args.replication_factor if args.replication_factor is not None else -1
            fut = admin.create_topics([NewTopic(args.topic, **kwargs)], request_timeout=timeout)[args.topic]
            try:
                fut.result(timeout)
            except KafkaException as e:
                if args.if_not_exists and e.args[0].code() == 36:
                    return 0
                raise
            print(f"Created topic {args.topic}.")
            return 0
        if args.delete:
            if not args.topic:
                return _fail("--topic is required with --delete")
            try:
                admin.delete_topics([args.topic], request_timeout=timeout)[args.topic].result(timeout)
            except KafkaException as e:
                if args.if_exists and e.args[0].code() == 3:
                    return 0
                raise
            print(f"Deleted topic {args.topic}.")
            return 0
        if args.alter:
            if not args.topic or args.partitions is None:
                return _fail("--alter needs --topic and --partitions")
            assignment = _assignment(args.replica_assignment)
            np = NewPartitions(args.topic, args.partitions, assignment) if assignment else NewPartitions(args.topic, args.partitions)
            admin.create_partitions([np], request_timeout=timeout)[args.topic].result(timeout)
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
            return 0
        # describe
        md = admin.list_topics(timeout=timeout)
        names = [args.topic] if args.topic else sorted(md.topics)
        for name in names:
            t = md.topics.get(name)
            if t is None or (t.error is not None and t.error.code() == 3):
                return _fail(f"Topic '{name}' does not exist as expected")
            if args.exclude_internal and name.startswith("__"):
                continue
            res = ConfigResource(ConfigResource.Type.TOPIC, name)
            cfg = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout)
            overrides = ",".join(
                f"{k}={v.value}" for k, v in sorted(cfg.items()) if v.source == 1  # DYNAMIC_TOPIC_CONFIG
            )
            parts = sorted(t.partitions.values(), key=lambda p: p.id)
            rf = len(parts[0].replicas) if parts else 0
            from confluent_kafka import TopicCollection

            described = admin.describe_topics(TopicCollection([name]), request_timeout=timeout)[name].result(timeout)
            topic_id = described.topic_id
            print(
                f"Topic: {name}\tTopicId: {topic_id or ''}\tPartitionCount: {len(parts)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {overrides}"
            )
            live = {int(b) for b in md.brokers}
            for p in parts:
                print(partition_line(name, p.id, p.leader, p.replicas, p.isrs, live))
        return 0
    except KafkaException as e:
        return _fail(str(e.args[0]) if e.args else str(e))
    except ValueError as e:
        return _fail(str(e))
