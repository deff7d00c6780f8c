"""Incremental fetch sessions (KIP-227), as a cache with no I/O.

A client opens a session with a full fetch at epoch 0; the broker answers with a
session id. Later requests carry (session id, epoch 1, 2, ...) and list only the
partitions that changed (plus ``forgotten_topics_data`` to drop some); the broker
answers with only the partitions that have news: records, an error, or a changed
high watermark / last stable offset / log start offset. Epoch -1 closes a session
(and asks for a sessionless full fetch).

:meth:`FetchSessionCache.new_context` holds the epoch rules (Kafka's FetchManager.newContext):
a request before v7, or at epoch -1, is sessionless (epoch -1 with a session id also closes
that session); epoch 0 closes the named session if any and opens a new one with the
request's partitions (a full fetch); any other epoch must name a cached session
(FETCH_SESSION_ID_NOT_FOUND) at the epoch it expects next (INVALID_FETCH_SESSION_EPOCH), and
the request's partitions and forgotten partitions are folded into it (an incremental fetch,
which reads every partition of the session). The :class:`FetchContext` it returns says what to
read and, once read, which partitions the response carries
(:meth:`FetchContext.update_and_generate`, Kafka's updateAndGenerateResponseData).

Cache limits are Kafka's (KIP-227, FetchSessionCache.tryEvict): at most
max.incremental.fetch.session.cache.slots sessions. When the cache is full, a new session
(of N partitions, privileged when a follower asks) takes the place of

1. the least recently used session, if it went unused for more than
   min.incremental.fetch.session.eviction.ms (stale); else
2. the least valuable *evictable* session, if the new one is worth more. Sessions are ranked
   by (privileged, partition count, id); a session is evictable by everyone once it is older
   than the eviction time (counted from its creation, at its last use), and by a privileged
   newcomer at any time if it is not privileged itself.

Otherwise no session is created (session id 0 in the response, and the client goes on with
full fetches). So a flood of new sessions can neither grow the cache nor push out the
sessions of consumers that keep fetching: a newcomer only replaces a stale session, a smaller
old one, or (a follower) a consumer's. The evictable sessions are kept in two heaps ordered by
rank, with stale entries skipped (and the heaps rebuilt when mostly stale), so each eviction
costs O(log slots).
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol import errors
from odradek.protocol.fetch_response import PartitionResult

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0


@dataclass(slots=True)
class CachedPartition:
    """What the session knows of one partition: the client's position and what we last told it."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    topic_id: Any = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: OrderedDict[tuple[str, int], CachedPartition] = field(default_factory=OrderedDict)
    last_used_ms: int = 0
    privileged: bool = False  # a follower's session (Kafka's FetchSession.privileged)
    creation_ms: int = 0
    evictable_stamp: int = 0  # which heap entries still stand for this session (FetchSessionCache.touch)

    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: the less of it, the sooner the session goes."""
        return (self.privileged, len(self.partitions), self.session_id)


class SessionError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


Partitions = list[tuple[tuple[str, int], CachedPartition]]
# one partition's read: (topic, partition), its session entry, its response (PartitionResult)
PartitionRead = tuple[tuple[str, int], CachedPartition, Any]


@dataclass(slots=True)
class FetchContext:
    """What one fetch request means for sessions (Kafka's FetchContext: its
    SessionErrorContext, SessionlessFetchContext, FullFetchContext and IncrementalFetchContext
    as one class)."""

    partitions: Partitions  # what to read, in order
    session: FetchSession | None = None  # the session the response belongs to, if any
    incremental: bool = False
    error_code: int = errors.NONE  # a session error: answered alone, with session id 0

    @property
    def response_session_id(self) -> int:
        return self.session.session_id if self.session is not None else INVALID_SESSION_ID

    def update_and_generate(self, results: list[PartitionRead]) -> list[PartitionRead]:
        """The partition results the response carries, in order: every one of a full fetch,
        only those with news in an incremental one. The session remembers what the client was
        told, and partitions that returned records move to the end of its order (fairness)."""
        session = self.session
        if session is None:  # sessionless: nothing to remember, everything answered
            return results
        order = session.partitions
        if not self.incremental:
            for key, cp, pr in results:
                has_news(cp, pr)
                if pr.records_size:
                    order.move_to_end(key)
            return results
        out = []
        for read in results:
            key, cp, pr = read
            if not has_news(cp, pr):
                continue
            out.append(read)
            if pr.records_size:
                order.move_to_end(key)
        return out


# a heap entry: (evictable key, stamp); it stands for its session while the stamp is the session's
_HeapEntry = tuple[tuple[bool, int, int], int]


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120_000) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.evictions = 0  # Kafka's IncrementalFetchSessionEvictionsPerSec, as a count
        self._stamp = 0
        self._by_all: list[_HeapEntry] = []  # sessions any newcomer may evict (older than eviction_ms)
        self._by_privileged: list[_HeapEntry] = []  # sessions a follower's new session may evict

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    @property
    def total_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached."""
        return sum(len(s.partitions) for s in self.sessions.values())

    def remove(self, session_id: int) -> None:
        s = self.sessions.pop(session_id, None)
        if s is not None:
            s.evictable_stamp = 0  # its heap entries no longer count

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used at ``now_ms``: most recently used, and filed anew in the evictable
        heaps by its current key (Kafka's FetchSessionCache.touch)."""
        session.last_used_ms = now_ms
        self.sessions.move_to_end(session.session_id)
        self._stamp += 1
        session.evictable_stamp = stamp = self._stamp
        key = session.evictable_key()
        old = now_ms - session.creation_ms > self.eviction_ms
        if not session.privileged or old:
            heapq.heappush(self._by_privileged, (key, stamp))
        if old:
            heapq.heappush(self._by_all, (key, stamp))
        if len(self._by_privileged) + len(self._by_all) > 4 * len(self.sessions) + 64:
            self._compact()

    def _valid(self, entry: _HeapEntry) -> FetchSession | None:
        s = self.sessions.get(entry[0][2])
        return s if s is not None and s.evictable_stamp == entry[1] else None

    def _compact(self) -> None:
        for heap in (self._by_all, self._by_privileged):
            heap[:] = [e for e in heap if self._valid(e) is not None]
            heapq.heapify(heap)

    def _first_evictable(self, heap: list[_HeapEntry]) -> FetchSession | None:
        while heap:
            s = self._valid(heap[0])
            if s is not None:
                return s
            heapq.heappop(heap)
        return None

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session of ``size`` partitions (Kafka's tryEvict, see the module
        docstring): True when a session was evicted."""
        if not self.sessions:
            return False
        lru = next(iter(self.sessions.values()))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            victim: FetchSession | None = lru
        else:
            victim = self._first_evictable(self._by_privileged if privileged else self._by_all)
            if victim is not None and (privileged, size, INVALID_SESSION_ID) < victim.evictable_key():
                victim = None
        if victim is None:
            return False
        self.remove(victim.session_id)
        self.evictions += 1
        return True

    def create(self, partitions: list[tuple[tuple[str, int], CachedPartition]], now_ms: int,
               privileged: bool = False) -> FetchSession | None:
        """A new session at epoch 1, or None when the cache is full and nothing may be evicted
        (Kafka's maybeCreateSession)."""
        if len(self.sessions) >= self.max_slots and not self._try_evict(privileged, len(partitions), now_ms):
            return None
        s = FetchSession(self._new_id(), 1, OrderedDict(partitions), now_ms, privileged, now_ms)
        self.sessions[s.session_id] = s
        self.touch(s, now_ms)
        return s

    def get(self, session_id: int, epoch: int) -> FetchSession:
        """The session a request names at the epoch it expects (the caller touches it once it
        folded the request in)."""
        s = self.sessions.get(session_id)
        if s is None:
            raise SessionError(errors.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != s.epoch:
            raise SessionError(errors.INVALID_FETCH_SESSION_EPOCH)
        return s

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        requested: Partitions,
        forgotten: list[tuple[str, int]],
        now_ms: int,
        privileged: bool = False,
    ) -> FetchContext:
        """The KIP-227 epoch rules (Kafka's FetchManager.newContext); see the module docstring.
        ``privileged``: the request is a follower's."""
        if version < 7 or epoch == FINAL_EPOCH:
            if version >= 7 and session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            return FetchContext(requested)
        if epoch == INITIAL_EPOCH:
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            return FetchContext(requested, self.create(requested, now_ms, privileged))
        try:
            session = self.get(session_id, epoch)
        except SessionError as e:
            return FetchContext([], error_code=e.error_code)
        apply_incremental(session, requested, forgotten)
        self.touch(session, now_ms)
        return FetchContext(list(session.partitions.items()), session, incremental=True)


def apply_incremental(
    session: FetchSession,
    updates: list[tuple[tuple[str, int], CachedPartition]],
    forgotten: list[tuple[str, int]],
) -> None:
    """Fold an incremental request into the session (positions updated, forgotten dropped)."""
    for tp, cp in updates:
        cur = session.partitions.get(tp)
        if cur is None:
            session.partitions[tp] = cp
        else:
            cur.fetch_offset = cp.fetch_offset
            cur.max_bytes = cp.max_bytes
            cur.current_leader_epoch = cp.current_leader_epoch
            cur.topic_id = cp.topic_id
    for tp in forgotten:  # after the updates, as Kafka applies them
        session.partitions.pop(tp, None)
    session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1


def has_news(cached: CachedPartition, result: PartitionResult) -> bool:
    """Whether an incremental response must include this partition (and remember what it said)."""
    changed = (
        result.error_code != errors.NONE
        or result.records_size > 0
        or result.high_watermark != cached.high_watermark
        or result.last_stable_offset != cached.last_stable_offset
        or result.log_start_offset != cached.log_start_offset
    )
    cached.high_watermark = result.high_watermark
    cached.last_stable_offset = result.last_stable_offset
    cached.log_start_offset = result.log_start_offset
    return changed
