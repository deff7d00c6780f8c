"""The transaction requests one broker sends another in cluster mode, over the inter-broker
listener (one connection per broker, one request at a time on it):

- WriteTxnMarkers (v1), the send side of Kafka's TransactionMarkerChannelManager: the
  coordinator's markers for partitions led by other brokers (:meth:`TxnChannel.send`);
- AddPartitionsToTxn (v4) with VerifyOnly, Kafka's AddPartitionsToTxnManager (KIP-890 part 1):
  a partition leader asks the transactional id's coordinator on another broker whether the
  partitions are in the producer's transaction (:meth:`TxnChannel.verify`);
- AddPartitionsToTxn v5 without VerifyOnly (KIP-890 part 2, transaction.version 2): a partition
  leader adds the partition of a Produce v12 / TxnOffsetCommit v5 to the transaction
  (:meth:`TxnChannel.add_partitions`).

Both are asynchronous: ``then`` gets the error per partition from the peer's answer, or, when
the broker is unknown or the connection fails, NOT_LEADER_OR_FOLLOWER (markers: the coordinator
retries with the leaders of that moment) or NOT_COORDINATOR (verification: the producer retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from odradek.client.async_wire import AsyncWireClient, Connect, WireError
from odradek.protocol import errors
from odradek.protocol.framing import FrameError

log = logging.getLogger("odradek.txn")

TopicPartition = tuple[str, int]
Then = Callable[[dict[TopicPartition, int]], None]
WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION = 27, 1
ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION = 24, 4
ADD_PARTITIONS_TO_TXN_TV2_VERSION = 5
TIMEOUT_S = 30.0


def _by_topic(parts: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in parts:
        out.setdefault(topic, []).append(p)
    return out


class TxnChannel:
    def __init__(self, node_id: int, endpoint_of: Callable[[int], tuple[str, int] | None],
                 connect: Connect | None = None) -> None:
        self.node_id = node_id
        self.connect = connect  # the inter-broker listener's TLS / SASL
        self._endpoint_of = endpoint_of
        self._clients: dict[int, tuple[tuple[str, int], AsyncWireClient]] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def send(
        self,
        broker_id: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        then: Then,
    ) -> None:
        """WriteTxnMarkers to ``broker_id`` for ``partitions`` (it leads them)."""
        parts = list(partitions)
        fields = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": tuple(ps)} for t, ps in _by_topic(parts).items()],
        }]}

        def codes(resp: Any) -> dict[TopicPartition, int]:
            return {(t.name, int(p.partition_index)): int(p.error_code)
                    for marker in resp.markers for t in marker.topics for p in t.partitions}

        self._spawn(broker_id, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, fields, parts, codes,
                    errors.NOT_LEADER_OR_FOLLOWER, then)

    def verify(
        self,
        broker_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        then: Then,
    ) -> None:
        """AddPartitionsToTxn v4 VerifyOnly to the coordinator ``broker_id``."""
        self._add_partitions(broker_id, transactional_id, producer_id, producer_epoch, partitions, then, True)

    def add_partitions(
        self,
        broker_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        then: Then,
    ) -> None:
        """AddPartitionsToTxn v5 (not VerifyOnly) to the coordinator ``broker_id``: the partitions
        join the transaction (transaction.version 2)."""
        self._add_partitions(broker_id, transactional_id, producer_id, producer_epoch, partitions, then, False)

    def _add_partitions(self, broker_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: Iterable[TopicPartition], then: Then, verify_only: bool) -> None:
        parts = list(partitions)
        fields = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "verify_only": verify_only,
            "topics": [{"name": t, "partitions": tuple(ps)} for t, ps in _by_topic(parts).items()],
        }]}

        def codes(resp: Any) -> dict[TopicPartition, int]:
            top = int(resp.error_code)
            if top != errors.NONE:
                return dict.fromkeys(parts, top)
            return {(t.name, int(p.partition_index)): int(p.partition_error_code)
                    for txn in resp.results_by_transaction for t in txn.topic_results for p in t.results_by_partition}

        version = ADD_PARTITIONS_TO_TXN_VERSION if verify_only else ADD_PARTITIONS_TO_TXN_TV2_VERSION
        self._spawn(broker_id, ADD_PARTITIONS_TO_TXN, version, fields, parts, codes, errors.NOT_COORDINATOR, then)

    def _spawn(self, broker_id: int, api_key: int, version: int, fields: dict[str, Any], parts: list[TopicPartition],
               codes: Callable[[Any], dict[TopicPartition, int]], failure: int, then: Then) -> None:
        task = asyncio.ensure_future(self._request(broker_id, api_key, version, fields, parts, codes, failure, then))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, broker_id: int, api_key: int, version: int, fields: dict[str, Any],
                       parts: list[TopicPartition], codes: Callable[[Any], dict[TopicPartition, int]], failure: int,
                       then: Then) -> None:
        failed = dict.fromkeys(parts, failure)
        endpoint = self._endpoint_of(broker_id)
        if endpoint is None:
            then(failed)
            return
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            client = self._client(broker_id, endpoint)
            try:
                if not client.connected:
                    await client.connect()
                resp = await client.request(api_key, version, fields, TIMEOUT_S)
            except (TimeoutError, WireError, FrameError, OSError) as e:
                log.info("request %d to broker %d failed (%s)", api_key, broker_id, e)
                client.close()
                then(failed)
                return
        got = codes(resp)
        then({tp: got.get(tp, failure) for tp in parts})

    def _client(self, broker_id: int, endpoint: tuple[str, int]) -> AsyncWireClient:
        known = self._clients.get(broker_id)
        if known is not None and known[0] == endpoint:
            return known[1]
        if known is not None:
            known[1].close()
        client = AsyncWireClient(endpoint[0], endpoint[1], f"txn-{self.node_id}", TIMEOUT_S, self.connect)
        self._clients[broker_id] = (endpoint, client)
        return client

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for _, client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()
