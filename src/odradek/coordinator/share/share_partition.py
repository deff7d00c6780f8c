"""One share-partition of a share group (KIP-932): Kafka's ``SharePartition``, pure, with an injected clock.

A share group reads a partition with many consumers at once. The broker keeps, per (group, topic-partition), the
**in-flight window** of records ``[start_offset (SPSO), end)``: every offset below the SPSO is done with, every
offset from ``end`` on has never been handed out. Inside the window each offset has a state::

    AVAILABLE --acquire (delivery count + 1)--> ACQUIRED --ACCEPT--------------> ACKNOWLEDGED  (terminal)
        ^                                          |  |-----REJECT / GAP--------> ARCHIVED      (terminal)
        |---RELEASE, lock timeout------------------|
        |   (ARCHIVED instead once the delivery count reached share.delivery.count.limit)
        |---member leaves / share session closes---|
            (delivery count - 1: fetched, never delivered; Kafka 4.1+, KAFKA-17541)

Acquired records carry an acquisition lock of ``share.record.lock.duration.ms`` (Kafka 4.4:
``group.share.record.lock.duration.ms``, 30 s, a group may override it); when it expires the records go back to
AVAILABLE (or ARCHIVED at the limit). RENEW (KIP-1222, acknowledge type 4) restarts the lock of records a member
holds. The SPSO moves over a prefix of ACKNOWLEDGED/ARCHIVED offsets, and the fully terminal batches below it are
dropped. At most ``group.share.partition.max.record.locks`` (Kafka 4.4: 2000) offsets are in flight.

State is kept per batch of offsets (Kafka's ``InFlightBatch`` with one ``InFlightState``) until offsets of a batch
need different states; then the batch is split into one ``InFlightState`` per offset (Kafka's offsetState map).

Nothing here does I/O or reads the clock by itself: ``clock()`` gives milliseconds; locks expire when a method
runs (every mutating call first releases the expired ones) or when the owner calls :meth:`expire_locks` at
:meth:`next_lock_deadline`. Changes that must survive a broker crash are returned as a :class:`StateWrite`, the
partition of a WriteShareGroupState the caller sends to the share coordinator (``share_state.py``).
Acknowledgements and releases follow Kafka's two-phase ``rollbackOrProcessStateUpdates``: the transition is made,
the offsets are marked as in transition (not acquirable, not acknowledgeable) and the caller calls
:meth:`commit` once the write succeeded (the SPSO then moves) or :meth:`rollback` when it failed.

Acquisition follows Kafka 4.4 ``SharePartition.acquire``: fetched record batches (base offset, last offset) are
matched against the window; whole AVAILABLE batches are acquired whole, partly covered ones are split; new
offsets form new batches of delivery count 1. ``max_records`` is a soft limit (the last record batch is taken
whole) unless ``strict`` (KIP-1206's record-limit acquire mode). Records on their last delivery attempt are
delivered alone, and records delivered at least ``max(2, ceil(limit / 2))`` times are delivered in halving
batches (Kafka's throttling of redelivered records). For read_committed the offsets of aborted transactions
(given as ranges) are archived instead of delivered. Offsets in the window no batch covers (after a restart, the
offsets between persisted batches; Kafka's persister-read gap window) are acquired as new records.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Protocol

from odradek.coordinator.share.share_state import StateBatch, combine_state_batches
from odradek.protocol import errors

EMPTY_MEMBER_ID = ""

# Kafka 4.4 defaults (ShareGroupConfig / GroupConfig)
DEFAULT_MAX_IN_FLIGHT_RECORDS = 2000  # group.share.partition.max.record.locks
DEFAULT_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000  # group.share.record.lock.duration.ms
MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT = 2


class RecordState(IntEnum):
    """Kafka's RecordState; the ids are the DeliveryState of persisted state batches."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # dead-letter queue (KIP-1191), not used here
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(IntEnum):
    """AcknowledgeTypes of ShareFetch/ShareAcknowledge: ``0:Gap,1:Accept,2:Release,3:Reject,4:Renew``."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: extend the acquisition lock


_ACK_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


class PartitionState(Enum):
    """Kafka's SharePartitionState (INITIALIZING and FAILED belong to the caller's read of the state)."""

    EMPTY = "EMPTY"
    ACTIVE = "ACTIVE"
    FENCED = "FENCED"


@dataclass(frozen=True)
class SharePartitionConfig:
    """The limits of one share-partition: the broker's ``group.share.*`` configs with the group's overrides (the
    GROUP config resource: ``share.partition.max.record.locks``, ``share.delivery.count.limit``,
    ``share.record.lock.duration.ms``, ``share.renew.acknowledge.enable``) applied by the caller."""

    max_in_flight_records: int = DEFAULT_MAX_IN_FLIGHT_RECORDS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    renew_acknowledge_enable: bool = True  # Kafka 4.4's default


@dataclass(frozen=True)
class AcquiredRecords:
    """ShareFetchResponse's AcquiredRecords: offsets first..last handed to a member at this delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AcknowledgementBatch:
    """An AcknowledgementBatch of ShareFetch/ShareAcknowledge: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]

    def validate(self) -> str | None:
        """Kafka's checks of a batch (answered with INVALID_REQUEST); None when it is well formed."""
        if self.first_offset > self.last_offset:
            return "First offset is greater than the last offset."
        n = len(self.acknowledge_types)
        if n != 1 and n != self.last_offset - self.first_offset + 1:
            return "Acknowledge types do not match the batch's offsets."
        for t in self.acknowledge_types:
            if t not in AcknowledgeType._value2member_map_:
                return f"Invalid acknowledge type: {t}"
        return None

    def type_at(self, offset: int) -> AcknowledgeType:
        types = self.acknowledge_types
        return AcknowledgeType(types[0] if len(types) == 1 else types[offset - self.first_offset])


