"""Kafka 4.4's kafka-console-share-consumer (ConsoleShareConsumer, Kafka's Java KafkaShareConsumer inside) and
kafka-share-groups (ShareGroupCommand) against one Odradek broker (KIP-932), judged by what they print.

Two console share consumers of one group read one partition together: every record is delivered once (each
consumer acknowledges what it printed, ACCEPT, and no record goes to the other while it is locked). Then
kafka-share-groups lists, describes, resets, deletes the offsets of and deletes the group; its tables are
asserted as Kafka 4.4 prints them against a Kafka 4.4 broker for the same steps."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections import Counter

import kafka_peer
import pytest
from confluent_kafka import Producer
from integration.broker import Broker
from integration.clients import unique

from .conftest import Tool

pytestmark = pytest.mark.timeout(600)

ODRADEK_OVERRIDES = {"share.coordinator.state.topic.num.partitions": "1"}
RECORDS = 200
LINE = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\tDelivery:(\d+)\t(v\d+)$")


def boot(b: Broker) -> tuple[str, str]:
    return "--bootstrap-server", b.bootstrap


def table(text: str) -> list[dict[str, str]]:
    """The rows of one of kafka-share-groups' whitespace-aligned tables, keyed by its header."""
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0].split()
    return [dict(zip(head, line.split(), strict=False)) for line in lines[1:]]


def members(kafka: Tool, b: Broker, group: str) -> list[dict[str, str]]:
    proc = kafka("kafka-share-groups", *boot(b), "--describe", "--group", group, "--members", ok=False)
    out = proc.stdout
    # not yet a group (GroupIdNotFoundException), or "Share group 'g' has no active members." on stderr
    if proc.returncode != 0 or not out.strip():
        return []
    # CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT: HOST is "/127.0.0.1"
    return table(out)


class ConsoleShareConsumer:
    """kafka-console-share-consumer running until stopped (SIGTERM: its shutdown hook closes the consumer, which
    acknowledges what it printed, then it prints its count); its stdout lines read as they come."""

    def __init__(self, b: Broker, topic: str, group: str) -> None:
        cmd = kafka_peer.tool_command(
            "kafka-console-share-consumer", *boot(b), "--topic", topic, "--group", group,
            "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
            "--formatter-property", "print.delivery=true",
            # KIP-1206's record_limit: a fetch acquires at most max.poll.records records, so both members get some
            "--command-property", "max.poll.records=5", "--command-property", "share.acquire.mode=record_limit")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def records(self) -> list[tuple[int, int, int, str]]:
        return [(int(m[1]), int(m[2]), int(m[3]), m[4]) for m in map(LINE.match, list(self.lines)) if m]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, self.stderr = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate()
        self._reader.join(10)
        return self.proc.returncode


