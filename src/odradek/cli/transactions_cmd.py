"""``odradek transactions``: kafka-transactions.sh (KIP-664) through the broker's APIs.

    odradek transactions --bootstrap-server H:P list
    odradek transactions --bootstrap-server H:P describe --transactional-id ID
    odradek transactions --bootstrap-server H:P describe-producers --topic T --partition P
    odradek transactions --bootstrap-server H:P find-hanging --broker-id B [--max-transaction-timeout MIN]
    odradek transactions --bootstrap-server H:P abort --topic T --partition P --start-offset O
    odradek transactions --bootstrap-server H:P abort --topic T --partition P --producer-id I
        --producer-epoch E --coordinator-epoch C

``list`` asks every broker (ListTransactions), ``describe`` the transactional id's coordinator
(FindCoordinator key type 1, DescribeTransactions), ``describe-producers`` the partition's leader
(DescribeProducers). ``find-hanging`` looks, among the partitions a broker leads, for open
transactions older than ``--max-transaction-timeout`` minutes (default 15, Kafka's
transaction.max.timeout.ms) whose producer no coordinator lists as Ongoing with that partition:
data no coordinator will ever end, holding read_committed consumers at the last stable offset.
``abort`` ends such a transaction as Kafka's admin client does (KIP-664): the producer is the
partition's active producer whose transaction starts at ``--start-offset`` (DescribeProducers on
the leader) or the one given by id and epochs, and WriteTxnMarkers with an ABORT marker for it goes
to the partition's leader (the broker accepts ABORT markers from clients, as Kafka does with no
authorizer; see server.cluster_access.may_write_txn_marker).
Output: Kafka's tool's tab-separated columns.

DescribeTransactions is decoded here by hand: its start time is -1 for an id with no transaction
open, which kio's reader refuses. Layout (v0, flexible)::

    throttle_time_ms int32
    transaction_states compact array of
        error_code int16, transactional_id compact string, transaction_state compact string,
        transaction_timeout_ms int32, transaction_start_time_ms int64, producer_id int64,
        producer_epoch int16,
        topics compact array of (topic compact string, partitions compact array of int32, tags)
        tags
    tags
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from odradek.client import framer
from odradek.protocol.varint import encode_uvarint, read_uvarint

DESCRIBE_TRANSACTIONS = 65
ONGOING = "Ongoing"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("transactions", help="list, describe and find hanging transactions (kafka-transactions.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    p.add_argument("--command-timeout", type=float, default=30.0)
    cmds = p.add_subparsers(dest="txn_command", required=True)
    cmds.add_parser("list", help="the transactional ids every coordinator knows")
    d = cmds.add_parser("describe", help="the state of one transactional id")
    d.add_argument("--transactional-id", required=True)
    dp = cmds.add_parser("describe-producers", help="the active producers of a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", required=True, type=int)
    fh = cmds.add_parser("find-hanging", help="open transactions no coordinator knows, on one broker's partitions")
    fh.add_argument("--broker-id", required=True, type=int)
    fh.add_argument("--max-transaction-timeout", type=float, default=15.0, metavar="MINUTES")
    ab = cmds.add_parser("abort", help="abort a hanging transaction on one partition")
    ab.add_argument("--topic", required=True)
    ab.add_argument("--partition", required=True, type=int)
    ab.add_argument("--start-offset", type=int, help="the first offset of the transaction (find-hanging's StartOffset)")
    ab.add_argument("--producer-id", type=int)
    ab.add_argument("--producer-epoch", type=int)
    ab.add_argument("--coordinator-epoch", type=int)
    p.set_defaults(func=run)


@dataclass
class Described:
    error_code: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]] = field(default_factory=list)


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def fixed(self, fmt: str) -> int:
        s = struct.Struct(fmt)
        try:
            (v,) = s.unpack_from(self.data, self.pos)
        except struct.error as e:
            raise ValueError(f"truncated response: {e}") from None
        self.pos += s.size
        return int(v)

    def uvarint(self) -> int:
        v, self.pos = read_uvarint(self.data, self.pos, len(self.data))
        return int(v)

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            return ""
        if self.pos + n > len(self.data):
            raise ValueError("string runs past the response")
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def count(self) -> int:
        n = self.uvarint() - 1
        if n > len(self.data):
            raise ValueError(f"array count {n} exceeds the response")
        return max(n, 0)

    def tags(self) -> None:
        n = self.uvarint()  # a plain count (no +1)
        if n > len(self.data):
            raise ValueError(f"tagged field count {n} exceeds the response")
        for _ in range(n):
            self.uvarint()
            self.pos += self.uvarint()


def decode_describe_transactions(body: bytes, pos: int = 0) -> list[Described]:
    """A DescribeTransactions v0 response body (see the module docstring)."""
    r = _Reader(body, pos)
    r.fixed(">i")  # throttle
    out: list[Described] = []
    for _ in range(r.count()):
        d = Described(r.fixed(">h"), r.string(), r.string(), r.fixed(">i"), r.fixed(">q"), r.fixed(">q"),
                      r.fixed(">h"))
        for _ in range(r.count()):
            topic = r.string()
            d.partitions += [(topic, r.fixed(">i")) for _ in range(r.count())]
            r.tags()
        r.tags()
        out.append(d)
    return out


def _describe_raw(args: argparse.Namespace, host: str, port: int, transactional_ids: list[str]) -> list[Described]:
    body = bytearray(encode_uvarint(len(transactional_ids) + 1))
    for tid in transactional_ids:
        raw = tid.encode()
        body += encode_uvarint(len(raw) + 1) + raw
    body += b"\x00"  # no tagged fields
    with _wire((host, port), args) as w:  # TLS and SASL done; the request is written by hand
        w.sock.sendall(framer.encode_request(DESCRIBE_TRANSACTIONS, 0, 1, "odradek-cli", bytes(body),
                                             flexible_header=True))
        data, offset = framer.recv_response(w.sock, 1, True)
    return decode_describe_transactions(bytes(data), offset)


def _table(header: list[str], rows: list[list[object]]) -> None:
    print("\t".join(header))
    for row in rows:
        print("\t".join(str(c) for c in row))


def _brokers_and_leaders(args: argparse.Namespace) -> tuple[dict[int, tuple[str, int]], dict[tuple[str, int], int]]:
    from confluent_kafka.admin import AdminClient

    from odradek.client.command_config import admin_config

    admin = AdminClient({**admin_config(args.bootstrap_server, args.command_config),
                         "socket.timeout.ms": int(args.command_timeout * 1000)})
    md = admin.list_topics(timeout=args.command_timeout)
    brokers = {int(b.id): (str(b.host), int(b.port)) for b in md.brokers.values()}
    leaders = {(str(t.topic), int(p.id)): int(p.leader) for t in md.topics.values() for p in t.partitions.values()}
    return brokers, leaders


def _wire(endpoint: tuple[str, int], args: argparse.Namespace) -> Any:
    """A blocking client of one broker, with ``--command-config``'s TLS and SASL."""
    from odradek.client.command_config import client_security
    from odradek.client.wire import WireClient

    return WireClient(f"{endpoint[0]}:{endpoint[1]}", timeout=args.command_timeout,
                      security=client_security(args.command_config))