@dataclass(frozen=True)
class StateWrite:
    """The partition data of a WriteShareGroupState: what changed, to persist before it is relied on."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class AcquireResult:
    records: tuple[AcquiredRecords, ...] = ()
    count: int = 0
    write: StateWrite | None = None  # locks that expired on the way


@dataclass(frozen=True)
class Pending:
    """The outcome of an acknowledgement or a release: ``error_code`` (0 = NONE), the write to persist, and the
    ``token`` to :meth:`SharePartition.commit` or :meth:`SharePartition.rollback` (None: nothing in transition).
    ``expired`` is what expiring locks changed first (already applied, to persist as well)."""

    error_code: int = errors.NONE
    error_message: str | None = None
    write: StateWrite | None = None
    token: int | None = None
    expired: StateWrite | None = None


class PartitionOffsets(Protocol):
    """The log offsets ``share.auto.offset.reset`` needs (Kafka's PartitionMetadataProvider)."""

    def earliest(self) -> int: ...

    def latest(self) -> int: ...

    def for_timestamp(self, timestamp_ms: int) -> int: ...


_DURATION = re.compile(
    r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{0,9}))?S)?)?$", re.IGNORECASE
)


@dataclass(frozen=True)
class AutoOffsetReset:
    """``share.auto.offset.reset``: ``latest`` (the default), ``earliest`` or ``by_duration:<ISO-8601 duration>``
    (Kafka's ShareGroupAutoOffsetResetStrategy; the duration as java.time.Duration parses it, not negative)."""

    strategy: str = "latest"
    duration_ms: int = 0

    @classmethod
    def parse(cls, value: str) -> AutoOffsetReset:
        v = value.strip().lower()
        if v in ("latest", "earliest"):
            return cls(v)
        if v.startswith("by_duration:"):
            text = value.strip()[len("by_duration:"):]
            m = _DURATION.match(text)
            if not m or text.upper() in ("P", "PT") or text.upper().endswith("T"):
                raise ValueError(f"Unable to parse duration string '{text}' for by_duration reset strategy.")
            days, hours, minutes, seconds, frac = m.groups()
            ms = (int(days or 0) * 86_400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)) * 1000
            ms += int(((frac or "") + "000")[:3])
            return cls("by_duration", ms)
        raise ValueError(f"Unknown auto offset reset strategy: {value}")

    def start_offset(self, offsets: PartitionOffsets, now_ms: int) -> int:
        if self.strategy == "earliest":
            return offsets.earliest()
        if self.strategy == "latest":
            return offsets.latest()
        return offsets.for_timestamp(now_ms - self.duration_ms)


class InFlightState:
    """Kafka's InFlightState: state, delivery count, owner and acquisition lock deadline of one batch or offset."""

    __slots__ = ("state", "delivery_count", "member_id", "deadline", "saved")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str = EMPTY_MEMBER_ID,
                 deadline: int | None = None) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.deadline = deadline
        # The state before an ongoing transition (Kafka's rollbackState): (state, count, member, deadline).
        self.saved: tuple[RecordState, int, str, int | None] | None = None

    def copy(self) -> InFlightState:
        return InFlightState(self.state, self.delivery_count, self.member_id, self.deadline)

    def __repr__(self) -> str:
        return f"InFlightState({self.state.name}, count={self.delivery_count}, member={self.member_id!r})"


class InFlightBatch:
    """Kafka's InFlightBatch: offsets first..last, one state for all (``whole``) or one per offset (``offsets``)."""

    __slots__ = ("first", "last", "whole", "offsets")

    def __init__(self, first: int, last: int, state: InFlightState) -> None:
        self.first = first
        self.last = last
        self.whole: InFlightState | None = state
        self.offsets: list[InFlightState] | None = None

    def split(self) -> list[tuple[int, InFlightState]]:
        """Per-offset state from now on (Kafka's maybeInitializeOffsetStateUpdate); the acquired copies, which
        need lock entries of their own."""
        if self.offsets is not None:
            return []
        assert self.whole is not None
        w = self.whole
        self.offsets = []
        for _ in range(self.first, self.last + 1):
            s = w.copy()
            s.saved = w.saved
            self.offsets.append(s)
        self.whole = None
        if w.state is RecordState.ACQUIRED and w.deadline is not None:
            return [(self.first + i, s) for i, s in enumerate(self.offsets)]
        return []

    def states(self, lo: int, hi: int) -> Iterator[tuple[int, InFlightState]]:
        """(offset, state) of the per-offset states between lo and hi (inclusive)."""
        assert self.offsets is not None
        lo, hi = max(lo, self.first), min(hi, self.last)
        for off in range(lo, hi + 1):
            yield off, self.offsets[off - self.first]

    def state_at(self, offset: int) -> InFlightState:
        if self.offsets is None:
            assert self.whole is not None
            return self.whole
        return self.offsets[offset - self.first]


