"""Follower side of replication (Kafka's ReplicaFetcherManager / ReplicaFetcherThread):
one asyncio task per leader broker pulls every partition this broker follows from that
leader into the local logs.

For each partition the fetcher first *truncates* (KIP-101/279): it asks the leader
(OffsetForLeaderEpoch, replica id = this broker) for the end offset of the latest
leader epoch in its own leader-epoch cache and cuts its log there, so a tail written
under an old leader and never replicated is dropped rather than kept. With no epoch
known it truncates to its high watermark. Then it fetches (Fetch v12 with replica id and
current leader epoch) from its log end offset, appends the leader's batches unchanged
(append_as_follower keeps offsets, epochs and producer state), and takes the leader's
high watermark, capped at its own log end offset. The request is written by hand
(protocol.fetch_request_writer) and the response read without copying records
(protocol.fetch_response_reader: memoryview slices of the frame the socket was read into,
client.frame_reader, one write per partition);
the next fetch goes out as soon as a response is applied, and its fetch offset is what moves
the leader's high watermark and completes its acks=all produces. Over a plain TCP inter-broker
listener (``odradek.replica.fetch.splice``) partitions' records of 64 KB or more go from the socket
into the segment file with splice(2) instead (replication.splice_fetch, client.socket_wire), and
each partition is applied as soon as its records are in.

Replication quota (KIP-73, follower side): partitions listed in their topic's
follower.replication.throttled.replicas ("partition:broker" or "*") share this broker's
follower.replication.throttled.rate bytes/s; when the budget is spent those not caught up with
the leader's high watermark at their last fetch sit out fetches until it refills (their bytes
count either way, as Kafka's ReplicaFetcherThread records them).

Errors: NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH /
UNKNOWN_TOPIC_OR_PARTITION back off and retry (the controller's next LeaderAndIsr moves
the partition if leadership changed); OFFSET_OUT_OF_RANGE below the leader's log start
restarts the log there, above its end truncates again; OFFSET_MOVED_TO_TIERED_STORAGE (below a tiered
leader's local log start, KIP-405) asks the leader's earliest local offset (ListOffsets -4) and has the
remote log manager (``TierStateBuilder``) build the log's state from the remote tier at that offset
(Kafka's TierStateMachine) before fetching from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.client.async_wire import AsyncWireClient, Connect, WireError
from odradek.client.socket_wire import SocketWireClient
from odradek.clock import SYSTEM_CLOCK
from odradek.log.errors import LogError
from odradek.protocol import errors
from odradek.protocol.fetch_request_writer import FetchPartition, encode_fetch_request
from odradek.protocol.fetch_response_reader import FetchedPartition, FetchResponseError, read_fetch_response
from odradek.protocol.framing import FrameError
from odradek.protocol.records import InvalidRecordError, complete_batches_length, validate_batches
from odradek.replication import splice_fetch

if TYPE_CHECKING:
    from odradek.log.file_records import FileRecords
    from odradek.log.log import Log

log = logging.getLogger("odradek.replica.fetcher")

TP = tuple[str, int]
FETCH_VERSION = 12
EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 8  # EARLIEST_LOCAL_TIMESTAMP (-4, KIP-1005)
EARLIEST_LOCAL_TIMESTAMP = -4
_RETRIABLE = {
    errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH,
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.LEADER_NOT_AVAILABLE, errors.REQUEST_TIMED_OUT,
}


@dataclass
class FetcherConfig:
    broker_id: int
    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1 << 20
    response_max_bytes: int = 10 << 20
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    connect: Connect | None = None  # the inter-broker listener's TLS / SASL (plain TCP when None)
    splice: bool = True  # records spliced from the socket into the segment files (plain TCP only)


class ByteQuota:
    """A token bucket of ``rate()`` bytes per second (one second of burst)."""

    def __init__(self, rate: Callable[[], int]) -> None:
        self.rate = rate
        self.tokens = 0.0
        self.last = time.monotonic()

    def delay(self) -> float:
        """Seconds until throttled replicas may fetch again (0 = now)."""
        rate = self.rate()
        now = time.monotonic()
        self.tokens = min(float(rate), self.tokens + (now - self.last) * rate)
        self.last = now
        return 0.0 if self.tokens >= 0 else -self.tokens / rate

    def record(self, n: int) -> None:
        self.tokens -= n


@dataclass
class FetchState:
    leader_epoch: int
    truncating: bool = True
    retry_at: float = 0.0
    in_sync: bool = False  # Kafka's isReplicaInSync: caught up with the leader's high watermark last fetch
    tiered: bool = False  # OFFSET_MOVED_TO_TIERED_STORAGE: the state is built from the remote tier first
    tiered_log_start: int = -1  # the leader's log start offset then


class TierStateBuilder(Protocol):
    """Builds a follower's state from the remote tier (server.remote_log_manager.RemoteLogManager)."""

    async def build_remote_log_aux_state(
        self, plog: Log, leader_local_start: int, leader_epoch: int, leader_log_start: int,
    ) -> bool:
        """Kafka's TierStateMachine.buildRemoteLogAuxState: False when it cannot be done yet (retried)."""
        ...


