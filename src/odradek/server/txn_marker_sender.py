"""The send side of Kafka's TransactionMarkerChannelManager: in cluster mode, the transaction
coordinator's markers for partitions led by other brokers go to those leaders as
WriteTxnMarkers (v1) over the inter-broker listener, one connection per broker, one request at
a time on it.

:meth:`TxnMarkerSender.send` is asynchronous: ``then`` gets the error per partition from the
leader's answer, or NOT_LEADER_OR_FOLLOWER for every partition when the broker is unknown or
the connection fails (the coordinator then retries after its backoff, with the leaders of that
moment, as Kafka's channel manager requeues markers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from odradek.client.async_wire import AsyncWireClient, WireError
from odradek.protocol import errors
from odradek.protocol.framing import FrameError

log = logging.getLogger("odradek.txn")

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS, VERSION = 27, 1
TIMEOUT_S = 30.0


class TxnMarkerSender:
    def __init__(self, node_id: int, endpoint_of: Callable[[int], tuple[str, int] | None]) -> None:
        self.node_id = node_id
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
        then: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        parts = list(partitions)
        task = asyncio.ensure_future(
            self._send(broker_id, producer_id, producer_epoch, coordinator_epoch, commit, parts, then))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, broker_id: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                    commit: bool, parts: list[TopicPartition],
                    then: Callable[[dict[TopicPartition, int]], None]) -> None:
        failed = dict.fromkeys(parts, errors.NOT_LEADER_OR_FOLLOWER)
        endpoint = self._endpoint_of(broker_id)
        if endpoint is None:
            then(failed)
            return
        by_topic: dict[str, list[int]] = {}
        for topic, p in parts:
            by_topic.setdefault(topic, []).append(p)
        fields = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": tuple(ps)} for t, ps in by_topic.items()],
        }]}
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            client = self._client(broker_id, endpoint)
            try:
                if not client.connected:
                    await client.connect()
                resp = await client.request(WRITE_TXN_MARKERS, VERSION, fields, TIMEOUT_S)
            except (TimeoutError, WireError, FrameError, OSError) as e:
                log.info("WriteTxnMarkers to broker %d failed (%s); the coordinator retries", broker_id, e)
                client.close()
                then(failed)
                return
        codes: dict[TopicPartition, int] = {}
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    codes[(t.name, int(p.partition_index))] = int(p.error_code)
        then({tp: codes.get(tp, errors.NOT_LEADER_OR_FOLLOWER) for tp in parts})

    def _client(self, broker_id: int, endpoint: tuple[str, int]) -> AsyncWireClient:
        known = self._clients.get(broker_id)
        if known is not None and known[0] == endpoint:
            return known[1]
        if known is not None:
            known[1].close()
        client = AsyncWireClient(endpoint[0], endpoint[1], f"txn-markers-{self.node_id}", TIMEOUT_S)
        self._clients[broker_id] = (endpoint, client)
        return client

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for _, client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()