def _list(args: argparse.Namespace, brokers: dict[int, tuple[str, int]]) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator, producer id, state) from every broker."""
    out = []
    for bid, ep in sorted(brokers.items()):
        with _wire(ep, args) as w:
            r = w.request(66, 0, state_filters=(), producer_id_filters=())
        if int(r.error_code):
            raise RuntimeError(f"ListTransactions on broker {bid} failed with error {int(r.error_code)}")
        out += [(t.transactional_id, bid, int(t.producer_id), t.transaction_state) for t in r.transaction_states]
    return sorted(out)


def _coordinator(args: argparse.Namespace, tid: str) -> tuple[int, str, int]:
    with _wire(_first(args.bootstrap_server), args) as w:
        for _ in range(20):
            r = w.request(10, 3, key=tid, key_type=1)
            if int(r.error_code) not in (14, 15):
                break
            time.sleep(0.2)
    if int(r.error_code):
        raise RuntimeError(f"FindCoordinator for {tid!r} failed with error {int(r.error_code)}")
    return int(r.node_id), str(r.host), int(r.port)


def _first(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


def _producers(args: argparse.Namespace, endpoint: tuple[str, int], parts: list[tuple[str, int]]) -> dict[Any, Any]:
    from kio.schema.describe_producers.v0 import request as dp

    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    topic_cls: Any = dp.TopicRequest
    with _wire(endpoint, args) as w:
        r = w.request(61, 0, topics=tuple(topic_cls(name=t, partition_indexes=tuple(ps))
                                          for t, ps in by_topic.items()))
    return {(t.name, int(p.partition_index)): p for t in r.topics for p in t.partitions}


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.txn_command == "describe":
        node, host, port = _coordinator(args, args.transactional_id)
        (d,) = _describe_raw(args, host, port, [args.transactional_id])
        if d.error_code:
            raise RuntimeError(f"DescribeTransactions for {d.transactional_id!r} failed with error {d.error_code}")
        now = int(time.time() * 1000)
        duration = now - d.start_time_ms if d.start_time_ms >= 0 else "None"
        _table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
               [[node, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
                 d.start_time_ms if d.start_time_ms >= 0 else "None", duration,
                 ",".join(f"{t}-{p}" for t, p in d.partitions)]])
        return 0
    brokers, leaders = _brokers_and_leaders(args)
    if args.txn_command == "list":
        _table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
               [list(row) for row in _list(args, brokers)])
        return 0
    if args.txn_command == "describe-producers":
        tp = (args.topic, args.partition)
        leader = leaders.get(tp)
        if leader is None or leader not in brokers:
            raise RuntimeError(f"no leader known for {args.topic}-{args.partition}")
        pr = _producers(args, brokers[leader], [tp])[tp]
        if int(pr.error_code):
            raise RuntimeError(f"DescribeProducers for {args.topic}-{args.partition} failed with error "
                               f"{int(pr.error_code)}")
        _table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                "CurrentTransactionStartOffset"],
               [[int(s.producer_id), int(s.producer_epoch), int(s.coordinator_epoch), int(s.last_sequence),
                 int(s.last_timestamp), int(s.current_txn_start_offset) if int(s.current_txn_start_offset) >= 0
                 else "None"] for s in pr.active_producers])
        return 0
    if args.txn_command == "abort":
        return _abort(args, brokers, leaders)
    # find-hanging
    if args.broker_id not in brokers:
        raise RuntimeError(f"broker {args.broker_id} is not in the cluster")
    parts = sorted(tp for tp, leader in leaders.items() if leader == args.broker_id)
    found = _producers(args, brokers[args.broker_id], parts) if parts else {}
    ongoing: dict[int, list[str]] = {}
    for tid, _, pid, state in _list(args, brokers):
        if state == ONGOING:
            ongoing.setdefault(pid, []).append(tid)
    known: set[tuple[int, str, int]] = set()
    for tids in ongoing.values():
        for tid in tids:
            _, host, port = _coordinator(args, tid)
            for d in _describe_raw(args, host, port, [tid]):
                known.update((d.producer_id, t, p) for t, p in d.partitions)
    now = int(time.time() * 1000)
    rows: list[list[object]] = []
    for (topic, p), pr in sorted(found.items()):
        for s in pr.active_producers:
            start = int(s.current_txn_start_offset)
            if start < 0 or (int(s.producer_id), topic, p) in known:
                continue
            age_min = (now - int(s.last_timestamp)) / 60000 if int(s.last_timestamp) >= 0 else float("inf")
            if age_min < args.max_transaction_timeout:
                continue
            rows.append([topic, p, int(s.producer_id), int(s.producer_epoch), int(s.coordinator_epoch), start,
                         int(s.last_timestamp), round(age_min, 1) if age_min != float("inf") else "None"])
    _table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
            "LastTimestamp", "Duration(min)"], rows)
    return 0


def _abort(args: argparse.Namespace, brokers: dict[int, tuple[str, int]],
           leaders: dict[tuple[str, int], int]) -> int:
    """kafka-transactions.sh abort: an ABORT marker for the producer to the partition's leader."""
    from kio.schema.write_txn_markers.v1 import request as wtm

    tp = (args.topic, args.partition)
    leader = leaders.get(tp)
    if leader is None or leader not in brokers:
        raise RuntimeError(f"no leader known for {args.topic}-{args.partition}")
    by_id = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is not None:
        if any(v is not None for v in by_id):
            raise ValueError("give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch")
        pr = _producers(args, brokers[leader], [tp])[tp]
        if int(pr.error_code):
            raise RuntimeError(f"DescribeProducers for {args.topic}-{args.partition} failed with error "
                               f"{int(pr.error_code)}")
        found = [s for s in pr.active_producers if int(s.current_txn_start_offset) == args.start_offset]
        if not found:
            raise RuntimeError(f"no open transaction starts at offset {args.start_offset} in "
                               f"{args.topic}-{args.partition}")
        s = found[0]
        pid, epoch, coord_epoch = int(s.producer_id), int(s.producer_epoch), max(0, int(s.coordinator_epoch))
    elif all(v is not None for v in by_id):
        pid, epoch, coord_epoch = by_id
    else:
        raise ValueError("abort needs --start-offset, or all of --producer-id, --producer-epoch and "
                         "--coordinator-epoch")
    marker_cls: Any = wtm.WritableTxnMarker
    topic_cls: Any = wtm.WritableTxnMarkerTopic
    marker = marker_cls(producer_id=pid, producer_epoch=epoch, transaction_result=False,
                        topics=(topic_cls(name=args.topic, partition_indexes=(args.partition,)),),
                        coordinator_epoch=coord_epoch)
    with _wire(brokers[leader], args) as w:
        r = w.request(27, 1, markers=(marker,))
    codes = [int(p.error_code) for m in r.markers for t in m.topics for p in t.partitions]
    bad = [c for c in codes if c]
    if bad or not codes:
        raise RuntimeError(f"WriteTxnMarkers (abort of producer {pid}, epoch {epoch}) on {args.topic}-"
                           f"{args.partition} failed with error {bad[0] if bad else 'no answer'}")
    print(f"Aborted the transaction of producer {pid} (epoch {epoch}, coordinator epoch {coord_epoch}) "
          f"on {args.topic}-{args.partition}")
    return 0
