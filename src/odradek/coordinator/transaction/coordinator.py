"""Transaction coordinator: Kafka's TransactionCoordinator and TransactionStateManager (with the
completion side of its TransactionMarkerChannelManager) as a pure core, written against
injected edges and no I/O:

- ``write(partition, records, on_done)`` appends ``(key, value)`` records to a
  ``__transaction_state`` partition and calls ``on_done(error_code)`` once they are replicated
  (acks=-1, as Kafka's TransactionStateManager appends) or failed; the code is Kafka's append
  error (NONE on success) and is mapped here as Kafka maps it;
- ``send_markers(producer_id, producer_epoch, result, partitions, on_done, *, coordinator_epoch,
  transactional_id)`` writes the transaction markers (WriteTxnMarkers to the leaders of
  ``partitions``) and calls ``on_done(NONE)`` once every partition has its marker or is gone
  (deleted topic); any other code makes the coordinator send again after a backoff;
- ``scheduler``: ``call_later(delay_s, fn)`` and ``now_ms()`` (the sweeps, retries, timestamps);
- ``producer_ids()``: a new producer id (Kafka's ProducerIdManager.generateProducerId), raising
  :class:`ProducerIdUnavailable` with the error to answer when none can be had now.

Every callback may come synchronously or later; the coordinator checks the coordinator epoch of
the partition when it does, as Kafka does (a partition unloaded or re-loaded meanwhile answers
NOT_COORDINATOR and drops the work).

Loading: ``begin_loading(partition, coordinator_epoch)``, then ``replay(partition, key, value)``
for each record of the partition in log order, then ``finish_loading(partition,
coordinator_epoch)``; transactions found in PrepareCommit/PrepareAbort then get their markers
and their CompleteCommit/CompleteAbort (Kafka's loadTransactionsForTxnTopicPartition).
``unload_partition`` forgets a partition whose leadership moved.

EndTxn writes PrepareCommit/PrepareAbort, answers, sends the markers, and writes
CompleteCommit/CompleteAbort, with CONCURRENT_TRANSACTIONS answered while a transition is
pending. A client at transaction version 2 (EndTxn v5, AddPartitionsToTxn v5 from a partition
leader: KIP-890 part 2) gets the epoch bumped by every EndTxn and is answered the producer id
and epoch to go on with; its retries (the epoch before the bump) are recognised, and it may
abort when no transaction is running. The timeout sweep and InitProducerId's fence end a
transaction under the finalized transaction.version (Kafka: "not from client, use server TV").
Error codes are the newest ones (PRODUCER_FENCED, KIP-588); :func:`error_for_version` maps them
down for older request versions as Kafka's KafkaApis does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from odradek.coordinator import records as offsets_records
from odradek.coordinator.transaction import records as rec
from odradek.coordinator.transaction.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from odradek.protocol import errors
from odradek.re2_syntax import Re2SyntaxError, compile_re2

log = logging.getLogger("odradek.coordinator.transaction")

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"

S = TransactionState

# api key -> first version that understands PRODUCER_FENCED (KIP-588); older ones get
# INVALID_PRODUCER_EPOCH (KafkaApis.handleInitProducerIdRequest / handleEndTxnRequest /
# handleAddPartitionsToTxnRequest / handleAddOffsetsToTxnRequest)
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
PRODUCER_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


def error_for_version(error_code: int, api_key: int, version: int) -> int:
    """The error to put in a response of ``api_key`` at ``version``: PRODUCER_FENCED becomes
    INVALID_PRODUCER_EPOCH for clients older than KIP-588."""
    since = PRODUCER_FENCED_SINCE.get(api_key)
    if error_code == errors.PRODUCER_FENCED and since is not None and version < since:
        return errors.INVALID_PRODUCER_EPOCH
    return error_code


def append_error(code: int) -> int:
    """A failed __transaction_state append as the coordinator answers it (Kafka's
    TransactionStateManager.appendTransactionToLog)."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.REQUEST_TIMED_OUT):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE):
        return errors.UNKNOWN_SERVER_ERROR
    return code


def transaction_topic_configs(min_insync_replicas: int = 2, segment_bytes: int = 104857600) -> dict[str, str]:
    """The configs __transaction_state is created with (Kafka's
    TransactionStateManager.transactionTopicConfigs): compacted, uncompressed, no unclean
    leader election; transaction.state.log.min.isr and transaction.state.log.segment.bytes."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(min_insync_replicas),
        "segment.bytes": str(segment_bytes),
    }


# ------------------------------------------------------------------------------ the edges
class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """The same shape as the group coordinator's Scheduler (make_scheduler fits both)."""

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Cancellable: ...
    def now_ms(self) -> int: ...


Records = list[tuple[bytes, bytes | None]]
Done = Callable[[int], None]


class LogWriter(Protocol):
    def __call__(self, partition: int, records: Records, on_done: Done) -> None: ...


class MarkerSender(Protocol):
    def __call__(
        self,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        partitions: frozenset[TopicPartition],
        on_done: Done,
        *,
        coordinator_epoch: int,
        transactional_id: str,
    ) -> None: ...


class ProducerIdUnavailable(Exception):
    """Raised by the producer id source when it cannot give an id now (Kafka answers
    COORDINATOR_LOAD_IN_PROGRESS while its next block of ids is being fetched)."""

    def __init__(self, error_code: int = errors.COORDINATOR_LOAD_IN_PROGRESS) -> None:
        super().__init__(error_code)
        self.error_code = error_code