def test_console_share_consumers_then_share_groups_tool(kafka: Tool, odradek: Broker) -> None:
    topic, group = unique("share-topic"), unique("share-group")
    assert "Created topic" in kafka("kafka-topics", *boot(odradek), "--create", "--topic", topic,
                                    "--partitions", "1", "--replication-factor", "1").stdout
    # the group reads from the earliest offset (share.auto.offset.reset, a GROUP config of KIP-932)
    out = kafka("kafka-configs", *boot(odradek), "--alter", "--entity-type", "groups", "--entity-name", group,
                "--add-config", "share.auto.offset.reset=earliest").stdout
    assert f"Completed updating config for group {group}." in out

    consumers = [ConsoleShareConsumer(odradek, topic, group) for _ in range(2)]
    try:
        deadline = time.monotonic() + 180
        # Kafka 4.4 lists a member with no partitions until the share-partitions' state is initialized
        while len(rows := members(kafka, odradek, group)) < 2 or not all(r.get("ASSIGNMENT") for r in rows):
            assert time.monotonic() < deadline, f"the console share consumers did not join: {rows}"
            assert all(c.proc.poll() is None for c in consumers), [c.stop() and c.stderr for c in consumers]
            time.sleep(1)
        # Kafka's simple assignor gives the one partition to both members
        assert len(rows) == 2 and {r["CLIENT-ID"] for r in rows} == {"console-share-consumer"}
        assert [(r["#PARTITIONS"], r["ASSIGNMENT"]) for r in rows] == [("1", f"{topic}:0")] * 2
        assert all(r["HOST"] == "/127.0.0.1" and len(r["CONSUMER-ID"]) == 22 for r in rows)
        state = table(kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group,
                            "--state").stdout)
        assert [(r["GROUP"], r["STATE"], r["#MEMBERS"]) for r in state] == [(group, "Stable", "2")]

        p = Producer({"bootstrap.servers": odradek.bootstrap, "linger.ms": 0})
        for i in range(RECORDS):  # a batch each: a share-partition acquires whole batches
            p.produce(topic, value=b"v%d" % i)
            assert p.flush(30) == 0
            time.sleep(0.01)
        deadline = time.monotonic() + 180
        while sum(len(c.records()) for c in consumers) < RECORDS:
            assert time.monotonic() < deadline, [len(c.records()) for c in consumers]
            time.sleep(0.5)
        time.sleep(2)  # a record delivered twice would show now
    finally:
        codes = [c.stop() for c in consumers]

    got = [c.records() for c in consumers]
    for c, lines in zip(consumers, got, strict=True):
        assert f"Processed a total of {len(lines)} messages" in c.stderr, c.stderr
    assert all(code in (0, 130, 143) for code in codes), codes  # Kafka's shutdown hook, after SIGTERM
    offsets = Counter(off for lines in got for _, off, _, _ in lines)
    assert sorted(offsets) == list(range(RECORDS)), "every record is consumed"
    assert max(offsets.values()) == 1, "none delivered twice"
    assert all(part == 0 and delivery == 1 and value == f"v{off}" for lines in got
               for part, off, delivery, value in lines)
    assert all(len(lines) > 0 for lines in got), [len(lines) for lines in got]

    # kafka-share-groups, once the consumers have left
    assert group in kafka("kafka-share-groups", *boot(odradek), "--list").stdout.split()
    state = table(kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group, "--state").stdout)
    assert [(r["GROUP"], r["STATE"], r["#MEMBERS"]) for r in state] == [(group, "Empty", "0")]
    assert state[0]["COORDINATOR"] == odradek.bootstrap and re.fullmatch(r"\(\d+\)", state[0]["(ID)"])
    proc = kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group, "--members")
    assert proc.stdout.strip() == "" and proc.stderr.strip() == f"Share group '{group}' has no active members."
    offsets_table = table(kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group).stdout)
    # all acknowledged, nothing lags (KIP-1226's lag counts the acknowledged records above the start offset). The
    # start offset is the persisted one: Kafka's SharePartition writes each acknowledgement with the start offset
    # it had before it, then moves it in memory only, so the last acknowledgement's (at most max.poll.records)
    # records stay above it (Kafka 4.4 printed 198 for these steps, Odradek 199)
    assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["LAG"]) for r in offsets_table] == [(group, topic, "0", "0")]
    assert RECORDS - 5 <= int(offsets_table[0]["START-OFFSET"]) <= RECORDS

    reset = table(kafka("kafka-share-groups", *boot(odradek), "--reset-offsets", "--to-earliest", "--execute",
                        "--group", group, "--topic", topic).stdout)
    assert reset == [{"GROUP": group, "TOPIC": topic, "PARTITION": "0", "NEW-OFFSET": "0"}]
    offsets_table = table(kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group).stdout)
    assert offsets_table == [{"GROUP": group, "TOPIC": topic, "PARTITION": "0", "START-OFFSET": "0",
                              "LAG": str(RECORDS)}]

    deleted = table(kafka("kafka-share-groups", *boot(odradek), "--delete-offsets", "--group", group,
                          "--topic", topic).stdout)
    assert deleted == [{"TOPIC": topic, "STATUS": "Successful"}]
    out = kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group).stdout
    assert out.strip() == f"Share group '{group}' has no offset information."  # on stdout

    out = kafka("kafka-share-groups", *boot(odradek), "--delete", "--group", group).stdout
    assert out.strip() == f"Deletion of requested share groups ('{group}') was successful."
    assert group not in kafka("kafka-share-groups", *boot(odradek), "--list").stdout.split()
    gone = kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group, "--state", ok=False)
    # ShareGroupCommand prints the error and exits 0 (as against Kafka 4.4)
    assert gone.stdout.strip() == ("Error: Executing share group command failed due to "
                                   f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group {group} not found.")


def test_a_share_group_survives_restarts_and_its_deletion_too(kafka: Tool, odradek: Broker) -> None:
    """The share group's membership and epochs are in __consumer_offsets (Kafka 4.4's ShareGroup* records): after
    kill -9 kafka-share-groups describes the same group and assignment epochs and the same member at the same
    epoch, Kafka's KafkaShareConsumer carries on without rejoining, and a group deleted with kafka-share-groups
    stays deleted after the next restart."""
    topic, group = unique("durable-topic"), unique("durable-group")
    kafka("kafka-topics", *boot(odradek), "--create", "--topic", topic, "--partitions", "2",
          "--replication-factor", "1")

    def state() -> list[dict[str, str]]:
        proc = kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group, "--state", "--verbose",
                     ok=False)
        return table(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else []

    def verbose_members() -> list[dict[str, str]]:
        proc = kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group, "--members",
                     "--verbose", ok=False)
        return table(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else []

    consumer = ConsoleShareConsumer(odradek, topic, group)
    try:
        deadline = time.monotonic() + 180
        while not (rows := verbose_members()) or not rows[0].get("ASSIGNMENT"):
            assert time.monotonic() < deadline and consumer.proc.poll() is None, (rows, consumer.lines)
            time.sleep(1)
        # a second member joins and leaves: epochs that a rejoin after a forgotten group would not repeat
        passing = ConsoleShareConsumer(odradek, topic, group)
        try:
            while len(verbose_members()) < 2:
                assert time.monotonic() < deadline and passing.proc.poll() is None, passing.lines
                time.sleep(1)
        finally:
            passing.stop()
        # until the remaining member has heartbeated since (its epoch is the group's)
        while True:
            rows, before_state = verbose_members(), state()
            if (len(rows) == 1 and rows[0]["#PARTITIONS"] == "2"
                    and [r["GROUP-EPOCH"] for r in before_state] == [rows[0]["MEMBER-EPOCH"]]):
                break
            assert time.monotonic() < deadline, (rows, before_state)
            time.sleep(1)
        before_members = rows
        assert [(r["STATE"], r["#MEMBERS"]) for r in before_state] == [("Stable", "1")], before_state
        assert int(before_state[0]["GROUP-EPOCH"]) >= 4, before_state  # a lone member's rejoin would make it 2
        assert before_state[0]["GROUP-EPOCH"] == before_state[0]["ASSIGNMENT-EPOCH"] == rows[0]["MEMBER-EPOCH"]
        odradek.kill()
        odradek.start()
        deadline = time.monotonic() + 60
        while not (after_state := state()):
            assert time.monotonic() < deadline, "the group is not described after the restart"
            time.sleep(0.5)
        keep = ("GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")
        assert [{k: r[k] for k in keep} for r in after_state] == [{k: r[k] for k in keep} for r in before_state]
        time.sleep(6)  # the consumer's heartbeats (every 5 s) reach the restarted broker at the same epoch
        assert [{k: r[k] for k in keep} for r in state()] == [{k: r[k] for k in keep} for r in before_state]
        assert verbose_members() == before_members
        assert consumer.proc.poll() is None, consumer.lines
    finally:
        consumer.stop()
    out = kafka("kafka-share-groups", *boot(odradek), "--delete", "--group", group).stdout
    assert out.strip() == f"Deletion of requested share groups ('{group}') was successful."
    odradek.stop()
    odradek.start()
    deadline = time.monotonic() + 60
    while True:  # described as not found once the coordinator has loaded (not NOT_COORDINATOR or loading)
        gone = kafka("kafka-share-groups", *boot(odradek), "--describe", "--group", group, "--state", ok=False)
        if "GroupIdNotFoundException" in gone.stdout:
            break
        assert time.monotonic() < deadline, gone.stdout + gone.stderr
        time.sleep(0.5)
    assert group not in kafka("kafka-share-groups", *boot(odradek), "--list").stdout.split()
