"""Reading a partition's records for the console (what a Fetch would return, decoded).

:class:`LogRecordSource` reads this broker's replica of a partition up to its high watermark (a tiered partition
from its local log start offset: what the remote tier holds only is not browsed here),
after checking READ on the topic with the authorizer as Fetch does (Kafka's KafkaApis.handleFetchRequest).
Batches are decoded with odradek.protocol.records (any codec, inflated to a bounded size).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from odradek.log.manager import LogManager
from odradek.protocol import errors
from odradek.protocol.records import InvalidRecordError, Record, decode_records, iter_batches
from odradek.security.acl import AclOperation, ResourceType

MAX_READ_BYTES = 1024 * 1024


class BrowseError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class RecordSource(Protocol):
    def bounds(self, principal: str, host: str, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        ...

    def read(self, principal: str, host: str, topic: str, partition: int, offset: int,
             max_records: int) -> list[Record]: ...


Authorize = Callable[[str, str, AclOperation, ResourceType, str], bool]


class LogRecordSource:
    def __init__(self, logs: LogManager, authorize: Authorize) -> None:
        self._logs = logs
        self._authorize = authorize

    def _log(self, principal: str, host: str, topic: str, partition: int):  # type: ignore[no-untyped-def]
        if not self._authorize(principal, host, AclOperation.READ, ResourceType.TOPIC, topic):
            raise BrowseError(errors.TOPIC_AUTHORIZATION_FAILED, "Not authorized to read the topic")
        log = self._logs.get_log(topic, partition)
        if log is None:
            raise BrowseError(errors.NOT_LEADER_OR_FOLLOWER,
                              f"this broker holds no replica of {topic}-{partition}")
        return log

    def bounds(self, principal: str, host: str, topic: str, partition: int) -> tuple[int, int]:
        log = self._log(principal, host, topic, partition)
        return int(log.local_log_start_offset), int(log.high_watermark)  # a tiered log: its local part

    def read(self, principal: str, host: str, topic: str, partition: int, offset: int,
             max_records: int) -> list[Record]:
        log = self._log(principal, host, topic, partition)
        start, hw = int(log.local_log_start_offset), int(log.high_watermark)
        offset = min(max(offset, start), hw)
        out: list[Record] = []
        while offset < hw and len(out) < max_records:
            data = log.read(offset, MAX_READ_BYTES, hw, True)
            if not data.regions:
                break
            buf = b"".join(os.pread(r.file.fileno(), r.length, r.position) for r in data.regions)
            last = offset
            for pos, header in iter_batches(buf):
                if pos + header.size > len(buf):
                    break
                if header.is_control:
                    last = header.next_offset
                    continue
                try:
                    records = decode_records(memoryview(buf)[pos:pos + header.size])
                except InvalidRecordError as e:
                    raise BrowseError(errors.CORRUPT_MESSAGE, str(e)) from None
                out.extend(r for r in records if r.offset >= offset)
                last = header.next_offset
                if len(out) >= max_records:
                    break
            if last <= offset:
                break
            offset = last
        return out[:max_records]
