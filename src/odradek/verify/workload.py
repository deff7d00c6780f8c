"""The Kafka workload of a verification run: clients that send, poll and commit transactions against a
cluster while faults are injected, recording every operation (odradek.verify.history).

Keys are the partitions of one topic (``"<topic>-<partition>"``); each key's values are the integers
1, 2, 3, ... handed out once, so every value is unique per key and a partition's log can be rebuilt
from what was acknowledged and what was read.

- *producers* (idempotent, acks=all) send one record at a time: ``send`` invoked, then ``ok`` with the
  offset from the delivery report, or ``info`` (a timeout or a broker error: it may or may not be in
  the log). After an ``info`` the client is replaced and gets a new process number, as Jepsen does.
- *transactional producers* poll (read_committed, from the end onwards), then send two to four
  records to random keys in one transaction and commit it (``txn`` ok, with what the poll read), or
  abort one in five on purpose (``txn`` fail: none of it may ever be read); a failed commit is ``info``.
- *consumers* (read_committed, explicit ``assign`` of every partition from offset 0) poll batches:
  ``poll`` ok with the records by key. A consumer replaced after an error records a new ``assign``.

Processes are numbered: producers 0..P-1, transactional producers next, consumers after; a replaced
client takes its number plus the number of clients.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from odradek.verify.history import FAIL, INFO, OK, Recorder

# librdkafka's own log lines (retries, coordinator moves) go here; the runner writes them to run.log
CLIENT_LOG = logging.getLogger("odradek.verify.clients")


@dataclass
class WorkloadConfig:
    bootstrap: str
    topic: str
    partitions: int
    producers: int = 2
    txn_producers: int = 1
    consumers: int = 2
    op_timeout_s: float = 10.0
    seed: int = 0


class SafeRecorder:
    """A :class:`Recorder` shared by threads."""

    def __init__(self, out: TextIO) -> None:
        self._lock = threading.Lock()
        self._rec = Recorder(out, time.monotonic_ns)
        self._out = out
        self._closed = False

    def invoke(self, process: int, f: str, value: Any) -> None:
        with self._lock:
            if not self._closed:
                self._rec.invoke(process, f, value)
                self._out.flush()

    def complete(self, process: int, type_: str, f: str, value: Any) -> None:
        with self._lock:
            if not self._closed:
                self._rec.complete(process, type_, f, value)
                self._out.flush()

    def close(self) -> None:
        """Later events (a client thread that outlived the run) are dropped: its open operation is
        read as never completed, an ``info``."""
        with self._lock:
            self._closed = True


@dataclass
class Counters:
    """The next value of each key, handed out once."""

    next: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key: str) -> int:
        with self.lock:
            v = self.next.get(key, 1)
            self.next[key] = v + 1
            return v


class Workload:
    def __init__(self, cfg: WorkloadConfig, recorder: SafeRecorder, log: Callable[[str], None] = print) -> None:
        self.cfg = cfg
        self.rec = recorder
        self.log = log
        self.counters = Counters()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.clients = cfg.producers + cfg.txn_producers + cfg.consumers
        self.errors: list[str] = []

    def key(self, partition: int) -> str:
        return f"{self.cfg.topic}-{partition}"

    def start(self) -> None:
        n = 0
        for _ in range(self.cfg.producers):
            self._spawn(self._producer, n)
            n += 1
        for _ in range(self.cfg.txn_producers):
            self._spawn(self._txn_producer, n)
            n += 1
        for _ in range(self.cfg.consumers):
            self._spawn(self._consumer, n)
            n += 1

    def _spawn(self, fn: Callable[[int, random.Random], None], process: int) -> None:
        rnd = random.Random(self.cfg.seed * 1000 + process)

        def run() -> None:
            try:
                fn(process, rnd)
            except Exception as e:  # a client bug must not pass silently
                self.errors.append(f"client {process}: {type(e).__name__}: {e}")
                raise

        t = threading.Thread(target=run, name=f"verify-client-{process}", daemon=True)
        self.threads.append(t)
        t.start()

    def finish(self, timeout_s: float = 60.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))

    # ------------------------------------------------------------------ clients
    def _producer_conf(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.cfg.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 1, "message.timeout.ms": int(self.cfg.op_timeout_s * 1000),
            "request.timeout.ms": int(self.cfg.op_timeout_s * 1000 / 2), "retry.backoff.ms": 100,
            "socket.timeout.ms": 5000, "reconnect.backoff.max.ms": 1000, "logger": CLIENT_LOG, **extra,
        }

    def _producer(self, process: int, rnd: random.Random) -> None:
        from confluent_kafka import Producer

        p = Producer(self._producer_conf())
        while not self.stop.is_set():
            part = rnd.randrange(self.cfg.partitions)
            key = self.key(part)
            value = self.counters.take(key)
            self.rec.invoke(process, "send", [["send", key, value]])
            result: list[Any] = []

            def done(err: Any, msg: Any, box: list[Any] = result) -> None:
                box.append((err, msg))

            try:
                p.produce(self.cfg.topic, str(value).encode(), partition=part, on_delivery=done)
            except (BufferError, Exception) as e:  # refused locally: never written
                self.rec.complete(process, FAIL, "send", [["send", key, value]])
                self.log(f"producer {process}: produce refused: {e}")
                time.sleep(0.1)
                continue
            deadline = time.monotonic() + self.cfg.op_timeout_s + 5
            while not result and time.monotonic() < deadline:
                p.poll(0.05)
            if result and result[0][0] is None:
                self.rec.complete(process, OK, "send", [["send", key, [result[0][1].offset(), value]]])
                continue
            err = result[0][0] if result else None
            self.rec.complete(process, INFO, "send", [["send", key, value]])
            self.log(f"producer {process}: send of {key}={value} unknown ({err}); replacing the client")
            process += self.clients
            p.flush(1)
            p = Producer(self._producer_conf())

    def _txn_producer(self, process: int, rnd: random.Random) -> None:
        """Consume-then-produce transactions: a read_committed poll (from where this client's consumer
        stands: it starts at the end), then sends, then commit; the poll's records are part of the
        transaction's operation, so the checker sees read-from (wr) edges between transactions."""
        from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

        def make(proc: int) -> tuple[Any, Any]:
            p = Producer(self._producer_conf(**{"transactional.id": f"verify-{self.cfg.seed}-{proc}",
                                                "transaction.timeout.ms": 20000}))
            p.init_transactions(self.cfg.op_timeout_s * 3)
            c = Consumer({
                "bootstrap.servers": self.cfg.bootstrap, "group.id": f"verify-{self.cfg.seed}-txn-{proc}",
                "enable.auto.commit": False, "isolation.level": "read_committed", "socket.timeout.ms": 5000,
                "fetch.wait.max.ms": 50, "reconnect.backoff.max.ms": 1000, "logger": CLIENT_LOG,
            })
            keys = [self.key(q) for q in range(self.cfg.partitions)]
            self.rec.invoke(proc, "assign", keys)
            c.assign([TopicPartition(self.cfg.topic, q, OFFSET_END) for q in range(self.cfg.partitions)])
            self.rec.complete(proc, OK, "assign", keys)
            return p, c

        p: Any = None
        c: Any = None
        while not self.stop.is_set():
            if p is None:
                try:
                    p, c = make(process)
                except KafkaException as e:
                    self.log(f"txn producer {process}: init_transactions failed: {e}")
                    time.sleep(1)
                    continue
            n = rnd.randint(2, 4)
            parts = [rnd.randrange(self.cfg.partitions) for _ in range(n)]
            sends = [(self.key(pt), self.counters.take(self.key(pt)), pt) for pt in parts]
            abort = rnd.random() < 0.2
            self.rec.invoke(process, "txn", [["poll"]] + [["send", k, v] for k, v, _ in sends])
            offsets: dict[int, int] = {}
            read: dict[str, list[list[int]]] = {}
            try:
                for m in c.consume(num_messages=50, timeout=0.2):
                    if m.error() is None:
                        read.setdefault(self.key(m.partition()), []).append([m.offset(), int(m.value())])
                p.begin_transaction()
                for i, (_k, v, pt) in enumerate(sends):
                    def done(err: Any, msg: Any, i: int = i, offsets: dict[int, int] = offsets) -> None:
                        if err is None:
                            offsets[i] = msg.offset()

                    p.produce(self.cfg.topic, str(v).encode(), partition=pt, on_delivery=done)
                if abort:
                    # written first, so that the log holds the aborted records a consumer must skip
                    p.flush(self.cfg.op_timeout_s)
                    p.abort_transaction(self.cfg.op_timeout_s)
                    # as a consume-transform-produce application does: what the aborted transaction read
                    # is read again by the next one
                    for key, recs in read.items():
                        part = int(key.rsplit("-", 1)[1])
                        c.seek(TopicPartition(self.cfg.topic, part, recs[0][0]))
                    self.rec.complete(process, FAIL, "txn", [["poll"]] + [["send", k, v] for k, v, _ in sends])
                    continue
                p.commit_transaction(self.cfg.op_timeout_s)
            except KafkaException as e:
                err = e.args[0] if e.args else None
                self.rec.complete(process, INFO, "txn", [["poll"]] + [["send", k, v] for k, v, _ in sends])
                self.log(f"txn producer {process}: transaction unknown ({err}); replacing the client")
                process += self.clients
                c.close()
                p = c = None
                continue
            self.rec.complete(process, OK, "txn", [["poll", read]]
                              + [["send", k, [offsets.get(i), v]] for i, (k, v, _) in enumerate(sends)])
        if c is not None:
            c.close()

    def _consumer(self, process: int, rnd: random.Random) -> None:
        from confluent_kafka import Consumer, TopicPartition

        def make(proc: int) -> Any:
            c = Consumer({
                "bootstrap.servers": self.cfg.bootstrap, "group.id": f"verify-{self.cfg.seed}-{proc}",
                "enable.auto.commit": False, "isolation.level": "read_committed",
                "auto.offset.reset": "earliest", "socket.timeout.ms": 5000, "fetch.wait.max.ms": 100,
                "reconnect.backoff.max.ms": 1000, "logger": CLIENT_LOG,
            })
            self.rec.invoke(proc, "assign", [self.key(p) for p in range(self.cfg.partitions)])
            c.assign([TopicPartition(self.cfg.topic, p, 0) for p in range(self.cfg.partitions)])
            self.rec.complete(proc, OK, "assign", [self.key(p) for p in range(self.cfg.partitions)])
            return c

        c = make(process)
        idle_since: float | None = None
        while True:
            # once stopped, drain: read until nothing new for a few seconds, so that lost writes show
            if self.stop.is_set() and idle_since is not None and time.monotonic() - idle_since > 5:
                break
            self.rec.invoke(process, "poll", [["poll"]])
            try:
                msgs = c.consume(num_messages=200, timeout=0.5)
            except Exception as e:
                self.rec.complete(process, INFO, "poll", [["poll"]])
                self.log(f"consumer {process}: poll failed ({e}); replacing the client")
                c.close()
                process += self.clients
                c = make(process)
                continue
            got: dict[str, list[list[int]]] = {}
            for m in msgs:
                if m.error() is not None:
                    continue
                got.setdefault(self.key(m.partition()), []).append([m.offset(), int(m.value())])
            self.rec.complete(process, OK, "poll", [["poll", got]])
            if got:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
        c.close()
