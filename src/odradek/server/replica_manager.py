"""ReplicaManager: appends to and reads from the partitions this broker leads, and
parks fetches that wait for data (Kafka's DelayedFetch purgatory).

Single-node: this broker is the only replica, so the high watermark follows the log
end offset on every append. Waiting fetches are woken the moment data lands on any
partition they read (notes/protocol.md: a late wake-up spreads e2e latency over the
whole max_wait).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.log.errors import OffsetOutOfRangeError, ProducerStateError
from odradek.protocol import errors
from odradek.protocol.records import InvalidRecordError, validate_batches

if TYPE_CHECKING:
    from odradek.log.log import Log
    from odradek.server.broker import Broker

log = logging.getLogger("odradek.replica")

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class AppendResult:
    error_code: int = errors.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class DelayedFetch:
    """A fetch parked until enough bytes arrive or ``max_wait`` passes."""

    __slots__ = ("future", "partitions", "attempt", "timer", "manager")

    def __init__(
        self,
        manager: ReplicaManager,
        partitions: list[TopicPartition],
        attempt: Callable[[bool], Any],
        max_wait_ms: int,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.manager = manager
        self.future: asyncio.Future[Any] = loop.create_future()
        self.partitions = partitions
        self.attempt = attempt  # attempt(force) -> response or None (not enough data yet)
        self.timer = loop.call_later(max_wait_ms / 1000.0, self.on_timeout)
        for tp in partitions:
            manager.waiters.setdefault(tp, set()).add(self)

    def _finish(self, response: Any) -> None:
        self.timer.cancel()
        for tp in self.partitions:
            ws = self.manager.waiters.get(tp)
            if ws is not None:
                ws.discard(self)
                if not ws:
                    del self.manager.waiters[tp]
        if not self.future.done():
            self.future.set_result(response)

    def on_timeout(self) -> None:
        try:
            self._finish(self.attempt(True))
        except Exception as e:  # never leave a connection hanging
            self.timer.cancel()
            if not self.future.done():
                self.future.set_exception(e)

    def on_data(self) -> None:
        if self.future.done():
            return
        try:
            response = self.attempt(False)
        except Exception as e:
            self.timer.cancel()
            if not self.future.done():
                self.future.set_exception(e)
            return
        if response is not None:
            self._finish(response)

    def cancel(self) -> None:
        self._finish(None)


class ReplicaManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.waiters: dict[TopicPartition, set[DelayedFetch]] = {}
        self._wake_scheduled: set[TopicPartition] = set()

    # -- lookup
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.broker.log_manager.get_log(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        meta = self.broker.topics.get(topic)
        if meta is None or partition >= len(meta.partitions):
            return -1
        return meta.partitions[partition].leader_epoch

    # -- produce
    def append(self, topic: str, partition: int, records: bytes | None, now_ms: int) -> AppendResult:
        meta = self.broker.topics.get(topic)
        if meta is None or not 0 <= partition < len(meta.partitions):
            return AppendResult(errors.UNKNOWN_TOPIC_OR_PARTITION)
        plog = self.get_log(topic, partition)
        if plog is None:
            return AppendResult(errors.NOT_LEADER_OR_FOLLOWER)
        if not records:
            return AppendResult(errors.CORRUPT_MESSAGE, error_message="empty records")
        try:
            headers = validate_batches(
                records,
                max_batch_bytes=plog.config.max_message_bytes,
                check_records=self.broker.validate_records,
            )
            for h in headers:
                if h.is_transactional or h.is_control:
                    return AppendResult(
                        errors.INVALID_TXN_STATE,
                        error_message="transactional produce is not supported by this broker yet",
                    )
            info = plog.append_as_leader(records, headers, meta.partitions[partition].leader_epoch, now_ms)
        except InvalidRecordError as e:
            log.info("rejected produce to %s-%d: %s", topic, partition, e.message)
            return AppendResult(e.error_code, error_message=e.message, log_start_offset=plog.log_start_offset)
        except ProducerStateError as e:
            return AppendResult(e.error_code, error_message=str(e), log_start_offset=plog.log_start_offset)
        if not info.duplicate:
            # single replica: the high watermark follows the log end offset
            plog.update_high_watermark(plog.log_end_offset)
            self.notify(topic, partition)
        return AppendResult(errors.NONE, info.first_offset, info.log_append_time, plog.log_start_offset)

    def notify(self, topic: str, partition: int) -> None:
        """Wake fetches waiting on this partition (after the current request batch)."""
        tp = (topic, partition)
        if tp in self.waiters and tp not in self._wake_scheduled:
            self._wake_scheduled.add(tp)
            asyncio.get_running_loop().call_soon(self._wake, tp)

    def _wake(self, tp: TopicPartition) -> None:
        self._wake_scheduled.discard(tp)
        for w in list(self.waiters.get(tp, ())):
            w.on_data()

    # -- fetch
    def read(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        max_bytes: int,
        read_committed: bool,
        min_one_message: bool,
    ) -> tuple[int, Log | None, Any]:
        """(error code, log, FetchData | None)."""
        plog = self.get_log(topic, partition)
        if plog is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, None, None
        max_offset = plog.high_watermark  # no transactions yet: LSO == HW
        try:
            data = plog.read(fetch_offset, max_bytes, max_offset, min_one_message)
        except OffsetOutOfRangeError:
            return errors.OFFSET_OUT_OF_RANGE, plog, None
        return errors.NONE, plog, data

    def cancel_waiters(self) -> None:
        for ws in list(self.waiters.values()):
            for w in list(ws):
                w.cancel()
        self.waiters.clear()
