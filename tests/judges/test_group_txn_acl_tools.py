"""Kafka 4.4's kafka-consumer-groups, kafka-groups, kafka-transactions and kafka-acls against one Odradek
broker (an ACL authorizer on, ANONYMOUS a super user so the tools may do everything), judged by what they
print."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from integration.broker import Broker
from integration.clients import create_topic, unique
from integration.test_transactions_cli import hang
from waiting import wait_until

from .conftest import Tool

pytestmark = pytest.mark.timeout(240)

ODRADEK_OVERRIDES = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "transaction.partition.verification.enable": "false",  # lets a test leave a hanging transaction
    "transaction.state.log.num.partitions": "2",
}


def boot(b: Broker) -> tuple[str, str]:
    return "--bootstrap-server", b.bootstrap


def table(text: str) -> list[dict[str, str]]:
    """The rows of one of kafka-consumer-groups' whitespace-aligned tables, keyed by its header."""
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0].split()
    return [dict(zip(head, line.split(), strict=False)) for line in lines[1:]]


def tsv(text: str) -> list[list[str]]:
    """kafka-transactions' rows: cells separated by tabs and padded with spaces, a tab after the last."""
    return [[cell.strip() for cell in line.rstrip("\t").split("\t")] for line in text.splitlines() if line.strip()]


def fill(b: Broker, topic: str, partitions: int, per_partition: int) -> None:
    create_topic(b.bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=b"%d" % i, partition=part)
    assert p.flush(30) == 0


@pytest.fixture
def member(odradek: Broker) -> Iterator[tuple[str, str, Consumer]]:
    topic, group = unique("cg"), unique("group")
    fill(odradek, topic, 2, 10)
    c = Consumer({"bootstrap.servers": odradek.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": "judge-member"})
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 15 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            seen += 1
            if seen == 15:
                c.commit(asynchronous=False)
    assert seen == 15
    yield topic, group, c
    c.close()


def test_kafka_consumer_groups_on_a_live_classic_group(kafka: Tool, odradek: Broker,
                                                       member: tuple[str, str, Consumer]) -> None:
    topic, group, consumer = member
    assert group in kafka("kafka-consumer-groups", *boot(odradek), "--list").stdout.split()
    rows = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group).stdout)
    assert {r["PARTITION"] for r in rows} == {"0", "1"}
    assert all(r["GROUP"] == group and r["TOPIC"] == topic and r["LOG-END-OFFSET"] == "10" for r in rows)
    assert sum(int(r["CURRENT-OFFSET"]) for r in rows) == 15 and sum(int(r["LAG"]) for r in rows) == 5
    assert all(r["CONSUMER-ID"].startswith("judge-member-") and r["CLIENT-ID"] == "judge-member" for r in rows)

    [state] = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group, "--state").stdout)
    assert state["STATE"] == "Stable" and state["#MEMBERS"] == "1" and state["ASSIGNMENT-STRATEGY"] == "range"
    assert state["COORDINATOR"] == odradek.bootstrap and state["(ID)"] == "(0)"
    [members] = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group,
                            "--members", "--verbose").stdout)
    assert members["CLIENT-ID"] == "judge-member" and members["#PARTITIONS"] == "2"

    refused = kafka("kafka-consumer-groups", *boot(odradek), "--reset-offsets", "--group", group, "--topic", topic,
                    "--to-earliest", "--execute", ok=False)
    assert "Assignments can only be reset if the group" in refused.stdout + refused.stderr
    listed = kafka("kafka-groups", *boot(odradek), "--list").stdout
    assert re.search(rf"^{re.escape(group)}\s+Classic\s+consumer\s*$", listed, re.M), listed