class ReplicaFetcher:
    """Fetches the partitions led by one broker."""

    def __init__(
        self, cfg: FetcherConfig, leader_id: int, host: str, port: int, get_log: Callable[[str, int], Log | None],
        throttled: Callable[[TP], bool] = lambda tp: False, quota: ByteQuota | None = None,
    ) -> None:
        self.cfg = cfg
        self.throttled = throttled
        self.quota = quota
        self.on_storage_error: Callable[[Any, OSError], None] = lambda d, e: None
        self.on_appended: Callable[[str, int], None] = lambda topic, size: None  # ReplicationBytesIn
        self.now_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms  # the manager hands its clock on
        self.tier_state: TierStateBuilder | None = None  # tiered storage (KIP-405)
        self.leader_id = leader_id
        self.address = (host, port)
        self.get_log = get_log
        self.partitions: dict[TP, FetchState] = {}
        self._rotation = 0
        self.stopped = False
        self.wake = asyncio.Event()
        client_id, timeout_s = f"replica-fetcher-{cfg.broker_id}", cfg.socket_timeout_ms / 1000.0
        self.client: AsyncWireClient
        self._socket_client: SocketWireClient | None = None
        self.spliced_bytes = 0
        self._pipe: splice_fetch.Pipe | None = None
        if cfg.splice and cfg.connect is None and splice_fetch.available():
            self.client = self._socket_client = SocketWireClient(host, port, client_id, timeout_s)
        else:
            self.client = AsyncWireClient(host, port, client_id, timeout_s, cfg.connect)
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{leader_id}")

    def add(self, tp: TP, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)
        self.wake.set()

    def remove(self, tp: TP) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        self.stopped = True
        self.task.cancel()
        # bounded (a cancellation racing with wait_for's inner operation can be lost in 3.11;
        # the loop also checks ``stopped``)
        await asyncio.wait({self.task}, timeout=2.0)
        self._drop_connection()

    def _drop_connection(self) -> None:
        self.client.close()
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None

    # ------------------------------------------------------------------ loop
    async def _run(self) -> None:
        while not self.stopped:
            if not self.partitions:
                self.wake.clear()
                await self.wake.wait()
                continue
            now = time.monotonic()
            try:
                tiered = [tp for tp, s in self.partitions.items() if s.tiered and s.retry_at <= now]
                if tiered:
                    await self._build_tier_state(tiered)
                trunc = [tp for tp, s in self.partitions.items()
                         if s.truncating and not s.tiered and s.retry_at <= now]
                if trunc:
                    await self._truncate(trunc)
                ready = [tp for tp, s in self.partitions.items()
                         if not s.truncating and not s.tiered and s.retry_at <= now]
                if ready:
                    await self._fetch(ready)
                elif not trunc and not tiered:
                    soonest = min(s.retry_at for s in self.partitions.values())
                    self.wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wake.wait(), max(soonest - time.monotonic(), 0.01))
            except WireError as e:
                log.info("fetching from broker %d: %s; retrying in %d ms", self.leader_id, e, self.cfg.backoff_ms)
                await asyncio.sleep(self.cfg.backoff_ms / 1000.0)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d failed; retrying", self.leader_id)
                await asyncio.sleep(self.cfg.backoff_ms / 1000.0)

    def _back_off(self, tp: TP, state: FetchState) -> None:
        state.retry_at = time.monotonic() + self.cfg.backoff_ms / 1000.0

    # ------------------------------------------------------------------ tiered storage
    async def _build_tier_state(self, tps: list[TP]) -> None:
        """Kafka's TierStateMachine.start: the leader's local log start offset (ListOffsets
        EARLIEST_LOCAL_TIMESTAMP) and its epoch; the follower's leader epochs and producer state are built from
        the remote segment ending just before it; the log restarts empty there, so nothing already in the
        remote tier is fetched."""
        asks: dict[str, list[dict[str, Any]]] = {}
        for tp in tps:
            asks.setdefault(tp[0], []).append({
                "partition_index": tp[1], "current_leader_epoch": self.partitions[tp].leader_epoch,
                "timestamp": EARLIEST_LOCAL_TIMESTAMP})
        resp = await self.client.request(2, LIST_OFFSETS_VERSION, {
            "replica_id": self.cfg.broker_id, "isolation_level": 0,
            "topics": tuple({"name": t, "partitions": tuple(ps)} for t, ps in asks.items()),
        })
        for t in resp.topics:
            for p in t.partitions:
                tp = (str(t.name), int(p.partition_index))
                state = self.partitions.get(tp)
                plog = self.get_log(*tp)
                if state is None or tp not in tps or plog is None:
                    continue
                code = int(p.error_code)
                if code != errors.NONE or self.tier_state is None:
                    log.info("earliest local offset of %s-%d from broker %d: error %d; retrying",
                             tp[0], tp[1], self.leader_id, code)
                    self._back_off(tp, state)
                    continue
                local_start = int(p.offset)
                built = await self.tier_state.build_remote_log_aux_state(
                    plog, local_start, int(p.leader_epoch), state.tiered_log_start)
                if self.partitions.get(tp) is not state:
                    continue
                if built:
                    log.info("%s-%d: built the state from the remote tier; fetching from the leader's local log "
                             "start %d", tp[0], tp[1], local_start)
                    state.tiered = False
                    state.truncating = False
                else:
                    self._back_off(tp, state)

    # ------------------------------------------------------------------ truncation
    async def _truncate(self, tps: list[TP]) -> None:
        asks: dict[str, list[dict[str, Any]]] = {}
        sent: dict[TP, tuple[FetchState, int]] = {}
        for tp in tps:
            plog = self.get_log(*tp)
            state = self.partitions[tp]
            if plog is None:
                self._back_off(tp, state)
                continue
            epoch = plog.leader_epoch_cache.latest_epoch
            if epoch < 0:
                # nothing known about epochs: keep only what is known to be committed
                plog.truncate_to(plog.high_watermark)
                state.truncating = False
                continue
            asks.setdefault(tp[0], []).append(
                {"partition": tp[1], "current_leader_epoch": state.leader_epoch, "leader_epoch": epoch}
            )
            sent[tp] = (state, epoch)
        if not asks:
            return
        resp = await self.client.request(23, EPOCH_VERSION, {
            "replica_id": self.cfg.broker_id,
            "topics": tuple({"topic": t, "partitions": tuple(ps)} for t, ps in asks.items()),
        })
        for t in resp.topics:
            for p in t.partitions:
                tp = (str(t.topic), int(p.partition))
                entry = sent.get(tp)
                if entry is None or self.partitions.get(tp) is not entry[0]:
                    continue  # removed or replaced meanwhile
                state, asked = entry
                code = int(p.error_code)
                plog = self.get_log(*tp)
                if code != errors.NONE or plog is None:
                    log.info("epoch end offset of %s-%d from broker %d: error %d; retrying",
                             tp[0], tp[1], self.leader_id, code)
                    self._back_off(tp, state)
                    continue
                leader_epoch, end = int(p.leader_epoch), int(p.end_offset)
                if end < 0:
                    target = plog.high_watermark
                elif leader_epoch == asked:
                    target = min(end, plog.log_end_offset)
                else:
                    # the leader knows only an older epoch: our end for that epoch bounds it too
                    _, mine = plog.leader_epoch_cache.end_offset_for(leader_epoch, plog.log_end_offset)
                    target = min(end, mine if mine >= 0 else plog.log_end_offset, plog.log_end_offset)
                truncated = target < plog.log_end_offset
                if truncated:
                    log.info("truncating %s-%d from %d to %d (leader %d epoch %d ends at %d)",
                             tp[0], tp[1], plog.log_end_offset, target, self.leader_id, leader_epoch, end)
                    plog.truncate_to(max(target, 0))
                # the leader knew only an older epoch: ask again about our (now older) latest one,
                # until both agree on an epoch (KIP-279)
                again = end >= 0 and leader_epoch != asked and truncated and (
                    plog.leader_epoch_cache.latest_epoch not in (asked, -1))
                state.truncating = again

    # ------------------------------------------------------------------ fetch
    async def _fetch(self, tps: list[TP]) -> None:
        topics: dict[str, list[FetchPartition]] = {}
        sent: dict[TP, FetchState] = {}
        wait = -1.0  # the replication quota's delay, asked only when a throttled partition is not in sync
        self._rotation = (self._rotation + 1) % max(len(tps), 1)  # fairness under the response size limit
        tps = tps[self._rotation:] + tps[: self._rotation]
        throttled: set[TP] = set()
        for tp in tps:
            plog = self.get_log(*tp)
            state = self.partitions[tp]
            if plog is None:
                self._back_off(tp, state)
                continue
            if self.throttled(tp):
                if not state.in_sync:  # Kafka's shouldFollowerThrottle: not caught up only
                    if wait < 0:
                        wait = self.quota.delay() if self.quota is not None else 0.0
                    if wait > 0:
                        state.retry_at = time.monotonic() + wait
                        continue
                throttled.add(tp)
            topics.setdefault(tp[0], []).append((
                tp[1], state.leader_epoch, plog.log_end_offset, -1, plog.log_start_offset, self.cfg.max_bytes,
            ))
            sent[tp] = state
        if not topics:
            return
        cfg = self.cfg
        request = encode_fetch_request(
            cfg.broker_id, cfg.wait_max_ms, cfg.min_bytes, cfg.response_max_bytes, topics.items()
        )
        if self._socket_client is not None:
            await self._fetch_spliced(self._socket_client, request, sent, throttled)
            return
        frame, body = await self.client.request_frame(
            1, FETCH_VERSION, request, timeout_s=cfg.socket_timeout_ms / 1000.0 + cfg.wait_max_ms / 1000.0
        )
        try:  # records stay slices of the frame: appended from there, never copied
            resp = read_fetch_response(frame, body)
        except FetchResponseError as e:
            self.client.close()
            raise WireError(f"fetch response from broker {self.leader_id}: {e}") from None
        if int(resp.error_code) != errors.NONE:
            log.info("fetch from broker %d failed: error %d", self.leader_id, int(resp.error_code))
            for tp, state in sent.items():
                self._back_off(tp, state)
            return
        now_ms = self.now_ms()
        for t in resp.responses:
            for p in t.partitions:
                tp = (str(t.topic), int(p.partition_index))
                st = sent.get(tp)
                if st is None or self.partitions.get(tp) is not st:
                    continue
                plog = self.get_log(*tp)
                if plog is None:
                    continue
                if tp in throttled and self.quota is not None and p.records:
                    self.quota.record(len(p.records))
                self._apply(tp, st, plog, p, now_ms)

    async def _fetch_spliced(self, client: SocketWireClient, request: bytes, sent: dict[TP, FetchState],
                             throttled: set[TP]) -> None:
        """The fetch with large records spliced from the socket into the segment files
        (:mod:`odradek.replication.splice_fetch`)."""
        cfg = self.cfg
        sink = _SpliceSink(self, sent, throttled)
        try:
            client.set_deadline(cfg.socket_timeout_ms / 1000.0 + cfg.wait_max_ms / 1000.0)
            try:
                corr = await client.send_request(1, FETCH_VERSION, request)
                if self._pipe is None:
                    self._pipe = splice_fetch.Pipe()
                await splice_fetch.read_fetch_response_spliced(client, corr, self._pipe, sink)
            finally:
                client.clear_deadline()
        except (FetchResponseError, FrameError) as e:
            self._drop_connection()
            raise WireError(f"fetch response from broker {self.leader_id}: {e}") from None
        except (OSError, TimeoutError) as e:
            self._drop_connection()
            raise WireError(f"fetch from broker {self.leader_id} failed: {e!r}") from None
        except BaseException:
            self._drop_connection()  # cancelled inside a response: the stream is out of step
            raise

    def _apply(self, tp: TP, state: FetchState, plog: Log, p: FetchedPartition, now_ms: int,
               placed: tuple[FileRecords, int] | None = None) -> None:
        code = int(p.error_code)
        if code == errors.OFFSET_MOVED_TO_TIERED_STORAGE:
            state.tiered = True
            state.tiered_log_start = int(p.log_start_offset)
            return
        if code == errors.OFFSET_OUT_OF_RANGE:
            leader_start = int(p.log_start_offset)
            if plog.log_end_offset < leader_start:
                log.info("%s-%d: log end %d is below the leader's log start %d; starting there",
                         tp[0], tp[1], plog.log_end_offset, leader_start)
                plog.truncate_fully_and_start_at(leader_start)
            else:
                state.truncating = True
            return
        if code != errors.NONE:
            if code not in _RETRIABLE:
                log.warning("fetch of %s-%d from broker %d: error %d", tp[0], tp[1], self.leader_id, code)
            self._back_off(tp, state)
            return
        records = p.records
        if records is not None and len(records):
            whole = complete_batches_length(records)  # the response may end in a partial batch
            if whole < len(records):
                records = records[:whole]
        if records is not None and len(records):
            try:
                headers = validate_batches(records, check_records=False)
                plog.append_as_follower(records, headers, now_ms, placed)
                self.on_appended(tp[0], len(records))
            except (InvalidRecordError, LogError) as e:
                log.warning("cannot append what broker %d sent for %s-%d (%s); truncating and fetching again",
                            self.leader_id, tp[0], tp[1], e)
                state.truncating = True
                return
            except OSError as e:
                self.on_storage_error(plog.dir, e)
                return
        plog.update_high_watermark(min(int(p.high_watermark), plog.log_end_offset))
        state.in_sync = int(p.high_watermark) <= plog.log_end_offset
        leader_start = int(p.log_start_offset)
        if plog.log_start_offset < leader_start <= plog.high_watermark:
            plog.delete_records_before(leader_start, now_ms)


