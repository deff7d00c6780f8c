"""Reading a coordinator's partition back at load time (Kafka's CoordinatorLoaderImpl): every batch of
``__consumer_offsets`` or ``__transaction_state`` from the log start offset to the log end offset, in
1 MiB reads, for the group and transaction runtimes to replay.

A read starts at a batch boundary, so the first batch may hold records below the log start offset
(after DeleteRecords): each batch comes with the first offset still wanted from it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from odradek.protocol.records import BatchHeader, InvalidRecordError, Record, decode_records, iter_batches

if TYPE_CHECKING:
    from odradek.log.log import Log

log = logging.getLogger("odradek.coordinator")

READ_BYTES = 1 << 20


def load_batches(plog: Log) -> Iterator[tuple[BatchHeader, memoryview, int]]:
    """``(header, the batch's bytes, first offset wanted)`` for every batch of ``plog`` up to its log
    end offset; stops early at a read that yields no complete batch."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        data = plog.read(offset, READ_BYTES, end, True)
        if not data.size:
            return
        chunk = bytearray()
        for region in data.regions:
            chunk += os.pread(region.file.fileno(), region.length, region.position)
        view = memoryview(chunk)
        progressed = False
        for pos, h in iter_batches(chunk):
            yield h, view[pos : pos + h.size], offset
            offset = h.next_offset
            progressed = True
        if not progressed:
            return


def decode_or_skip(batch: memoryview, h: BatchHeader, limit: int, plog: Log, what: str) -> list[Record]:
    """The records of a data batch, inflated with the bound ``limit``; a batch that does not decode (a
    decompression bomb, a corrupt batch) is logged and skipped rather than failing the load."""
    try:
        return decode_records(batch, limit)
    except InvalidRecordError as e:
        log.error("skipping the batch at offset %d of %s-%d while loading %s: %s",
                  h.base_offset, plog.topic, plog.partition, what, e.message)
        return []