@dataclass
class _Transition:
    """The states one acknowledgement or release changed, to commit or roll back, and the locks it renewed."""

    states: list[tuple[int, InFlightState]] = field(default_factory=list)
    renewed: list[tuple[int, InFlightState, int | None]] = field(default_factory=list)


def throttle_records_delivery_limit(delivery_count_limit: int) -> int:
    """Kafka's throttleRecordsDeliveryLimit: from this delivery count on, records are delivered in halving batches."""
    return max(MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT, math.ceil(delivery_count_limit / 2))


class SharePartition:
    """The in-flight records of one share group on one topic-partition (Kafka's SharePartition)."""

    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        clock: Callable[[], int],
        config: SharePartitionConfig | None = None,
        leader_epoch: int = 0,
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.clock = clock
        self.config = config or SharePartitionConfig()
        self.leader_epoch = leader_epoch
        self.partition_state = PartitionState.EMPTY
        self.state_epoch = 0
        self.start_offset = 0  # SPSO
        self._end = 0  # first offset never acquired: the window is [start_offset, _end)
        self._keys: list[int] = []  # first offsets of the cached batches, sorted
        self._batches: dict[int, InFlightBatch] = {}
        self._locks: list[tuple[int, int, int, InFlightState]] = []  # (deadline, seq, offset, state)
        self._seq = itertools.count()
        self._transitions: dict[int, _Transition] = {}
        self._tokens = itertools.count(1)
        self._find_next = False  # some offset may be AVAILABLE (Kafka's findNextFetchOffset)

    # ------------------------------------------------------------------------------- initialization

    def initialize(
        self,
        start_offset: int,
        state_epoch: int,
        batches: Sequence[StateBatch] = (),
        offsets: PartitionOffsets | None = None,
        reset: AutoOffsetReset | None = None,
    ) -> None:
        """Load the state ReadShareGroupState answered (Kafka's maybeInitialize). A start offset of -1 (never
        initialized) is resolved with ``share.auto.offset.reset`` against the log's ``offsets``."""
        if start_offset == -1:
            if offsets is None:
                raise ValueError("an uninitialized share-partition needs the log offsets to start from")
            start_offset = (reset or AutoOffsetReset()).start_offset(offsets, self.clock())
        self.start_offset = start_offset
        self.state_epoch = state_epoch
        self._end = start_offset
        self._keys.clear()
        self._batches.clear()
        self._locks.clear()
        for b in sorted(batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, start_offset)
            if b.last_offset < first:
                continue
            if self._keys and first <= self._batches[self._keys[-1]].last:
                raise ValueError(f"overlapping state batches at offset {first}")
            state = RecordState(b.delivery_state) if b.delivery_state in RecordState._value2member_map_ \
                else RecordState.AVAILABLE
            if state is RecordState.ACQUIRED:  # never persisted by Kafka; nobody holds it after a restart
                state = RecordState.AVAILABLE
            elif state is RecordState.ARCHIVING:
                state = RecordState.ARCHIVED
            self._insert(InFlightBatch(first, b.last_offset, InFlightState(state, b.delivery_count)))
            self._end = max(self._end, b.last_offset + 1)
        self._find_next = True
        self.partition_state = PartitionState.ACTIVE
        self._advance_start_offset()

    # ---------------------------------------------------------------------------------- the cache

    def _insert(self, batch: InFlightBatch) -> None:
        bisect.insort(self._keys, batch.first)
        self._batches[batch.first] = batch

    def _remove_below(self, offset: int) -> None:
        """Drop the cached batches whose last offset is below ``offset``."""
        n = 0
        while n < len(self._keys) and self._batches[self._keys[n]].last < offset:
            del self._batches[self._keys[n]]
            n += 1
        del self._keys[:n]

    def _overlapping(self, lo: int, hi: int) -> list[InFlightBatch]:
        """The cached batches that hold any offset of lo..hi, in order."""
        i = bisect.bisect_right(self._keys, lo) - 1
        if i < 0 or self._batches[self._keys[i]].last < lo:
            i += 1
        out = []
        while i < len(self._keys) and self._keys[i] <= hi:
            out.append(self._batches[self._keys[i]])
            i += 1
        return out

    def _batch_at(self, offset: int) -> InFlightBatch | None:
        i = bisect.bisect_right(self._keys, offset) - 1
        if i < 0:
            return None
        b = self._batches[self._keys[i]]
        return b if b.last >= offset else None

    @property
    def end_offset(self) -> int:
        """Kafka's share-partition end offset (SPEO): the last offset in flight; the SPSO when nothing is."""
        return self._end - 1 if self._keys else self._end

    def in_flight_count(self) -> int:
        """Offsets in the window (Kafka's numInFlightRecords)."""
        return self._end - self.start_offset if self._keys else 0

    def _lock(self, offset: int, state: InFlightState, now: int) -> None:
        state.deadline = now + self.config.record_lock_duration_ms
        heapq.heappush(self._locks, (state.deadline, next(self._seq), offset, state))

    # ---------------------------------------------------------------------------------- reading

    def next_fetch_offset(self) -> int:
        """Where the next read of the log should start: the first AVAILABLE (or never acquired) offset of the
        window, else the window's end (Kafka's nextFetchOffset)."""
        if not self._find_next:
            return self._end
        pos = self.start_offset
        busy = False  # offsets in transition may turn AVAILABLE again: keep looking next time
        for key in self._keys:
            b = self._batches[key]
            if b.last < pos:
                continue
            if b.first > pos:
                return pos  # offsets no batch covers: not delivered since the restart
            if b.offsets is None:
                assert b.whole is not None
                if b.whole.state is RecordState.AVAILABLE and b.whole.saved is None:
                    return max(pos, b.first)
                busy = busy or b.whole.saved is not None
            else:
                for off, s in b.states(pos, b.last):
                    if s.state is RecordState.AVAILABLE and s.saved is None:
                        return off
                    busy = busy or s.saved is not None
            pos = b.last + 1
        if pos < self._end:
            return pos
        self._find_next = busy
        return self._end

    def offset_state(self, offset: int) -> tuple[RecordState, int, str] | None:
        """(state, delivery count, member) of an offset of the window; None outside it or never acquired."""
        if offset < self.start_offset:
            return None
        b = self._batch_at(offset)
        if b is None:
            return None
        s = b.state_at(offset)
        return s.state, s.delivery_count, s.member_id

    def offsets_in(self, *states: RecordState) -> list[int]:
        """The offsets of the window (from the SPSO) in any of ``states``, ascending."""
        out = []
        for key in self._keys:
            b = self._batches[key]
            for off in range(max(b.first, self.start_offset), b.last + 1):
                if b.state_at(off).state in states:
                    out.append(off)
        return out

    def next_lock_deadline(self) -> int | None:
        """When the earliest acquisition lock expires (for the caller's timer); None when nothing is locked."""
        while self._locks:
            deadline, _, offset, state = self._locks[0]
            if state.deadline == deadline and state.state is RecordState.ACQUIRED and self._holds(offset, state):
                return deadline
            heapq.heappop(self._locks)
        return None

    def _holds(self, offset: int, state: InFlightState) -> bool:
        b = self._batch_at(offset)
        return b is not None and b.state_at(offset) is state

    def delivery_complete_count(self) -> int:
        """KIP-1226: offsets from the SPSO on whose delivery is complete (ACKNOWLEDGED or ARCHIVED)."""
        n = 0
        for key in self._keys:
            b = self._batches[key]
            if b.offsets is None:
                assert b.whole is not None
                if b.whole.state.terminal:
                    n += b.last - max(b.first, self.start_offset) + 1 if b.last >= self.start_offset else 0
            else:
                n += sum(1 for _, s in b.states(self.start_offset, b.last) if s.state.terminal)
        return n

    def _write(self, changed: list[StateBatch]) -> StateWrite | None:
        if not changed:
            return None
        return StateWrite(
            self.state_epoch, self.leader_epoch, self.start_offset,
            tuple(combine_state_batches((), changed, -1)), self.delivery_complete_count(),
        )

    # ---------------------------------------------------------------------------------- acquiring

    def acquire(
        self,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        max_records: int,
        *,
        fetch_offset: int | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> AcquireResult:
        """Acquire for ``member_id`` the records of the fetched record ``batches`` ((base offset, last offset),
        ascending, as read from the log at ``fetch_offset``, by default the first base offset) that are
        AVAILABLE or new, up to ``max_records`` (soft unless ``strict``) and the in-flight limit.
        ``aborted``: offset ranges of aborted transactions' batches (read_committed), archived, not delivered."""
        expired = self._expire(self.clock())
        if self.partition_state is not PartitionState.ACTIVE or max_records <= 0 or not batches:
            return AcquireResult(write=self._write(expired))
        fetch_first, fetch_last = batches[0][0], batches[-1][1]
        if fetch_last < self.start_offset:
            return AcquireResult(write=self._write(expired))
        now = self.clock()
        lo = max(fetch_first, self.start_offset)
        fetch_at = max(fetch_offset if fetch_offset is not None else fetch_first, self.start_offset)
        self._archive_absent(fetch_at, lo - 1)
        lo = max(lo, self.start_offset)  # the SPSO may have moved over what was archived
        if fetch_last < lo:
            return AcquireResult(write=self._write(expired))
        hi, max_records = self._limits(lo, max_records, fetch_last)
        if max_records <= 0:
            return AcquireResult(write=self._write(expired))
        limit = self.config.delivery_count_limit
        throttle = throttle_records_delivery_limit(limit)
        out: list[AcquiredRecords] = []
        acquired = 0
        pos = lo  # the next offset to look at
        stop = False
        for b in self._overlapping(lo, hi):
            if acquired >= max_records:
                stop = True
                break
            if b.first > pos:  # offsets no batch covers: new to this broker
                acquired += self._acquire_new(member_id, batches, pos, min(b.first - 1, hi),
                                              max_records - acquired, strict, batch_size, now, out)
                if acquired >= max_records:
                    stop = True
                    break
            pos = max(pos, b.last + 1)
            if b.offsets is None:
                w = b.whole
                assert w is not None
                if w.state is not RecordState.AVAILABLE or w.saved is not None:
                    continue
                full = b.first >= lo and b.last <= hi
                throttled = w.delivery_count >= throttle
                if throttled and acquired > 0:
                    stop = True
                    break
                too_many = strict and b.last - b.first + 1 > max_records - acquired
                if full and not throttled and not too_many:
                    w.state = RecordState.ACQUIRED
                    w.delivery_count += 1
                    w.member_id = member_id
                    self._lock(b.first, w, now)
                    out.append(AcquiredRecords(b.first, b.last, w.delivery_count))
                    acquired += b.last - b.first + 1
                    continue
                self._split(b)
            elif acquired > 0 and max((s.delivery_count for _, s in b.states(lo, hi)
                                       if s.state is RecordState.AVAILABLE), default=0) >= throttle:
                stop = True
                break
            n, throttled_stop = self._acquire_offsets(member_id, b, lo, hi, max_records - acquired, strict,
                                                      acquired, now, out)
            acquired += n
            if throttled_stop:
                stop = True
                break
        if not stop and acquired < max_records and pos <= hi:
            acquired += self._acquire_new(member_id, batches, pos, hi, max_records - acquired, strict,
                                          batch_size, now, out)
        records = self._drop_aborted(out, aborted) if aborted else out
        if aborted:
            acquired = sum(r.last_offset - r.first_offset + 1 for r in records)
            self._advance_start_offset()
        return AcquireResult(tuple(_coalesce(records)), acquired, self._write(expired))

    def _limits(self, fetch_offset: int, max_records: int, last_offset: int) -> tuple[int, int]:
        """Kafka's lastOffsetAndMaxRecordsToAcquire: the in-flight limit caps new records; at the limit only
        offsets already in the window may be acquired again."""
        room = self.config.max_in_flight_records - self.in_flight_count()
        n = min(max_records, room)
        if n <= 0 and fetch_offset <= self.end_offset and self._keys:
            n = min(max_records, self.end_offset - fetch_offset + 1)
            last_offset = min(last_offset, self.end_offset)
        return last_offset, n

    def _archive_absent(self, lo: int, hi: int) -> None:
        """The offsets between the fetch offset and the first fetched batch are not in the log (compacted away):
        AVAILABLE ones are archived (Kafka's maybeArchiveStaleBatches), and those no batch covers get an
        ARCHIVED batch, as nothing can ever deliver them."""
        if hi < lo:
            return
        pos = lo
        for b in self._overlapping(lo, hi) + [None]:
            end = hi if b is None else min(b.first - 1, hi)
            if pos <= end:
                self._insert(InFlightBatch(pos, end, InFlightState(RecordState.ARCHIVED, 0)))
                self._end = max(self._end, end + 1)
            if b is not None:
                pos = max(pos, b.last + 1)
                if b.offsets is None and (b.first < lo or b.last > hi):
                    assert b.whole is not None
                    if b.whole.state is not RecordState.AVAILABLE or b.whole.saved is not None:
                        continue
                    self._split(b)
                if b.offsets is None:
                    assert b.whole is not None
                    if b.whole.state is RecordState.AVAILABLE and b.whole.saved is None:
                        b.whole.state = RecordState.ARCHIVED
                    continue
                for _, st in b.states(lo, hi):
                    if st.state is RecordState.AVAILABLE and st.saved is None:
                        st.state = RecordState.ARCHIVED
        self._advance_start_offset()

    def _acquire_new(
        self, member_id: str, fetched: Sequence[tuple[int, int]], first: int, last_allowed: int, room: int,
        strict: bool, batch_size: int | None, now: int, out: list[AcquiredRecords],
    ) -> int:
        """New in-flight batches from ``first`` (Kafka's acquireNewBatchRecords / createBatches)."""
        if room <= 0 or first > last_allowed:
            return 0
        last = first + room - 1
        if not strict:
            last = _batch_end_containing(fetched, last)
        last = min(last, last_allowed)
        cuts = [last]
        if batch_size and not strict and last - first + 1 > batch_size:
            cuts = []
            start = first
            for _, blast in fetched:
                if blast < start:
                    continue
                if blast >= last:
                    break
                if blast - start + 1 >= batch_size:
                    cuts.append(blast)
                    start = blast + 1
            cuts.append(last)
        start = first
        for end in cuts:
            state = InFlightState(RecordState.ACQUIRED, 1, member_id)
            self._insert(InFlightBatch(start, end, state))
            self._lock(start, state, now)
            out.append(AcquiredRecords(start, end, 1))
            start = end + 1
        self._end = max(self._end, last + 1)
        return last - first + 1

    def _acquire_offsets(
        self, member_id: str, b: InFlightBatch, lo: int, hi: int, room: int, strict: bool, acquired_before: int,
        now: int, out: list[AcquiredRecords],
    ) -> tuple[int, bool]:
        """Acquire the AVAILABLE offsets of a split batch (Kafka's acquireSubsetBatchRecords). Gives the count and
        whether acquisition stops here (a record on its last attempt, or throttling)."""
        limit = self.config.delivery_count_limit
        throttle = throttle_records_delivery_limit(limit)
        assert b.offsets is not None
        n = 0
        cap = -1
        throttled = False
        for off, s in b.states(lo, hi):
            if s.state is not RecordState.AVAILABLE or s.saved is not None:
                continue
            if limit > 2 and s.delivery_count == limit - 1 and acquired_before + n > 0:
                return n, True  # on its last delivery attempt: delivered alone, in the next fetch
            if s.delivery_count >= throttle and cap < 0:
                cap = max(1, len(b.offsets) >> (s.delivery_count - throttle + 1))
                throttled = True
            s.state = RecordState.ACQUIRED
            s.delivery_count += 1
            s.member_id = member_id
            self._lock(off, s, now)
            out.append(AcquiredRecords(off, off, s.delivery_count))
            n += 1
            if s.delivery_count == limit and limit > 2:
                return n, True  # delivered alone in this fetch
            if strict and n >= room:
                return n, True
            if throttled and n == cap:
                return n, True
        return n, throttled and n > 0

    def _drop_aborted(self, acquired: list[AcquiredRecords], aborted: Sequence[tuple[int, int]]) -> list[AcquiredRecords]:
        """read_committed: the acquired offsets of aborted transactions are archived and not delivered (Kafka's
        filterAbortedTransactionalAcquiredRecords)."""
        out: list[AcquiredRecords] = []
        spans = sorted(aborted)
        for r in acquired:
            pos = r.first_offset
            for a_first, a_last in spans:
                if a_last < pos or a_first > r.last_offset:
                    continue
                if a_first > pos:
                    out.append(AcquiredRecords(pos, a_first - 1, r.delivery_count))
                self._archive_range(max(a_first, pos), min(a_last, r.last_offset))
                pos = min(a_last, r.last_offset) + 1
            if pos <= r.last_offset:
                out.append(AcquiredRecords(pos, r.last_offset, r.delivery_count))
        return out

    def _archive_range(self, lo: int, hi: int) -> None:
        for b in self._overlapping(lo, hi):
            if b.offsets is None and (b.first < lo or b.last > hi):
                self._split(b)
            if b.offsets is None:
                assert b.whole is not None
                b.whole.state, b.whole.member_id, b.whole.deadline = RecordState.ARCHIVED, EMPTY_MEMBER_ID, None
                continue
            for _, s in b.states(lo, hi):
                s.state, s.member_id, s.deadline = RecordState.ARCHIVED, EMPTY_MEMBER_ID, None

    # --------------------------------------------------------------------------- acknowledging

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> Pending:
        """Acknowledge records ``member_id`` holds (Kafka's SharePartition.acknowledge). All or nothing: on an
        error nothing changes. RENEW restarts locks and is not persisted."""
        now = self.clock()
        expired = self._write(self._expire(now))
        tr = _Transition()
        changed: list[StateBatch] = []
        error: tuple[int, str] | None = None
        for batch in batches:
            problem = batch.validate()
            if problem is not None:
                error = (errors.INVALID_REQUEST, problem)
                break
            if batch.last_offset < self.start_offset:
                continue  # already behind the SPSO
            error = self._acknowledge_batch(member_id, batch, now, tr, changed)
            if error is not None:
                break
        if error is not None:
            self._undo(tr)
            return Pending(error[0], error[1], expired=expired)
        return self._pending(tr, changed, expired)

    def _acknowledge_batch(
        self, member_id: str, batch: AcknowledgementBatch, now: int, tr: _Transition, changed: list[StateBatch],
    ) -> tuple[int, str] | None:
        lo = max(batch.first_offset, self.start_offset)
        if not self._keys or self._keys[0] > lo:
            return errors.INVALID_RECORD_STATE, "Batch record not found. The request batch offsets are not found in the cache."
        if self._batches[self._keys[-1]].last < lo:
            return errors.INVALID_REQUEST, "Batch record not found. The first offset in request is past acquired records."
        cached = self._overlapping(lo, batch.last_offset)
        if not cached or self._batch_at(lo) is None:
            return errors.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The offset is not acquired."
        if batch.last_offset > cached[-1].last:
            return errors.INVALID_REQUEST, "Batch record not found. The last offset in request is past acquired records."
        per_offset = len(batch.acknowledge_types) > 1
        pos = lo
        for b in cached:
            if b.first > pos:
                return errors.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The offset is not acquired."
            pos = b.last + 1
            if b.offsets is None:
                w = b.whole
                assert w is not None
                if w.member_id == EMPTY_MEMBER_ID or w.state is not RecordState.ACQUIRED:
                    return errors.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The batch is not in the acquired state."
                if w.member_id != member_id:
                    return errors.INVALID_RECORD_STATE, "Member is not the owner of batch record"
                if w.saved is not None:
                    return errors.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The batch has an ongoing state transition."
                full = b.first >= lo and b.last <= batch.last_offset
                if full and not per_offset:
                    err = self._ack_state(w, b.first, b.last, batch.type_at(b.first), now, tr, changed)
                    if err is not None:
                        return err
                    continue
                self._split(b)
            for off, s in b.states(lo, batch.last_offset):
                if s.state is not RecordState.ACQUIRED or s.saved is not None:
                    return errors.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The offset is not acquired."
                if s.member_id != member_id:
                    return errors.INVALID_RECORD_STATE, "Member is not the owner of offset"
                err = self._ack_state(s, off, off, batch.type_at(off), now, tr, changed)
                if err is not None:
                    return err
        return None

    def _split(self, b: InFlightBatch) -> None:
        """Per-offset state for ``b``; the acquired offsets keep their lock, each with a lock entry of its own."""
        for off, s in b.split():
            self._lock_again(off, s)

    def _lock_again(self, offset: int, state: InFlightState) -> None:
        """A lock entry for a per-offset copy of an acquired batch (same deadline)."""
        assert state.deadline is not None
        heapq.heappush(self._locks, (state.deadline, next(self._seq), offset, state))

    def _ack_state(
        self, s: InFlightState, first: int, last: int, ack: AcknowledgeType, now: int, tr: _Transition,
        changed: list[StateBatch],
    ) -> tuple[int, str] | None:
        if ack is AcknowledgeType.RENEW:
            if not self.config.renew_acknowledge_enable:
                return errors.INVALID_RECORD_STATE, "Renewing acquisition locks is not enabled for the group."
            tr.renewed.append((first, s, s.deadline))
            self._lock(first, s, now)
            return None
        new = _ACK_STATE[ack]
        self._transition(first, s, new, tr)
        changed.append(StateBatch(first, last, int(s.state), s.delivery_count))
        if s.state is RecordState.AVAILABLE:
            self._find_next = True
        return None

    def _transition(self, offset: int, s: InFlightState, new: RecordState, tr: _Transition,
                    decrease: bool = False) -> None:
        """ACQUIRED -> ``new`` (Kafka's startStateTransition): a release at the delivery count limit archives.
        ``decrease`` (Kafka's DeliveryCountOps.DECREASE, the release of a member's records when its share session
        closes): the acquisition is not counted, so the delivery count goes down by one and nothing is archived for
        the limit; ARCHIVED (below the SPSO) keeps the count."""
        s.saved = (s.state, s.delivery_count, s.member_id, s.deadline)
        tr.states.append((offset, s))
        if new is RecordState.AVAILABLE and not decrease and s.delivery_count >= self.config.delivery_count_limit:
            new = RecordState.ARCHIVED
        if decrease and new is not RecordState.ARCHIVED:
            s.delivery_count = max(0, s.delivery_count - 1)
        s.state = new
        s.member_id = EMPTY_MEMBER_ID
        s.deadline = None

    def _pending(self, tr: _Transition, changed: list[StateBatch], expired: StateWrite | None) -> Pending:
        write = self._write(changed)
        if write is None:  # only renewals: nothing to persist
            self._finish(tr)
            return Pending(expired=expired)
        token = next(self._tokens)
        self._transitions[token] = tr
        return Pending(write=write, token=token, expired=expired)

    def commit(self, token: int) -> None:
        """The write of ``token`` is persisted: the transition is final and the SPSO may move."""
        tr = self._transitions.pop(token, None)
        if tr is not None:
            self._finish(tr)

    def _finish(self, tr: _Transition) -> None:
        for _, s in tr.states:
            s.saved = None
            if s.state is RecordState.AVAILABLE:
                self._find_next = True
        self._advance_start_offset()

    def rollback(self, token: int) -> None:
        """The write of ``token`` failed: the offsets return to what they were (an acquisition lock that expired
        meanwhile releases them, as Kafka's completeStateTransition(false) does)."""
        tr = self._transitions.pop(token, None)
        if tr is not None:
            self._undo(tr)
            self._expire(self.clock())

    def _undo(self, tr: _Transition) -> None:
        for off, s in reversed(tr.states):
            if s.saved is not None:
                s.state, s.delivery_count, s.member_id, s.deadline = s.saved
                s.saved = None
                if s.state is RecordState.ACQUIRED and s.deadline is not None:
                    self._lock_again(off, s)
        for off, s, deadline in reversed(tr.renewed):
            s.deadline = deadline
            if deadline is not None:
                self._lock_again(off, s)

    # ---------------------------------------------------------------------------- members, locks

    def release_acquired_records(self, member_id: str) -> Pending:
        """A member left (or its share session closed): its acquired records become AVAILABLE again with their
        delivery count one lower (ARCHIVED below the SPSO) (Kafka 4.4's releaseAcquiredRecords: records fetched
        but, as the session's last acknowledgements show, not delivered do not count as a delivery attempt)."""
        now = self.clock()
        expired = self._write(self._expire(now))
        tr = _Transition()
        changed: list[StateBatch] = []
        for key in list(self._keys):
            b = self._batches[key]
            if b.offsets is None:
                w = b.whole
                assert w is not None
                if w.state is not RecordState.ACQUIRED or w.member_id != member_id or w.saved is not None:
                    continue
                if b.first < self.start_offset <= b.last:
                    self._split(b)
                else:
                    target = RecordState.ARCHIVED if b.last < self.start_offset else RecordState.AVAILABLE
                    self._transition(b.first, w, target, tr, decrease=True)
                    changed.append(StateBatch(b.first, b.last, int(w.state), w.delivery_count))
                    continue
            for off, s in b.states(b.first, b.last):
                if s.state is RecordState.ACQUIRED and s.member_id == member_id and s.saved is None:
                    target = RecordState.ARCHIVED if off < self.start_offset else RecordState.AVAILABLE
                    self._transition(off, s, target, tr, decrease=True)
                    changed.append(StateBatch(off, off, int(s.state), s.delivery_count))
        self._find_next = True
        return self._pending(tr, changed, expired)

    def expire_locks(self) -> StateWrite | None:
        """Release the records whose acquisition lock expired; the write to persist (Kafka persists it and keeps
        the transition even when the write fails)."""
        return self._write(self._expire(self.clock()))

    def _expire(self, now: int) -> list[StateBatch]:
        changed: list[StateBatch] = []
        limit = self.config.delivery_count_limit
        while self._locks and self._locks[0][0] <= now:
            deadline, _, offset, s = heapq.heappop(self._locks)
            if s.deadline != deadline or s.state is not RecordState.ACQUIRED or s.saved is not None:
                continue
            b = self._batch_at(offset)
            if b is None or b.state_at(offset) is not s:
                continue
            first, last = (b.first, b.last) if b.offsets is None else (offset, offset)
            if b.offsets is None and first < self.start_offset <= last:
                self._split(b)
                for off, c in b.states(first, last):
                    changed.extend(self._release_on_timeout(c, off, off, limit))
                continue
            changed.extend(self._release_on_timeout(s, first, last, limit))
        if changed:
            self._advance_start_offset()
        return changed

    def _release_on_timeout(self, s: InFlightState, first: int, last: int, limit: int) -> list[StateBatch]:
        if s.state is not RecordState.ACQUIRED or s.saved is not None:
            return []
        if last < self.start_offset or s.delivery_count >= limit:
            s.state = RecordState.ARCHIVED
        else:
            s.state = RecordState.AVAILABLE
            self._find_next = True
        s.member_id = EMPTY_MEMBER_ID
        s.deadline = None
        return [StateBatch(first, last, int(s.state), s.delivery_count)]

    # ---------------------------------------------------------------------------- the start offset

    def _advance_start_offset(self) -> None:
        """Move the SPSO over the ACKNOWLEDGED/ARCHIVED offsets at the front of the window and drop the batches
        now wholly below it (Kafka's maybeUpdateCachedStateAndOffsets)."""
        pos = self.start_offset
        for key in self._keys:
            b = self._batches[key]
            if b.last < pos:
                continue
            if b.first > pos:
                break
            if b.offsets is None:
                assert b.whole is not None
                if not b.whole.state.terminal or b.whole.saved is not None:
                    break
                pos = b.last + 1
                continue
            stopped = False
            for off, s in b.states(pos, b.last):
                if not s.state.terminal or s.saved is not None:
                    pos = off
                    stopped = True
                    break
            if stopped:
                break
            pos = b.last + 1
        if pos == self.start_offset:
            return
        self.start_offset = pos
        self._remove_below(pos)
        if not self._keys:
            self._end = max(self._end, pos)

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log's start offset moved past the SPSO (retention, DeleteRecords): the records below it are gone;
        AVAILABLE ones are archived and the SPSO follows (Kafka's updateCacheAndOffsets). Not persisted here:
        the next write carries the new start offset."""
        if log_start_offset <= self.start_offset:
            return
        for b in self._overlapping(self.start_offset, log_start_offset - 1):
            if b.offsets is None and b.last >= log_start_offset:
                self._split(b)
            if b.offsets is None:
                assert b.whole is not None
                if b.whole.state is RecordState.AVAILABLE and b.whole.saved is None:
                    b.whole.state = RecordState.ARCHIVED
                continue
            for _, s in b.states(self.start_offset, log_start_offset - 1):
                if s.state is RecordState.AVAILABLE and s.saved is None:
                    s.state = RecordState.ARCHIVED
        self.start_offset = log_start_offset
        self._remove_below(log_start_offset)
        self._end = max(self._end, log_start_offset)
        self._find_next = True
        self._advance_start_offset()

    def mark_fenced(self) -> None:
        """This broker stopped leading the partition (Kafka's markFenced): no more acquisitions."""
        self.partition_state = PartitionState.FENCED


def _batch_end_containing(fetched: Sequence[tuple[int, int]], offset: int) -> int:
    """Kafka's lastOffsetFromBatchWithRequestOffset: the last offset of the fetched batch holding ``offset``."""
    for base, last in fetched:
        if base <= offset <= last:
            return last
        if base > offset:
            break
    return offset


def _coalesce(records: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """Adjacent ranges at the same delivery count as one (Kafka's ShareFetchUtils.accumulateAcquiredRecords)."""
    out: list[AcquiredRecords] = []
    for r in records:
        if out and out[-1].last_offset + 1 == r.first_offset and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out