class _SpliceSink:
    """What the splice reader asks of its fetcher, for one fetch."""

    def __init__(self, fetcher: ReplicaFetcher, sent: dict[TP, FetchState], throttled: set[TP]) -> None:
        self.fetcher = fetcher
        self.sent = sent
        self.throttled = throttled
        self.failed = False

    def _wanted(self, tp: TP) -> tuple[FetchState, Log] | None:
        f = self.fetcher
        st = self.sent.get(tp)
        if self.failed or st is None or f.partitions.get(tp) is not st:
            return None
        plog = f.get_log(*tp)
        return None if plog is None else (st, plog)

    def head(self, error_code: int) -> None:
        if error_code != errors.NONE:
            f = self.fetcher
            log.info("fetch from broker %d failed: error %d", f.leader_id, error_code)
            for tp, state in self.sent.items():
                f._back_off(tp, state)
            self.failed = True

    def target(self, topic: str, partition: FetchedPartition, length: int) -> splice_fetch.SpliceTarget | None:
        tp = (topic, partition.partition_index)
        wanted = self._wanted(tp)
        if wanted is None or partition.error_code != errors.NONE:
            return None
        st, plog = wanted
        try:
            where = plog.splice_target()
        except OSError as e:  # making the segment's file failed: its log dir is failing
            self.fetcher.on_storage_error(plog.dir, e)
            return None
        if where is None:
            return None
        fr, at = where
        f = self.fetcher

        def still_valid() -> bool:
            return (not f.stopped and f.partitions.get(tp) is st and f.get_log(*tp) is plog
                    and plog.active_segment.log is fr and fr.size == at and not fr.closed)

        return splice_fetch.SpliceTarget(fr, at, still_valid)

    def apply(self, topic: str, partition: FetchedPartition, placed: tuple[FileRecords, int] | None) -> None:
        tp = (topic, partition.partition_index)
        wanted = self._wanted(tp)
        if wanted is None:
            return
        st, plog = wanted
        f = self.fetcher
        if tp in self.throttled and f.quota is not None and partition.records:
            f.quota.record(len(partition.records))
        if placed is not None and partition.records is not None:
            f.spliced_bytes += len(partition.records)
        f._apply(tp, st, plog, partition, f.now_ms(), placed)  # the time its records came in

    def write_failed(self, target: splice_fetch.SpliceTarget, error: OSError) -> None:
        f = self.fetcher
        for tp in self.sent:
            plog = f.get_log(*tp)
            if plog is not None and any(seg.log is target.file for seg in plog.segments):
                f.on_storage_error(plog.dir, error)
                return