ProducerIdSource = Callable[[], int]


@dataclass
class TransactionConfig:
    """Kafka's TransactionStateManagerConfig / TransactionLogConfig values the core needs."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    transaction_max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    remove_expired_transaction_cleanup_interval_ms: int = 3600000
    retry_backoff_ms: int = 100  # between marker / completion retries
    log_value_version: int = 1  # TransactionLogValue version written (Kafka: 1 with transaction.version >= 1)
    offsets_num_partitions: int = 50  # offsets.topic.num.partitions, for AddOffsetsToTxn
    transaction_version: int = 1  # the finalized transaction.version: the coordinator's own aborts follow it


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class InitProducerIdResult:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class EndTxnResult:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class DescribedTransaction:
    """One entry of a DescribeTransactions response."""

    transactional_id: str
    error_code: int
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    topics: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListTransactionsResult:
    error_code: int
    unknown_state_filters: list[str] = field(default_factory=list)
    transactions: list[ListedTransaction] = field(default_factory=list)


@dataclass
class _PartitionCache:
    """Kafka's TxnMetadataCacheEntry: the transactional ids of one partition and the
    coordinator epoch (leader epoch) under which this broker loaded it."""

    coordinator_epoch: int
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        scheduler: Scheduler,
        write: LogWriter,
        send_markers: MarkerSender,
        producer_ids: ProducerIdSource,
        group_partition_for: Callable[[str], int] | None = None,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self._write = write
        self._send_markers = send_markers
        self._producer_ids = producer_ids
        self._group_partition_for = group_partition_for or (
            lambda g: offsets_records.partition_for(g, self.config.offsets_num_partitions)
        )
        self._owned: dict[int, _PartitionCache] = {}
        self._loading: dict[int, _PartitionCache] = {}
        self._timers: list[Cancellable] = []
        self.active = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the timed-out transaction abort and transactional id expiration sweeps
        (Kafka's TransactionCoordinator.startup / TransactionStateManager.enableTransactionalIdExpiration)."""
        self.active = True
        self._every(self.config.abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out_transactions)
        self._every(self.config.remove_expired_transaction_cleanup_interval_ms, self.remove_expired_transactional_ids)

    def shutdown(self) -> None:
        self.active = False
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        self._owned.clear()
        self._loading.clear()

    def _every(self, interval_ms: int, fn: Callable[[], object]) -> None:
        slot = len(self._timers)

        def fire() -> None:
            if not self.active:
                return
            try:
                fn()
            finally:
                if self.active:
                    self._timers[slot] = self.scheduler.call_later(interval_ms / 1000.0, fire)

        self._timers.append(self.scheduler.call_later(interval_ms / 1000.0, fire))

    # ------------------------------------------------------------------ lookup
    def partition_for(self, transactional_id: str) -> int:
        return rec.partition_for(transactional_id, self.config.num_partitions)

    def coordinator_epoch(self, partition: int) -> int | None:
        cache = self._owned.get(partition)
        return cache.coordinator_epoch if cache is not None else None

    def owned_partitions(self) -> set[int]:
        return set(self._owned)

    def _lookup(self, transactional_id: str) -> tuple[int, _PartitionCache | None]:
        """Kafka's getTransactionState: the partition's cache, or COORDINATOR_LOAD_IN_PROGRESS /
        NOT_COORDINATOR."""
        p = self.partition_for(transactional_id)
        if p in self._loading:
            return errors.COORDINATOR_LOAD_IN_PROGRESS, None
        cache = self._owned.get(p)
        if cache is None:
            return errors.NOT_COORDINATOR, None
        return errors.NONE, cache

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The metadata of a transactional id this coordinator owns (for tests and tools)."""
        _, cache = self._lookup(transactional_id)
        return cache.txns.get(transactional_id) if cache is not None else None

    # ------------------------------------------------------------------ log appends
    def _record(self, transactional_id: str, t: TxnTransitMetadata) -> tuple[bytes, bytes]:
        """Kafka's TransactionLog.valueToBytes: partitions grouped by topic, null when Empty."""
        if t.txn_state == S.EMPTY and t.topic_partitions:
            raise IllegalTransitionError(f"{transactional_id}: an Empty transaction with partitions")
        parts: tuple[tuple[str, tuple[int, ...]], ...] | None = None
        if t.txn_state != S.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(t.topic_partitions):
                by_topic.setdefault(topic, []).append(p)
            parts = tuple((topic, tuple(ids)) for topic, ids in by_topic.items())
        version = self.config.log_value_version
        value = rec.TransactionLogValue(
            producer_id=t.producer_id,
            producer_epoch=t.producer_epoch,
            transaction_timeout_ms=t.txn_timeout_ms,
            transaction_status=t.txn_state.id,
            transaction_partitions=parts,
            last_update_timestamp_ms=t.txn_last_update_timestamp,
            start_timestamp_ms=t.txn_start_timestamp,
            previous_producer_id=t.prev_producer_id if version >= 1 else -1,
            next_producer_id=t.next_producer_id if version >= 1 else -1,
            client_transaction_version=t.client_transaction_version if version >= 1 else 0,
        )
        return rec.encode_key(transactional_id), rec.encode_value(value, version)

    def _append(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        callback: Done,
        retry_on: Callable[[int], bool] = lambda _: False,
    ) -> None:
        """Kafka's TransactionStateManager.appendTransactionToLog: write the transit; once
        written, complete the transition if this is still the coordinator at the same epoch
        (else NOT_COORDINATOR); on failure clear the pending state (unless the caller retries)."""
        code, cache = self._lookup(transactional_id)
        if cache is None:
            callback(code)
            return
        if transactional_id not in cache.txns or cache.coordinator_epoch != coordinator_epoch:
            callback(errors.NOT_COORDINATOR)
            return
        record = self._record(transactional_id, transit)

        def on_done(raw_code: int) -> None:
            err = append_error(raw_code)
            code2, cache2 = self._lookup(transactional_id)
            md = cache2.txns.get(transactional_id) if cache2 is not None else None
            same = cache2 is not None and md is not None and cache2.coordinator_epoch == coordinator_epoch
            if err == errors.NONE:
                if cache2 is None:
                    err = code2
                elif not same or md is None:
                    log.info("coordinator epoch of %s changed while appending %s; answering NOT_COORDINATOR",
                             transactional_id, transit)
                    err = errors.NOT_COORDINATOR
                else:
                    try:
                        md.complete_transition_to(transit)
                    except IllegalTransitionError as e:  # Kafka: fatal; here the id is kept serviceable
                        log.error("cannot apply the written transition of %s: %s", transactional_id, e)
                        md.pending_state = None
                        err = errors.UNKNOWN_SERVER_ERROR
            elif same and md is not None and not retry_on(err):
                log.info("appending %s for %s failed with %d; its pending state is reset",
                         transit.txn_state.state_name, transactional_id, err)
                md.pending_state = None
            callback(err)

        self._call_edge("write", lambda done: self._write(self.partition_for(transactional_id), [record], done), on_done)

    @staticmethod
    def _call_edge(name: str, call: Callable[[Done], None], on_done: Done) -> None:
        """Call an edge with ``on_done``, which is called once: a second call back from the
        edge is dropped. An edge that raises before calling back (with an ``error_code``
        attribute, like the group coordinator's WriteError, or not) counts as a failed call, so
        that no pending state is left behind. What the callback itself raises propagates."""
        called = False

        def done(code: int) -> None:
            nonlocal called
            if called:
                return
            called = True
            on_done(code)

        try:
            call(done)
        except Exception as e:
            if called:
                raise
            code = getattr(e, "error_code", None)
            if not isinstance(code, int):
                log.exception("%s raised instead of calling back", name)
                code = errors.UNKNOWN_SERVER_ERROR
            done(code if code != errors.NONE else errors.UNKNOWN_SERVER_ERROR)

    # ------------------------------------------------------------------ InitProducerId
    def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        respond: Callable[[InitProducerIdResult], None],
    ) -> None:
        """InitProducerId (KIP-98; KIP-360 with the current producer id and epoch, v3+).

        No transactional id: a fresh producer id at epoch 0 (idempotent producer). A known id:
        the epoch is bumped (a new producer id when it is exhausted); an ongoing transaction is
        aborted first under a bumped epoch and CONCURRENT_TRANSACTIONS answered meanwhile."""
        if transactional_id is None:
            try:
                respond(InitProducerIdResult(errors.NONE, self._producer_ids(), 0))
            except ProducerIdUnavailable as e:
                respond(InitProducerIdResult(e.error_code))
            return
        if not transactional_id:
            respond(InitProducerIdResult(errors.INVALID_REQUEST))
            return
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            respond(InitProducerIdResult(errors.INVALID_REQUEST))
            return
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            respond(InitProducerIdResult(errors.INVALID_TRANSACTION_TIMEOUT))
            return
        code, cache = self._lookup(transactional_id)
        if cache is None:
            respond(InitProducerIdResult(code))
            return
        md = cache.txns.get(transactional_id)
        if md is None:
            try:
                new_id = self._producer_ids()
            except ProducerIdUnavailable as e:
                respond(InitProducerIdResult(e.error_code))
                return
            md = TransactionMetadata(transactional_id, new_id, txn_timeout_ms=transaction_timeout_ms,
                                     txn_last_update_timestamp=self.scheduler.now_ms())
            cache.txns[transactional_id] = md
        expected = (producer_id, producer_epoch) if producer_id != NO_PRODUCER_ID else None
        coordinator_epoch = cache.coordinator_epoch
        err, transit = self._prepare_init_producer_id(md, transaction_timeout_ms, expected)
        if transit is None:
            respond(InitProducerIdResult(err))
            return
        if transit.txn_state == S.PREPARE_EPOCH_FENCE:
            def after_abort(res: EndTxnResult) -> None:
                respond(InitProducerIdResult(res.error_code if res.error_code != errors.NONE
                                             else errors.CONCURRENT_TRANSACTIONS))

            self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                  TransactionResult.ABORT, False, after_abort)
            return

        def after_write(error: int) -> None:
            if error == errors.NONE:
                log.info("initialized transactional id %s with producer id %d and epoch %d on %s-%d",
                         transactional_id, transit.producer_id, transit.producer_epoch, TRANSACTION_STATE_TOPIC,
                         self.partition_for(transactional_id))
                respond(InitProducerIdResult(errors.NONE, transit.producer_id, transit.producer_epoch))
            else:
                respond(InitProducerIdResult(error))

        self._append(transactional_id, coordinator_epoch, transit, after_write)

    def _prepare_init_producer_id(
        self, md: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None
    ) -> tuple[int, TxnTransitMetadata | None]:
        """Kafka's TransactionCoordinator.prepareInitProducerIdTransit."""
        if md.pending_transition_in_progress:
            return errors.CONCURRENT_TRANSACTIONS, None
        if expected is not None:
            exp_id, exp_epoch = expected
            valid = (md.producer_epoch == NO_PRODUCER_EPOCH or exp_id == md.producer_id
                     or (exp_id == md.previous_producer_id and is_epoch_exhausted(exp_epoch)))
            if not valid:
                return errors.PRODUCER_FENCED, None
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return errors.CONCURRENT_TRANSACTIONS, None
        now = self.scheduler.now_ms()
        if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                try:
                    new_id = self._producer_ids()
                except ProducerIdUnavailable as e:
                    return e.error_code, None
                log.info("producer epochs of producer id %d are exhausted; %s moves to producer id %d",
                         md.producer_id, md.transactional_id, new_id)
                return errors.NONE, md.prepare_producer_id_rotation(new_id, timeout_ms, now, expected is not None)
            transit = md.prepare_incr_producer_epoch(timeout_ms, expected[1] if expected else None, now)
            if transit is None:
                log.info("expected producer epoch %s of %s is neither the current %d nor the last %d: fenced",
                         expected, md.transactional_id, md.producer_epoch, md.last_producer_epoch)
                return errors.PRODUCER_FENCED, None
            return errors.NONE, transit
        if md.state == S.ONGOING:
            # abort the ongoing transaction under a bumped epoch that is never returned; the
            # client retries and bumps again (rotating the producer id if that exhausts it)
            return errors.NONE, md.prepare_fence_producer_epoch()
        log.error("transactional id %s found in state %s, which it should never be in",
                  md.transactional_id, md.state.state_name)
        return errors.UNKNOWN_SERVER_ERROR, None

    # ------------------------------------------------------------------ AddPartitionsToTxn
    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        respond: Done,
        client_transaction_version: int = 0,
    ) -> None:
        """AddPartitionsToTxn (and AddOffsetsToTxn): the partitions join the transaction, which
        starts (Ongoing) if it was not running. ``client_transaction_version`` 2 comes from a
        partition leader adding a partition for a Produce v12 / TxnOffsetCommit v5 (KIP-890
        part 2); it is written with the transaction (Kafka's prepareAddPartitions)."""
        parts = frozenset(partitions)
        if not transactional_id:
            respond(errors.INVALID_REQUEST)
            return
        code, cache = self._lookup(transactional_id)
        if cache is None:
            respond(code)
            return
        md = cache.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            respond(errors.INVALID_PRODUCER_ID_MAPPING)
        elif md.producer_epoch != producer_epoch:
            respond(errors.PRODUCER_FENCED)
        elif md.pending_transition_in_progress or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            respond(errors.CONCURRENT_TRANSACTIONS)
        elif md.state == S.ONGOING and parts <= md.topic_partitions:
            respond(errors.NONE)  # already in the transaction: nothing to write
        else:
            transit = md.prepare_add_partitions(parts, self.scheduler.now_ms(), client_transaction_version)
            self._append(transactional_id, cache.coordinator_epoch, transit, respond)

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, respond: Done
    ) -> None:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction
        (KafkaApis.handleAddOffsetsToTxnRequest)."""
        tp = (OFFSETS_TOPIC, self._group_partition_for(group_id))
        self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], respond)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4 with VerifyOnly (KIP-890 part 1): whether the partitions are
        in the transaction, asked by a partition leader before it appends transactional data
        (TRANSACTION_ABORTABLE for one that is not). Nothing is written."""
        parts = set(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, errors.INVALID_REQUEST)
        code, cache = self._lookup(transactional_id)
        if cache is None:
            return dict.fromkeys(parts, code)
        md = cache.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return dict.fromkeys(parts, errors.INVALID_PRODUCER_ID_MAPPING)
        if md.producer_epoch != producer_epoch:
            return dict.fromkeys(parts, errors.PRODUCER_FENCED)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(parts, errors.CONCURRENT_TRANSACTIONS)
        return {tp: errors.NONE if tp in md.topic_partitions else errors.TRANSACTION_ABORTABLE for tp in parts}

    # ------------------------------------------------------------------ EndTxn
    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        respond: Callable[[EndTxnResult], None],
        client_transaction_version: int = 0,
    ) -> None:
        """EndTxn: PrepareCommit/PrepareAbort is written, the client answered, the markers sent,
        then CompleteCommit/CompleteAbort written. A retry after completion with the same result
        answers NONE; with the other result INVALID_TXN_STATE; while the markers are being
        written CONCURRENT_TRANSACTIONS. ``client_transaction_version`` 2 (EndTxn v5) is
        KIP-890 part 2's transaction version (:meth:`_end_transaction`)."""
        result = TransactionResult.COMMIT if commit else TransactionResult.ABORT
        self._end_transaction(transactional_id, producer_id, producer_epoch, result, True, respond,
                              client_transaction_version)

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        from_client: bool,
        respond: Callable[[EndTxnResult], None],
        client_transaction_version: int | None = None,
    ) -> None:
        """Kafka's TransactionCoordinator.endTransaction, one path for both transaction versions.
        ``client_transaction_version`` is the request's (EndTxn v5: 2); None for the
        coordinator's own aborts (timeout, fence), which take the finalized transaction.version,
        as Kafka's do ("not from client, use server TV").

        Transaction version 2 (KIP-890 part 2) differs in three places: which epochs a request
        may carry (:meth:`_refuse_end_transaction`), PrepareX bumping the epoch
        (``prepare_abort_or_commit``), and, when that bump exhausts the epochs, the next producer
        id allocated now and taken by CompleteX. It also lets a client abort when no transaction
        runs (from Empty / CompleteX: PrepareAbort and CompleteAbort with no markers)."""
        if not transactional_id:
            respond(EndTxnResult(errors.INVALID_REQUEST))
            return
        code, cache = self._lookup(transactional_id)
        if cache is None:
            respond(EndTxnResult(code))
            return
        md = cache.txns.get(transactional_id)
        if md is None:
            respond(EndTxnResult(errors.INVALID_PRODUCER_ID_MAPPING))
            return
        tv = self.config.transaction_version if client_transaction_version is None else client_transaction_version
        bump = supports_epoch_bump(tv)
        coordinator_epoch = cache.coordinator_epoch
        # the coordinator's abort of a transaction it fenced (timeout sweep, InitProducerId)
        fencing = md.pending_state == S.PREPARE_EPOCH_FENCE and not from_client
        refusal = self._refuse_end_transaction(md, producer_id, producer_epoch, result, from_client, fencing, bump)
        if refusal is not None:
            respond(refusal)
            return
        if fencing:
            # the fence goes on to PrepareAbort under the fenced epoch (it is never written
            # itself); with transaction version 2, PrepareAbort bumps it again
            md.pending_state = None
            md.producer_epoch = producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        next_producer_id = NO_PRODUCER_ID
        if bump and is_epoch_exhausted(md.producer_epoch):
            try:
                next_producer_id = self._producer_ids()
            except ProducerIdUnavailable as e:
                if fencing:
                    md.has_failed_epoch_fence = True
                respond(EndTxnResult(e.error_code))
                return
            log.info("producer epochs of producer id %d are exhausted; %s moves to producer id %d when its "
                     "transaction completes", md.producer_id, transactional_id, next_producer_id)
        next_state = S.PREPARE_COMMIT if result == TransactionResult.COMMIT else S.PREPARE_ABORT
        # past the checks, a state other than Ongoing is transaction version 2's abort of no transaction
        transit = md.prepare_abort_or_commit(next_state, self.scheduler.now_ms(), tv, next_producer_id,
                                             no_partition_added=md.state != S.ONGOING)

        def after_prepare(error: int) -> None:
            if error == errors.NONE:
                self._after_prepare_written(transactional_id, coordinator_epoch, producer_id, producer_epoch,
                                            result, respond)
                return
            current = self._current(transactional_id, coordinator_epoch) if fencing else None
            if current is not None:
                # the fenced epoch stays (never returned); the next fence does not bump again
                current.has_failed_epoch_fence = True
                log.warning("writing the epoch fence of %s failed with %d; its epoch stays %d",
                            transactional_id, error, current.producer_epoch)
            respond(EndTxnResult(error))

        self._append(transactional_id, coordinator_epoch, transit, after_prepare)

    @staticmethod
    def _refuse_end_transaction(
        md: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        from_client: bool,
        fencing: bool,
        bump: bool,
    ) -> EndTxnResult | None:
        """The answer of an EndTxn that writes nothing (an error, or NONE for the retry of a
        completed one), or None when PrepareX is to be written (Kafka's checks in endTransaction).

        Transaction version 1 wants the client's epoch to be the current one (the coordinator's
        own abort carries the fence's, which may be higher). Version 2 (KIP-890 part 2, with
        ``bump``; not under a fence, whose epoch bumping is its own) goes by the state: the
        current epoch while a transaction runs or none does; while the markers are written, the
        epoch before the bump (a retry: ``md`` at epoch + 1); once done, either, or the last
        epoch of the previous producer id when the bump exhausted it (a retry after an overflow:
        ``md`` at epoch 0 of the next producer id). Only a retry is answered NONE after
        completion; any other abort there starts and ends an empty transaction."""
        commit = result == TransactionResult.COMMIT
        state = md.state
        v2 = bump and not fencing
        retry_on_overflow = (v2 and md.previous_producer_id == producer_id and md.producer_epoch == 0
                             and is_epoch_exhausted(producer_epoch))
        retry_on_bump = v2 and md.producer_id == producer_id and md.producer_epoch == producer_epoch + 1
        is_retry = retry_on_bump or retry_on_overflow
        if not v2:
            valid_epoch = (not from_client or producer_epoch == md.producer_epoch) and producer_epoch >= md.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = is_retry or producer_epoch == md.producer_epoch
        else:
            valid_epoch = producer_epoch == md.producer_epoch
        if md.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnResult(errors.PRODUCER_FENCED)
        if md.pending_transition_in_progress and not fencing:
            return EndTxnResult(errors.CONCURRENT_TRANSACTIONS)
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            same = commit == (state == S.COMPLETE_COMMIT)
            if same and (is_retry or not bump):  # a retry of a completed EndTxn
                return EndTxnResult(errors.NONE, md.producer_id, md.producer_epoch)
            if commit or is_retry or not bump:
                return EndTxnResult(errors.INVALID_TXN_STATE)
        elif state == S.EMPTY:
            if commit or not bump:
                return EndTxnResult(errors.INVALID_TXN_STATE)
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            same = commit == (state == S.PREPARE_COMMIT)
            return EndTxnResult(errors.CONCURRENT_TRANSACTIONS if same else errors.INVALID_TXN_STATE)
        elif state != S.ONGOING:
            log.error("transactional id %s found in state %s, which it should never be in",
                      md.transactional_id, state.state_name)
            return EndTxnResult(errors.UNKNOWN_SERVER_ERROR)
        if fencing and commit:  # a fence ends in PrepareAbort only
            return EndTxnResult(errors.INVALID_TXN_STATE)
        return None

    def _current(self, transactional_id: str, coordinator_epoch: int) -> TransactionMetadata | None:
        """The metadata of ``transactional_id`` if this broker still coordinates it at
        ``coordinator_epoch``."""
        _, cache = self._lookup(transactional_id)
        if cache is None or cache.coordinator_epoch != coordinator_epoch:
            return None
        return cache.txns.get(transactional_id)

    def _after_prepare_written(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        respond: Callable[[EndTxnResult], None],
    ) -> None:
        """PrepareX is written: check again the request's producer id and epoch (Kafka's
        sendTxnMarkersCallback; with transaction version 2 PrepareX carries that epoch bumped,
        Kafka's endTxnEpochBumped), answer, send markers."""
        code, cache = self._lookup(transactional_id)
        if cache is None:
            respond(EndTxnResult(code))
            return
        md = cache.txns.get(transactional_id)
        if md is None or cache.coordinator_epoch != coordinator_epoch:
            respond(EndTxnResult(errors.NOT_COORDINATOR))
            return
        expected = S.PREPARE_COMMIT if result == TransactionResult.COMMIT else S.PREPARE_ABORT
        if md.producer_id != producer_id:
            err = errors.INVALID_PRODUCER_ID_MAPPING
        elif md.producer_epoch != producer_epoch and not (
                supports_epoch_bump(md.client_transaction_version) and md.producer_epoch == producer_epoch + 1):
            err = errors.PRODUCER_FENCED
        elif md.pending_transition_in_progress:
            err = errors.CONCURRENT_TRANSACTIONS
        elif md.state != expected:
            err = errors.INVALID_TXN_STATE
        else:
            complete = md.prepare_complete(self.scheduler.now_ms())
            # TV2: the producer id and epoch the client goes on with (after an overflow, the next id)
            respond(EndTxnResult(errors.NONE, complete.producer_id, complete.producer_epoch))
            self._markers(transactional_id, coordinator_epoch, result, md, complete)
            return
        log.info("not sending the markers of %s after writing %s: error %d", transactional_id,
                 expected.state_name, err)
        respond(EndTxnResult(err))

    # ------------------------------------------------------------------ markers and completion
    def _still_completing(self, transactional_id: str, coordinator_epoch: int, md: TransactionMetadata,
                          complete: TxnTransitMetadata) -> bool:
        return self._current(transactional_id, coordinator_epoch) is md and md.pending_state == complete.txn_state

    def _markers(self, transactional_id: str, coordinator_epoch: int, result: TransactionResult,
                 md: TransactionMetadata, complete: TxnTransitMetadata) -> None:
        """Kafka's TransactionMarkerChannelManager.addTxnMarkersToSend: markers to every partition
        of the transaction, then the completion record."""
        partitions = frozenset(md.topic_partitions)
        if not partitions:
            self._write_completion(transactional_id, coordinator_epoch, md, complete)
            return

        def on_done(code: int) -> None:
            if not self._still_completing(transactional_id, coordinator_epoch, md, complete):
                log.info("dropping the markers of %s: no longer completing it here", transactional_id)
                return
            if code == errors.NONE:
                self._write_completion(transactional_id, coordinator_epoch, md, complete)
                return
            log.info("writing the %s markers of %s failed with %d; retrying", result.name, transactional_id, code)
            self._retry(lambda: self._markers(transactional_id, coordinator_epoch, result, md, complete),
                        transactional_id, coordinator_epoch, md, complete)

        self._call_edge("send_markers", lambda done: self._send_markers(
            md.producer_id, md.producer_epoch, result, partitions, done,
            coordinator_epoch=coordinator_epoch, transactional_id=transactional_id), on_done)

    def _write_completion(self, transactional_id: str, coordinator_epoch: int, md: TransactionMetadata,
                          complete: TxnTransitMetadata) -> None:
        """Kafka's TransactionMarkerChannelManager.tryAppendToLog: CompleteCommit/CompleteAbort,
        retried until written or this broker no longer coordinates the transaction. (Kafka treats
        an error other than COORDINATOR_NOT_AVAILABLE as fatal; it is retried here too.)"""
        def no_retry(err: int) -> bool:
            return err in (errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS)

        def after(err: int) -> None:
            if err == errors.NONE:
                log.debug("completed the transaction of %s: %s", transactional_id, complete.txn_state.state_name)
            elif no_retry(err):
                log.info("no longer the coordinator of %s; not writing its completion", transactional_id)
            else:
                log.info("writing the completion of %s failed with %d; retrying", transactional_id, err)
                self._retry(lambda: self._write_completion(transactional_id, coordinator_epoch, md, complete),
                            transactional_id, coordinator_epoch, md, complete)

        self._append(transactional_id, coordinator_epoch, complete, after, lambda e: not no_retry(e))

    def _retry(self, fn: Callable[[], None], transactional_id: str, coordinator_epoch: int,
               md: TransactionMetadata, complete: TxnTransitMetadata) -> None:
        def fire() -> None:
            if self._still_completing(transactional_id, coordinator_epoch, md, complete):
                fn()

        self.scheduler.call_later(self.config.retry_backoff_ms / 1000.0, fire)

    # ------------------------------------------------------------------ sweeps
    def abort_timed_out_transactions(self) -> int:
        """Abort, under a bumped epoch, every Ongoing transaction older than its timeout
        (Kafka's abortTimedOutTransactions, every
        transaction.abort.timed.out.transaction.cleanup.interval.ms). Returns how many."""
        now = self.scheduler.now_ms()
        timed_out = [
            md for cache in self._owned.values() for md in cache.txns.values()
            if not md.pending_transition_in_progress and md.state == S.ONGOING
            and md.txn_start_timestamp + md.txn_timeout_ms < now
        ]
        for md in timed_out:
            tid = md.transactional_id
            fence = md.prepare_fence_producer_epoch()
            log.info("aborting the transaction of %s (producer id %d): it timed out after %d ms",
                     tid, md.producer_id, md.txn_timeout_ms)

            def done(res: EndTxnResult, tid: str = tid) -> None:
                if res.error_code == errors.NONE:
                    log.info("rolled back the timed-out transaction of %s", tid)
                elif res.error_code in (errors.INVALID_PRODUCER_ID_MAPPING, errors.PRODUCER_FENCED,
                                        errors.CONCURRENT_TRANSACTIONS):
                    log.debug("rollback of the timed-out transaction of %s cancelled: %d", tid, res.error_code)
                else:
                    log.warning("rollback of the timed-out transaction of %s failed: %d", tid, res.error_code)

            self._end_transaction(tid, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT, False, done)
        return len(timed_out)

    def remove_expired_transactional_ids(self) -> int:
        """Expire the transactional ids idle for transactional.id.expiration.ms in a state that
        allows it: Dead is prepared, tombstones written, and the ids forgotten once written
        (Kafka's TransactionStateManager.removeExpiredTransactionalIds). Returns how many."""
        now = self.scheduler.now_ms()
        total = 0
        for partition, cache in list(self._owned.items()):
            expired = [
                (md, md.prepare_dead()) for md in list(cache.txns.values())
                if md.pending_state is None and md.state.expiration_allowed
                and md.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms
            ]
            if not expired:
                continue
            total += len(expired)
            self._write_tombstones(partition, cache.coordinator_epoch, expired)
        return total

    def _write_tombstones(self, partition: int, coordinator_epoch: int,
                          expired: list[tuple[TransactionMetadata, TxnTransitMetadata]]) -> None:
        records: Records = [(rec.encode_key(md.transactional_id), None) for md, _ in expired]

        def on_done(raw_code: int) -> None:
            err = append_error(raw_code)
            cache = self._owned.get(partition)
            if cache is None:
                return
            for md, dead in expired:
                tid = md.transactional_id
                if cache.txns.get(tid) is not md:
                    continue
                if (cache.coordinator_epoch == coordinator_epoch and md.pending_state == S.DEAD
                        and md.producer_epoch == dead.producer_epoch and err == errors.NONE):
                    del cache.txns[tid]
                    log.info("transactional id %s expired", tid)
                else:
                    log.warning("could not remove expired transactional id %s: tombstone error %d", tid, err)
                    md.pending_state = None

        self._call_edge("write", lambda done: self._write(partition, records, done), on_done)

    # ------------------------------------------------------------------ describe / list
    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[DescribedTransaction]:
        """DescribeTransactions (KIP-664), one entry per id."""
        return [self._describe(tid) for tid in transactional_ids]

    def _describe(self, tid: str) -> DescribedTransaction:
        if not self.active:
            return DescribedTransaction(tid, errors.COORDINATOR_NOT_AVAILABLE)
        if not tid:
            return DescribedTransaction(tid, errors.INVALID_REQUEST)
        code, cache = self._lookup(tid)
        if cache is None:
            return DescribedTransaction(tid, code)
        md = cache.txns.get(tid)
        if md is None or md.state == S.DEAD:
            return DescribedTransaction(tid, errors.TRANSACTIONAL_ID_NOT_FOUND)
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(md.topic_partitions):
            topics.setdefault(topic, []).append(p)
        return DescribedTransaction(tid, errors.NONE, md.state.state_name, md.producer_id, md.producer_epoch,
                                    md.txn_timeout_ms, md.txn_start_timestamp, topics)

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> ListTransactionsResult:
        """ListTransactions (KIP-664; the duration filter of v1, KIP-994; the transactional id
        pattern of v2, KIP-1152): by state names, by producer ids, transactions running longer
        than ``duration_filter_ms`` when >= 0, and transactional ids the whole of which match
        ``transactional_id_pattern`` (an RE2 regular expression; null or empty: all), as Kafka's
        TransactionStateManager.listTransactionStates. An invalid pattern is INVALID_REGULAR_EXPRESSION."""
        if not self.active:
            return ListTransactionsResult(errors.COORDINATOR_NOT_AVAILABLE)
        if self._loading:
            return ListTransactionsResult(errors.COORDINATOR_LOAD_IN_PROGRESS)
        pattern = None
        if transactional_id_pattern:
            try:
                pattern = compile_re2(transactional_id_pattern)
            except Re2SyntaxError:
                return ListTransactionsResult(errors.INVALID_REGULAR_EXPRESSION)
        names = list(state_filters)
        states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in names:
            s = TransactionState.from_name(name)
            if s is None:
                unknown.append(name)
            else:
                states.add(s)
        pids = set(producer_id_filters)
        now = self.scheduler.now_ms()
        out: list[ListedTransaction] = []
        for cache in self._owned.values():
            for md in cache.txns.values():
                if md.state == S.DEAD:
                    continue
                if pids and md.producer_id not in pids:
                    continue
                if names and md.state not in states:
                    continue
                if duration_filter_ms >= 0 and now - md.txn_start_timestamp <= duration_filter_ms:
                    continue
                if pattern is not None and pattern.fullmatch(md.transactional_id) is None:
                    continue
                out.append(ListedTransaction(md.transactional_id, md.producer_id, md.state.state_name))
        return ListTransactionsResult(errors.NONE, unknown, out)

    # ------------------------------------------------------------------ loading
    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became the leader of ``partition`` at ``coordinator_epoch``; its requests
        answer COORDINATOR_LOAD_IN_PROGRESS until :meth:`finish_loading`."""
        self._owned.pop(partition, None)
        self._loading[partition] = _PartitionCache(coordinator_epoch)

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> bool:
        """Apply one record of a partition being loaded, in log order (Kafka's
        loadTransactionMetadata). A malformed record, or one in a state Kafka never writes
        (Dead, PrepareEpochFence), is logged and skipped; False then."""
        cache = self._loading.get(partition)
        if cache is None:
            raise RuntimeError(f"{TRANSACTION_STATE_TOPIC}-{partition} is not being loaded")
        if key is None:
            log.warning("skipping a record without key in %s-%d", TRANSACTION_STATE_TOPIC, partition)
            return False
        try:
            tid = rec.decode_key(key)
            v = rec.decode_value(value)
        except rec.TransactionLogFormatError as e:
            log.warning("skipping an unreadable record of %s-%d: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return False
        if v is None:
            cache.txns.pop(tid, None)
            return True
        state = TransactionState.from_id(v.transaction_status)
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            # Kafka never writes these (Dead ends in a tombstone, the fence goes on to
            # PrepareAbort); loading one would leave the id stuck, so the record is skipped
            log.warning("skipping a %s record for %s in %s-%d: that state is never written",
                        state.state_name, tid, TRANSACTION_STATE_TOPIC, partition)
            return False
        cache.txns[tid] = TransactionMetadata(
            tid, v.producer_id, v.previous_producer_id, v.next_producer_id, v.producer_epoch, NO_PRODUCER_EPOCH,
            v.transaction_timeout_ms, state, set(v.partitions()) if state != S.EMPTY else set(),
            v.start_timestamp_ms, v.last_update_timestamp_ms, v.client_transaction_version,
        )
        return True

    def finish_loading(self, partition: int, coordinator_epoch: int) -> int:
        """The partition is loaded: serve it, and complete the transactions found in
        PrepareCommit/PrepareAbort (markers, then CompleteX). Returns how many ids it holds."""
        cache = self._loading.get(partition)
        if cache is None or cache.coordinator_epoch != coordinator_epoch:
            return 0
        del self._loading[partition]
        self._owned[partition] = cache
        now = self.scheduler.now_ms()
        pending: list[tuple[str, TransactionResult, TransactionMetadata, TxnTransitMetadata]] = []
        for tid, md in cache.txns.items():
            if md.state == S.PREPARE_COMMIT:
                pending.append((tid, TransactionResult.COMMIT, md, md.prepare_complete(now)))
            elif md.state == S.PREPARE_ABORT:
                pending.append((tid, TransactionResult.ABORT, md, md.prepare_complete(now)))
        log.info("loaded %d transactional id(s) of %s-%d at coordinator epoch %d; %d to complete",
                 len(cache.txns), TRANSACTION_STATE_TOPIC, partition, coordinator_epoch, len(pending))
        for tid, result, md, complete in pending:
            self._markers(tid, coordinator_epoch, result, md, complete)
        return len(cache.txns)

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> int:
        """This broker no longer leads ``partition``: forget its transactional ids (their
        requests answer NOT_COORDINATOR; writes and markers in flight are dropped when they
        report back). Returns how many ids were dropped."""
        loading = self._loading.get(partition)
        if loading is not None and (coordinator_epoch is None or loading.coordinator_epoch == coordinator_epoch):
            del self._loading[partition]
        cache = self._owned.pop(partition, None)
        return len(cache.txns) if cache is not None else 0
