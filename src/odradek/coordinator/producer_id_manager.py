"""Producer ids for InitProducerId (Kafka's ZooKeeper-mode ProducerIdManager): blocks of
PRODUCER_ID_BLOCK ids reserved in the metadata store, so ids are never reused across restarts
or handed out twice by two brokers.

Store layout: ``/latest_producer_id_block`` holds JSON
``{"version": 1, "broker": <id>, "block_start": "<first>", "block_end": "<last>"}`` (the ids as
strings, as Kafka writes them); a broker reserves the next block with a conditional write on the
znode's version and retries when another broker won the race.
"""

from __future__ import annotations

import json

from odradek.controller.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

PRODUCER_ID_BLOCK = 1000


class ProducerIdManager:
    """Hands out producer ids in blocks reserved in the store (/latest_producer_id_block,
    as Kafka's ZooKeeper mode does), so ids are never reused across restarts."""

    PATH = "/latest_producer_id_block"

    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self._next = 0
        self._end = 0

    def _reserve(self) -> None:
        for _ in range(100):  # brokers of a cluster race for blocks: conditional writes, retried
            try:
                data, version = self.store.get(self.PATH)
                last_end = int(json.loads(data)["block_end"]) if data else -1
            except NoNodeError:
                data, version, last_end = b"", -1, -1
            start = last_end + 1
            end = start + PRODUCER_ID_BLOCK - 1
            doc = json.dumps(
                {"version": 1, "broker": self.broker_id, "block_start": str(start), "block_end": str(end)}
            ).encode()
            try:
                if version < 0:
                    self.store.create(self.PATH, doc, makepath=True)
                else:
                    self.store.set(self.PATH, doc, version)
            except (BadVersionError, NodeExistsError):
                continue
            self._next, self._end = start, end
            return
        raise RuntimeError("could not reserve a producer id block")

    def next_id(self) -> int:
        if self._next > self._end or self._end == 0:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid
