"""Kafka Streams 4.4 as a judge of Odradek, beside Apache Kafka 4.4 itself: the classic word count
(dev.odradek.peer.WordCount: flatMapValues into words, groupBy word through a repartition topic, count() in a
persistent RocksDB store with its changelog, processing.guarantee=exactly_once_v2, a commit every 100 ms) over
a seeded corpus (20,000 lines) on a three-partition input topic.

Judged by its output topic, read read_committed: the last count of each word equals the count computed here
from the corpus, no count ever read is above its final value and none goes down (a double-counted line would
show), after a clean run (closed by SIGTERM, cleanly), and after a kill -9 mid-run (a backlog half processed,
more input arriving, transactions open) and a restart with the same application.id and the same state dir. The
restarted instance has the dead one's process id (kept in the state dir) and so its transactional.id: its
InitProducerId fences the dead producer and aborts its open transaction; its store, not closed cleanly under
exactly-once, is wiped and restored from the changelog; its consumer reads the committed offsets (OffsetFetch
requiring stable offsets, KIP-447). After the clean run the internal topics have the partitions and configs
Streams created them with, and Streams has purged consumed records of the repartition topic (DeleteRecords).
Each test runs on Odradek at its default transaction.version 1, on Odradek at transaction.version 2 (KIP-890, a
new Kafka 4.4 cluster's level: the Java producer bumps its epoch on every EndTxn), and on one Kafka 4.4 node
(KRaft, heap 512M, transaction.version 2): the same checks must pass on all three, Odradek and Kafka agree.
"""

from __future__ import annotations

import random
import re
import signal
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import kafka_peer
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from integration.broker import Broker, BrokerFactory, free_port
from integration.clients import create_topic, unique
from waiting import wait_until

from .conftest import Tool

pytestmark = pytest.mark.timeout(420)

PARTITIONS = 3
LINES = 20_000
SEED = 20260704
# what the tests give Kafka Streams besides WordCount's own settings: a dead member leaves the group after 6 s
# (the broker's group.min.session.timeout.ms) instead of 45, so the restart after a kill -9 rebalances sooner;
# the consumed part of the repartition topic is deleted (DeleteRecords) every second instead of every 30
STREAMS_OVERRIDES = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1500",
                     "repartition.purge.interval.ms": "1000"}
WORD = re.compile(r"\W+", re.ASCII)  # Java's \W: ASCII unless UNICODE_CHARACTER_CLASS


def vocabulary() -> list[str]:
    """300 made-up words of two or three syllables, in a fixed order (the first are the most frequent)."""
    rng = random.Random(SEED)
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    words: list[str] = []
    while len(words) < 300:
        w = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.choice((2, 3))))
        if w not in words:
            words.append(w)
    return words


def corpus(lines: int = LINES, seed: int = SEED) -> list[str]:
    """Seeded lines of 1 to 12 words, Zipf-like frequencies, with capitals and punctuation to split on."""
    rng = random.Random(seed)
    vocab = vocabulary()
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    out = []
    for _ in range(lines):
        words = rng.choices(vocab, weights, k=rng.randint(1, 12))
        words = [w.capitalize() if rng.random() < 0.1 else w for w in words]
        out.append(rng.choice((" ", "  ", ", ", " - ")).join(words) + rng.choice(("", ".", "!", " ?")))
    return out


def word_counts(lines: list[str]) -> Counter[str]:
    """What WordCount computes: lower-case, split on non-word characters, empty strings dropped."""
    return Counter(w for line in lines for w in WORD.split(line.lower()) if w)