def test_kafka_consumer_groups_reset_delete_offsets_and_delete(kafka: Tool, odradek: Broker,
                                                               member: tuple[str, str, Consumer]) -> None:
    topic, group, consumer = member
    consumer.close()
    wait_until(lambda: "Empty" in kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group,
                                        "--state").stdout, 30, "the group to be empty")
    dry = table(kafka("kafka-consumer-groups", *boot(odradek), "--reset-offsets", "--group", group, "--topic", topic,
                      "--to-offset", "3", "--dry-run").stdout)
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in dry} == {("0", "3"), ("1", "3")}
    rows = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group).stdout)
    assert sum(int(r["CURRENT-OFFSET"]) for r in rows) == 15  # a dry run changes nothing

    done = table(kafka("kafka-consumer-groups", *boot(odradek), "--reset-offsets", "--group", group,
                       "--topic", f"{topic}:1", "--to-earliest", "--execute").stdout)
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in done] == [("1", "0")]
    shifted = table(kafka("kafka-consumer-groups", *boot(odradek), "--reset-offsets", "--group", group,
                          "--topic", f"{topic}:0", "--shift-by", "-2", "--execute").stdout)
    before = {r["PARTITION"]: int(r["CURRENT-OFFSET"]) for r in rows}
    assert [(r["PARTITION"], int(r["NEW-OFFSET"])) for r in shifted] == [("0", before["0"] - 2)]

    out = kafka("kafka-consumer-groups", *boot(odradek), "--delete-offsets", "--group", group, "--topic",
                f"{topic}:1").stdout
    assert re.search(rf"{re.escape(topic)}\s+1\s+Successful", out), out
    rows = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group).stdout)
    assert [r["PARTITION"] for r in rows if r["CURRENT-OFFSET"] != "-"] == ["0"]

    out = kafka("kafka-consumer-groups", *boot(odradek), "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert group not in kafka("kafka-consumer-groups", *boot(odradek), "--list").stdout.split()
    gone = kafka("kafka-consumer-groups", *boot(odradek), "--delete", "--group", group, ok=False)
    assert "GroupIdNotFoundException" in gone.stdout + gone.stderr


def test_kafka_consumer_groups_on_a_kip848_group(kafka: Tool, odradek: Broker) -> None:
    topic, group = unique("cg848"), unique("group848")
    fill(odradek, topic, 3, 5)
    c = Consumer({"bootstrap.servers": odradek.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 15 and time.monotonic() < deadline:
            m = c.poll(1)
            seen += m is not None and m.error() is None
        assert seen == 15
        c.commit(asynchronous=False)
        [state] = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group,
                              "--state").stdout)
        assert state["STATE"] == "Stable" and state["#MEMBERS"] == "1" and state["ASSIGNMENT-STRATEGY"] == "uniform"
        rows = table(kafka("kafka-consumer-groups", *boot(odradek), "--describe", "--group", group).stdout)
        assert sorted(r["PARTITION"] for r in rows) == ["0", "1", "2"] and all(r["LAG"] == "0" for r in rows)
        listed = kafka("kafka-groups", *boot(odradek), "--list", "--consumer").stdout
        assert re.search(rf"^{re.escape(group)}\s+Consumer\s+consumer\s*$", listed, re.M), listed
    finally:
        c.close()


def test_kafka_transactions_list_describe_and_abort_a_hanging_one(kafka: Tool, odradek: Broker) -> None:
    topic, tid = unique("kt-txn"), unique("tid")
    create_topic(odradek.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": odradek.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open")
    assert p.flush(30) == 0

    rows = tsv(kafka("kafka-transactions", *boot(odradek), "list").stdout)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    mine = next(r for r in rows[1:] if r[0] == tid)
    assert mine[1] == "0" and mine[3] == "Ongoing"
    head, row = tsv(kafka("kafka-transactions", *boot(odradek), "describe", "--transactional-id", tid).stdout)
    d = dict(zip(head, row, strict=True))
    assert d["TransactionState"] == "Ongoing" and d["ProducerId"] == mine[2] and d["TopicPartitions"] == f"{topic}-0"
    head, *prods = tsv(kafka("kafka-transactions", *boot(odradek), "describe-producers", "--topic", topic,
                             "--partition", "0").stdout)
    assert head[0] == "ProducerId" and [(r[0], r[-1]) for r in prods] == [(mine[2], "0")]
    p.commit_transaction(30)

    stuck = unique("kt-hang")
    pid, epoch = hang(odradek, stuck)
    hanging = tsv(kafka("kafka-transactions", *boot(odradek), "find-hanging", "--broker-id", "0",
                        "--max-transaction-timeout", "0").stdout)
    assert hanging[0][:4] == ["Topic", "Partition", "ProducerId", "ProducerEpoch"]
    assert any(row[:3] == [stuck, "0", str(pid)] for row in hanging[1:]), hanging
    kafka("kafka-transactions", *boot(odradek), "abort", "--topic", stuck, "--partition", "0", "--start-offset", "0")
    after = tsv(kafka("kafka-transactions", *boot(odradek), "find-hanging", "--broker-id", "0",
                      "--max-transaction-timeout", "0").stdout)
    assert not any(row[0] == stuck for row in after[1:]), after


def test_kafka_acls_add_list_remove(kafka: Tool, odradek: Broker) -> None:
    topic, group = unique("acl-topic"), unique("acl-group")
    out = kafka("kafka-acls", *boot(odradek), "--add", "--allow-principal", "User:alice", "--operation", "Read",
                "--operation", "Describe", "--topic", topic, "--group", group).stdout
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`" in out
    listed = kafka("kafka-acls", *boot(odradek), "--list", "--topic", topic).stdout
    assert f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`" in listed
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    kafka("kafka-acls", *boot(odradek), "--add", "--deny-principal", "User:mallory", "--operation", "All",
          "--topic", "secret-", "--resource-pattern-type", "prefixed")
    prefixed = kafka("kafka-acls", *boot(odradek), "--list", "--principal", "User:mallory").stdout
    assert "ResourcePattern(resourceType=TOPIC, name=secret-, patternType=PREFIXED)" in prefixed
    assert "operation=ALL, permissionType=DENY" in prefixed
    kafka("kafka-acls", *boot(odradek), "--remove", "--force", "--allow-principal", "User:alice", "--operation",
          "Read", "--operation", "Describe", "--topic", topic, "--group", group)
    assert "User:alice" not in kafka("kafka-acls", *boot(odradek), "--list", "--topic", topic).stdout