class ReplicaFetcherManager:
    def __init__(
        self, cfg: FetcherConfig, get_log: Callable[[str, int], Log | None],
        throttled: Callable[[TP], bool] = lambda tp: False, throttle_rate: Callable[[], int] | None = None,
        now_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
    ) -> None:
        self.cfg = cfg
        self.get_log = get_log
        self.now_ms = now_ms  # the broker's clock (odradek.clock): the time fetched records are appended at
        self.throttled = throttled
        self.quota = ByteQuota(throttle_rate) if throttle_rate is not None else None
        self.on_storage_error: Callable[[Any, OSError], None] = lambda d, e: None
        self.on_appended: Callable[[str, int], None] = lambda topic, size: None  # (topic, bytes) per append
        self.tier_state: TierStateBuilder | None = None  # tiered storage (KIP-405): the remote log manager
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.leader_of: dict[TP, int] = {}
        self._retired_spliced = 0  # what fetchers since stopped spliced

    def spliced_bytes(self) -> int:
        """Record bytes spliced from the fetchers' sockets into segment files."""
        return self._retired_spliced + sum(f.spliced_bytes for f in self.fetchers.values())

    def add(self, tp: TP, leader_id: int, host: str, port: int, leader_epoch: int) -> None:
        self.remove(tp)
        f = self.fetchers.get(leader_id)
        if f is not None and f.address != (host, port):
            old = self.fetchers.pop(leader_id)
            old.stopped = True  # no more writes from its response in flight; it is cancelled next
            self._retired_spliced += old.spliced_bytes  # final: a stopped fetcher splices no more
            asyncio.get_running_loop().create_task(old.stop())
            for moved in list(old.partitions):
                self.leader_of.pop(moved, None)
            f = None
        if f is None:
            f = self.fetchers[leader_id] = ReplicaFetcher(
                self.cfg, leader_id, host, port, self.get_log, self.throttled, self.quota
            )
            f.on_storage_error = self.on_storage_error
            f.on_appended = self.on_appended
            f.now_ms = self.now_ms
            f.tier_state = self.tier_state
        f.add(tp, leader_epoch)
        self.leader_of[tp] = leader_id

    def remove(self, tp: TP) -> None:
        leader = self.leader_of.pop(tp, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(tp)

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self.leader_of.clear()
        for f in fetchers:
            await f.stop()