def produce(bootstrap: str, topic: str, lines: list[str], chunk: int = 0, pause: float = 0.0) -> None:
    """The lines on the partitions in turn (line i on partition i % 3), idempotently; with ``chunk``, a flush
    and a pause every ``chunk`` lines (input that keeps arriving while the application runs)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    for i, line in enumerate(lines):
        while True:
            try:
                p.produce(topic, value=line.encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.1)
        if chunk and (i + 1) % chunk == 0:
            assert p.flush(60) == 0
            time.sleep(pause)
    assert p.flush(60) == 0


class Output:
    """The output topic read read_committed from the beginning: the last count of each word, and every count
    read that broke the rules (above the final count, or below an earlier count of the word)."""

    def __init__(self, bootstrap: str, topic: str, expected: Counter[str]) -> None:
        self.expected = expected
        self.counts: dict[str, int] = {}
        self.records = 0
        self.violations: list[str] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("judge"),
                                  "enable.auto.commit": False, "isolation.level": "read_committed"})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])

    def drain(self, quiet: float = 0.2, once: bool = False) -> dict[str, int]:
        """Read what is there until nothing comes for ``quiet`` seconds (with ``once``: one batch)."""
        while True:
            batch = self.consumer.consume(10_000, quiet)
            if not batch:
                return self.counts
            for m in batch:
                assert m.error() is None, m.error()
                key, value = m.key(), m.value()
                assert key is not None and value is not None, (m.partition(), m.offset())
                word = key.decode()
                (count,) = struct.unpack(">q", value)
                self.records += 1
                before = self.counts.get(word, 0)
                if count > self.expected.get(word, 0) or count < before:
                    self.violations.append(f"{word}: {before} then {count} (final {self.expected.get(word, 0)}) "
                                           f"at {m.partition()}/{m.offset()}")
                self.counts[word] = count
            if once:
                return self.counts

    def processed(self) -> int:
        """Words counted so far (committed): what one read brings."""
        return sum(self.drain(0.05, once=True).values())

    def complete(self) -> bool:
        return self.drain() == self.expected

    def diff(self) -> str:
        wrong = {w: (self.counts.get(w), self.expected.get(w)) for w in set(self.counts) | set(self.expected)
                 if self.counts.get(w) != self.expected.get(w)}
        return (f"{len(wrong)} words wrong (read, expected): {dict(sorted(wrong.items())[:10])}; "
                f"{sum(self.counts.values())} of {sum(self.expected.values())} words counted; "
                f"violations: {self.violations[:5]}")

    def close(self) -> None:
        self.consumer.close()


class WordCountApp:
    """One WordCount JVM; its stdout lines collected by a thread, its stderr (log4j2 at WARN) in a file."""

    def __init__(self, bootstrap: str, app_id: str, input_topic: str, output_topic: str, state_dir: Path,
                 log: Path) -> None:
        args = [bootstrap, app_id, input_topic, output_topic, str(state_dir),
                *(f"{k}={v}" for k, v in STREAMS_OVERRIDES.items())]
        self.cmd = kafka_peer.java_command("dev.odradek.peer.WordCount", args, heap=("-Xmx384M",),
                                           jvm_opts=kafka_peer.JVM_PERFORMANCE_OPTS)
        self.log = log
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self.reader: threading.Thread | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.lines = []
        with open(self.log, "a") as err:
            err.write(f"\n===== start #{self.starts}\n")
            err.flush()
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                         text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self.reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _exited(self) -> bool:
        """True when the JVM has exited; then its stdout lines are all in ``lines``."""
        assert self.proc is not None and self.reader is not None
        if self.proc.poll() is None:
            return False
        self.reader.join(10)
        return True

    def running(self) -> bool:
        if self._exited():
            assert self.proc is not None
            raise AssertionError(f"WordCount exited with {self.proc.returncode}: {self.lines}\n{self.log_tail()}")
        return "RUNNING" in self.lines

    def alive(self) -> bool:
        """True, or a failure when the application exited or reported a dead stream thread."""
        self.running()
        errors = [line for line in self.lines if line.startswith("ERROR")]
        assert not errors, f"{errors}\n{self.log_tail()}"
        return True

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM: KafkaStreams.close(); exit code 0 when the close was clean and no error happened."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._exited()
        return self.proc.returncode

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)
        self._exited()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return f"--- last {min(lines, len(text))} lines of {self.log} ---\n" + "\n".join(text[-lines:])


@pytest.fixture(scope="module")
def kafka_node(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = kafka_peer.KafkaCluster(tmp_path_factory.mktemp("kafka"), 1, ports=[free_port()],
                                      controller_ports=[free_port()], heap=("-Xmx512M", "-Xms512M"))
    with cluster:
        yield cluster.bootstrap


@pytest.fixture(scope="module")
def odradek_tv2(tmp_path_factory: pytest.TempPathFactory, kafka: Tool) -> Iterator[Broker]:
    """An Odradek broker at transaction.version 2 (KIP-890), as a new Kafka 4.4 cluster is, upgraded with Kafka's
    kafka-features: the Java producer then speaks TV2 (an epoch bump on every EndTxn, partitions added to the
    transaction by Produce itself)."""
    factory = BrokerFactory(tmp_path_factory.mktemp("odradek-tv2"))
    broker = factory({"group.initial.rebalance.delay.ms": "0", "num.partitions": "1"})
    kafka("kafka-features", "--bootstrap-server", broker.bootstrap, "upgrade", "--feature", "transaction.version=2")
    yield broker
    factory.close()


@pytest.fixture(scope="module", params=["odradek", "odradek-tv2", "kafka"])
def bootstrap(request: pytest.FixtureRequest, kafka_jars: Path) -> str:
    """The broker the application runs on: Odradek's (at its default transaction.version 1, then at 2), then
    Kafka's."""
    if request.param != "kafka":
        broker: Broker = request.getfixturevalue(request.param.replace("-", "_"))
        return broker.bootstrap
    node: str = request.getfixturevalue("kafka_node")
    return node


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return corpus()


