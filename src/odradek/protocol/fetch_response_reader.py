"""A FetchResponse v12 read without copying record data: what a follower's replica fetcher
receives from its leader (Kafka's ReplicaFetcherThread reads the same response into
MemoryRecords slices of the network buffer). Each partition's records are a ``memoryview``
slice of the response frame, appended to the log from there (one write per partition).

Body layout (after the response header v1), FetchResponse v12 (flexible, KIP-482)::

    throttle_time_ms          int32
    error_code                int16
    session_id                int32
    responses                 compact array (uvarint count+1)
      topic                   compact string (uvarint len+1, UTF-8)
      partitions              compact array
        partition_index       int32
        error_code            int16
        high_watermark        int64
        last_stable_offset    int64
        log_start_offset      int64
        aborted_transactions  compact nullable array of
          producer_id         int64
          first_offset        int64
          tagged fields
        preferred_read_replica int32
        records               compact nullable bytes (uvarint len+1; 0 = null)
        tagged fields         (diverging_epoch = 0, current_leader = 1, snapshot_id = 2: skipped)
      tagged fields
    tagged fields

Anything that runs past the frame, or a count larger than the bytes left could hold, raises
:class:`FetchResponseError` (the caller drops the connection); nothing is allocated from a
count before it is checked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol.varint import VarintError, read_uvarint, skip_tagged_fields

VERSION = 12

_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PART = struct.Struct(">ihqqq")  # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
_I32 = struct.Struct(">i")
_ABORTED_MIN = 17  # producer_id, first_offset, empty tagged fields
_ABORTED = struct.Struct(">qq")


class FetchResponseError(ValueError):
    """The response does not parse as FetchResponse v12."""


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None  # a slice of the response frame, not a copy
    aborted_transactions: list[tuple[int, int]] | None = None


@dataclass(slots=True)
class FetchedTopic:
    topic: str
    partitions: list[FetchedPartition] = field(default_factory=list)


@dataclass(slots=True)
class FetchResponseView:
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchedTopic]


def read_fetch_response(frame: bytes | bytearray | memoryview, offset: int) -> FetchResponseView:
    """Parse the body of a FetchResponse v12 that starts at ``offset`` of ``frame``."""
    buf = memoryview(frame)
    end = len(buf)
    scanner = FetchResponseScanner(end - offset)
    topics: list[FetchedTopic] = []
    pos = offset
    while True:
        pos, part = scanner.scan(buf, pos, end)
        if scanner.topic_started:
            topics.append(FetchedTopic(scanner.topic))
        if part is not None:
            n = scanner.records_length
            if n >= 0:
                part.records = buf[pos : pos + n]
                pos += n
            scanner.records_consumed()
            topics[-1].partitions.append(part)
        elif scanner.done:
            return FetchResponseView(scanner.throttle_time_ms, scanner.error_code, scanner.session_id, topics)


class _Short(Exception):
    """An item runs past the bytes at hand (more are on their way, or the response is truncated);
    ``upto``: the position the item reaches at least, as far as is known."""

    def __init__(self, upto: int) -> None:
        super().__init__("truncated")
        self.upto = upto


_S_HEADER, _S_HEAD, _S_TOPIC, _S_PART, _S_PART_TAIL, _S_TOPIC_TAIL, _S_TAIL, _S_DONE = range(8)
_MIN_NEED = (5, 11, 3, 36, 1, 1, 1, 0)  # the fewest bytes each item can take
# the bytes first asked for each item: a partition's fields up to a 3-byte records length (records of
# 16 KB to 2 MB, all that is spliced, are read with one read; smaller ones take 1-2 bytes of them along)
_FIRST_READ = (5, 11, 3, 38, 1, 1, 1, 0)
_SHORTS_BEFORE_DOUBLING = 6  # a varint is at most 5 bytes: an honest item is never short this often


class FetchResponseScanner:
    """The structure of one FetchResponse v12, read item by item from whatever part of it is at
    hand, with the records left to the caller (sans I/O): the follower's streaming reader
    (:mod:`odradek.replication.splice_fetch`) moves each partition's records from the socket into
    its segment file without reading them into Python, and :func:`read_fetch_response` slices
    them from a whole frame.

    :meth:`scan` reads items from ``buf[pos:end]`` (the bytes of the response that follow
    everything consumed so far) until it reaches a partition's records, the end of the response,
    or the end of the bytes at hand; it returns the position after what it read and the
    partition whose records come next (``records_length`` bytes, -1 for null), which the caller
    consumes before it calls :meth:`records_consumed` and :meth:`scan` again. ``need`` is then the
    fewest bytes the next item takes. ``size`` is what is left of the frame, so a response cut
    short, or a count that the bytes left could not hold, raises :class:`FetchResponseError`
    without waiting for bytes that will never come. With ``correlation_id`` the response header
    v1 (correlation id, tagged fields) is read and checked first.
    """

    def __init__(self, size: int, correlation_id: int | None = None) -> None:
        self.left = size  # bytes of the frame not consumed yet
        self.correlation_id = correlation_id
        self._stage = _S_HEAD if correlation_id is None else _S_HEADER
        self.need = _FIRST_READ[self._stage]
        self.throttle_time_ms = self.error_code = self.session_id = 0
        self._topics_left = self._parts_left = 0
        self.topic = ""
        self.topic_started = False  # the last scan read a topic's name (at most one per scan)
        self.records_length = -1
        self._item_start = 0
        self._shorts = 0  # times the item being read was found short

    @property
    def done(self) -> bool:
        return self._stage == _S_DONE

    @property
    def head_read(self) -> bool:
        """throttle_time_ms, error_code and session_id are known."""
        return self._stage > _S_HEAD

    def records_consumed(self) -> None:
        """The caller has consumed the records of the partition :meth:`scan` returned."""
        if self.records_length > 0:
            self.left -= self.records_length
        self.records_length = -1
        self._stage = _S_PART_TAIL
        self.need = _FIRST_READ[_S_PART_TAIL]

    def scan(self, buf: memoryview, pos: int, end: int) -> tuple[int, FetchedPartition | None]:
        self.topic_started = False
        if end - pos > self.left:
            end = pos + self.left
        while self._stage != _S_DONE:
            start = self._item_start = pos
            try:
                pos, part = self._item(buf, pos, end)
            except (_Short, VarintError, struct.error) as e:
                have = end - start
                if have >= self.left:
                    raise FetchResponseError(f"undecodable FetchResponse v{VERSION}: {e or 'truncated'}") from None
                # the bytes the item is known to need (a varint cut short: one more); an item still short
                # after a few tries asks for twice what it has, so a long item whose size is learnt piece
                # by piece (many aborted transactions with tagged fields) is parsed again a logarithmic
                # number of times, not once per piece
                upto = e.upto if isinstance(e, (_Short, VarintError)) else -1
                hint = upto - start if upto >= 0 else have + 1
                self._shorts += 1
                if self._shorts > _SHORTS_BEFORE_DOUBLING:
                    hint = max(hint, 2 * have)
                self.need = min(max(_FIRST_READ[self._stage], hint), self.left)
                return start, None
            except UnicodeDecodeError as e:
                raise FetchResponseError(f"undecodable FetchResponse v{VERSION}: {e}") from None
            self.left -= pos - start
            self.need = _FIRST_READ[self._stage]
            self._shorts = 0
            if part is not None or self.topic_started:
                return pos, part
        return pos, None

    def _item(self, buf: memoryview, pos: int, end: int) -> tuple[int, FetchedPartition | None]:
        stage = self._stage
        if stage == _S_PART:
            return self._partition(buf, pos, end)
        if stage == _S_PART_TAIL:
            pos = skip_tagged_fields(buf, pos, end)
            self._parts_left -= 1
            self._stage = _S_PART if self._parts_left > 0 else _S_TOPIC_TAIL
        elif stage == _S_TOPIC_TAIL:
            pos = skip_tagged_fields(buf, pos, end)
            self._topics_left -= 1
            self._stage = _S_TOPIC if self._topics_left > 0 else _S_TAIL
        elif stage == _S_TOPIC:
            name_len, pos = read_uvarint(buf, pos, end)
            if name_len == 0:
                raise FetchResponseError("null topic name")
            if pos + name_len - 1 > end:
                raise _Short(pos + name_len)
            name = str(buf[pos : pos + name_len - 1], "utf-8")
            pos += name_len - 1
            n_parts, pos = read_uvarint(buf, pos, end)
            n_parts = max(n_parts - 1, 0)
            self._check_count(n_parts, _MIN_NEED[_S_PART], pos, "partitions")
            self.topic, self.topic_started, self._parts_left = name, True, n_parts
            self._stage = _S_PART if n_parts > 0 else _S_TOPIC_TAIL
        elif stage == _S_HEAD:
            if pos + _HEAD.size > end:
                raise _Short(pos + _HEAD.size + 1)
            self.throttle_time_ms, self.error_code, self.session_id = _HEAD.unpack_from(buf, pos)
            pos += _HEAD.size
            n_topics, pos = read_uvarint(buf, pos, end)
            n_topics = max(n_topics - 1, 0)
            self._check_count(n_topics, _MIN_NEED[_S_TOPIC], pos, "topics")
            self._topics_left = n_topics
            self._stage = _S_TOPIC if n_topics > 0 else _S_TAIL
        elif stage == _S_TAIL:
            pos = skip_tagged_fields(buf, pos, end)
            self._stage = _S_DONE
        else:  # _S_HEADER
            if pos + 4 > end:
                raise _Short(pos + 5)
            if _I32.unpack_from(buf, pos)[0] != self.correlation_id:
                raise FetchResponseError("correlation id mismatch")
            pos = skip_tagged_fields(buf, pos + 4, end)
            self._stage = _S_HEAD
        return pos, None

    def _check_count(self, n: int, each: int, pos: int, what: str) -> None:
        """A count the rest of the frame could not hold is refused before anything is made of it
        (``left`` counts from the start of the item being read)."""
        rest = self.left - (pos - self._item_start)
        if n * each > rest:
            raise FetchResponseError(f"{n} {what} in {rest} bytes")

    def _partition(self, buf: memoryview, pos: int, end: int) -> tuple[int, FetchedPartition]:
        if pos + _PART.size > end:
            raise _Short(pos + _FIRST_READ[_S_PART])
        index, code, hw, lso, lstart = _PART.unpack_from(buf, pos)
        pos += _PART.size
        n_aborted, pos = read_uvarint(buf, pos, end)
        aborted: list[tuple[int, int]] | None = None
        if n_aborted > 0:
            n_aborted -= 1
            self._check_count(n_aborted, _ABORTED_MIN, pos, "aborted transactions")
            aborted = []
            for i in range(n_aborted):
                if pos + 16 > end:
                    raise _Short(pos + (n_aborted - i) * _ABORTED_MIN + 5)
                pid, first = _ABORTED.unpack_from(buf, pos)
                pos = skip_tagged_fields(buf, pos + 16, end)
                aborted.append((pid, first))
        if pos + 4 > end:
            raise _Short(pos + 5)
        pos += 4  # preferred_read_replica
        rec_len, pos = read_uvarint(buf, pos, end)
        n = rec_len - 1
        self.records_length = n
        if n > 0:
            self._check_count(n, 1, pos, "bytes of records")
        return pos, FetchedPartition(index, code, hw, lso, lstart, None, aborted)