def topics(bootstrap: str) -> tuple[str, str]:
    input_topic, output_topic = unique("lines"), unique("counts")
    create_topic(bootstrap, input_topic, PARTITIONS)
    create_topic(bootstrap, output_topic, PARTITIONS)
    return input_topic, output_topic


def internal_topics(bootstrap: str, app_id: str) -> dict[str, tuple[int, dict[str, str]]]:
    """The partition count and some configs of the topics Kafka Streams created for the application."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    out: dict[str, tuple[int, dict[str, str]]] = {}
    for name in sorted(t for t in md.topics if t.startswith(f"{app_id}-")):
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        entries = admin.describe_configs([res])[res].result(10)
        configs = {k: entries[k].value for k in ("cleanup.policy", "message.timestamp.type", "retention.ms")}
        out[name.removeprefix(f"{app_id}-")] = (len(md.topics[name].partitions), configs)
    return out


def test_word_count_exactly_once(bootstrap: str, lines: list[str], tmp_path: Path) -> None:
    input_topic, output_topic = topics(bootstrap)
    produce(bootstrap, input_topic, lines)
    expected = word_counts(lines)
    app_id = unique("wordcount")
    app = WordCountApp(bootstrap, app_id, input_topic, output_topic, tmp_path / "state",
                       tmp_path / "wordcount.stderr.log")
    output = Output(bootstrap, output_topic, expected)
    try:
        app.start()
        wait_until(app.running, 60, "WordCount to reach RUNNING", detail=app.log_tail)
        wait_until(lambda: app.alive() and output.complete(), 120, "the final counts", interval=0.5,
                   detail=output.diff)
        assert app.stop() == 0, f"{app.lines}\n{app.log_tail()}"
        assert "CLOSED clean" in app.lines
        output.drain(quiet=2.0)
        assert output.counts == expected, output.diff()
        assert output.violations == []
        # Streams deleted records of the repartition topic it had consumed (its purge, DeleteRecords, on a commit
        # a second or more after the last: a partition whose records were all consumed after the last purge
        # keeps them, so not every partition need have been purged)
        low = [output.consumer.get_watermark_offsets(TopicPartition(f"{app_id}-words-repartition", p), 10)[0]
               for p in range(PARTITIONS)]
        assert any(offset > 0 for offset in low), low
        # what Streams asked for when it created them (RepartitionTopicConfig, the changelog's compaction)
        assert internal_topics(bootstrap, app_id) == {
            "word-counts-changelog": (PARTITIONS, {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime",
                                                   "retention.ms": "604800000"}),
            "words-repartition": (PARTITIONS, {"cleanup.policy": "delete", "message.timestamp.type": "CreateTime",
                                               "retention.ms": "-1"}),
        }
    finally:
        app.stop()
        output.close()


def test_word_count_exactly_once_across_a_kill_9(bootstrap: str, lines: list[str], tmp_path: Path) -> None:
    input_topic, output_topic = topics(bootstrap)
    expected = word_counts(lines)
    # the same application.id and state dir after the kill -9 (the state store is restored from its changelog)
    app = WordCountApp(bootstrap, unique("wordcount"), input_topic, output_topic, tmp_path / "state",
                       tmp_path / "wordcount.stderr.log")
    output = Output(bootstrap, output_topic, expected)
    # half the input is there before the start, a backlog the kill falls in the middle of; the other half
    # arrives over some seconds, across the kill and the restart
    half = len(lines) // 2
    produce(bootstrap, input_topic, lines[:half])
    failures: list[BaseException] = []

    def produce_rest() -> None:
        try:
            produce(bootstrap, input_topic, lines[half:], 500, 0.25)
        except BaseException as e:
            failures.append(e)

    producer = threading.Thread(target=produce_rest, daemon=True)
    try:
        app.start()
        wait_until(app.running, 60, "WordCount to reach RUNNING", detail=app.log_tail)
        producer.start()
        quarter = sum(expected.values()) // 4
        wait_until(lambda: app.alive() and output.processed() >= quarter, 120, "a quarter of the words counted",
                   interval=0.02, detail=output.diff)
        app.kill9()
        # all it had committed (the dead producer's open transaction holds the output's last stable offset)
        killed_at, backlog = sum(output.drain().values()), sum(word_counts(lines[:half]).values())
        assert killed_at < backlog, f"the kill came after the backlog was done ({killed_at} words counted)"
        app.start()
        wait_until(app.running, 90, "WordCount to reach RUNNING after the kill -9", detail=app.log_tail)
        producer.join(120)
        assert not producer.is_alive() and not failures, failures
        wait_until(lambda: app.alive() and output.complete(), 150, "the final counts", interval=0.5,
                   detail=output.diff)
        assert app.stop() == 0, f"{app.lines}\n{app.log_tail()}"
        output.drain(quiet=2.0)
        assert output.counts == expected, output.diff()
        assert output.violations == []
    finally:
        app.stop()
        output.close()
