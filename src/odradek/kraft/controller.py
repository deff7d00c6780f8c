"""An Odradek KRaft controller process (``process.roles=controller``): a voter of a static quorum that elects
a leader and replicates ``__cluster_metadata-0`` over the network (KIP-595), Kafka's ControllerServer with
its KafkaRaftManager, narrowed to the quorum.

- :class:`ControllerConfig` reads Kafka's settings: ``node.id``, ``controller.quorum.voters``
  (``id@host:port,...``), ``controller.listener.names``, ``listeners``, ``metadata.log.dir`` (or the
  first of ``log.dirs``), the ``controller.quorum.*`` timers (QuorumConfig) and
  ``metadata.max.idle.interval.ms``. Any other setting given is named in one start-up warning as not
  implemented by the controller and ignored.
- The metadata directory must have been formatted by ``odradek storage format`` (Kafka's messages:
  ``No `meta.properties` found in DIR (have you run `kafka-storage.sh` to format the directory?)``), for
  this node and one cluster across ``log.dirs`` and ``metadata.log.dir``.
- :class:`QuorumController` drives :class:`~odradek.raft.client.RaftReplica` (the pure KIP-595 core) with
  ``__cluster_metadata-0`` (:class:`~odradek.kraft.raft_log.MetadataRaftLog`) as its log and the
  ``quorum-state`` file (:class:`~odradek.raft.quorum_store.FileQuorumStateStore`): every request and
  response is handed to it, its effects carried out (messages sent, the high watermark written to the log),
  and its next tick scheduled at ``next_deadline_ms()``. Requests to the other voters go out through
  :class:`~odradek.client.async_wire.AsyncWireClient`, one connection per voter.
- The controller listener answers ApiVersions, Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of
  ``__cluster_metadata-0``, DescribeQuorum (KIP-595/KIP-853: the leader's view of the voters, and their
  endpoints) and DescribeCluster with the controllers as nodes (KIP-919, ``--bootstrap-controller``);
  frames are read by :class:`~odradek.protocol.framing.FrameDecoder` and bodies decoded with kio
  (:mod:`odradek.protocol.codec`).
- The leader appends a NoOpRecord every ``metadata.max.idle.interval.ms`` (Kafka's QuorumController
  ``maybeScheduleNextWriteNoOpRecord``, default 500 ms), so the log grows and the high watermark moves.

- The metadata state machine (:mod:`odradek.kraft.state_machine`, Kafka's QuorumController for brokers): the
  bootstrap snapshot, then every batch below the high watermark, applied to a MetadataImage on every voter.
  The active controller writes the bootstrap records on its first activation over an empty log
  (ActivationRecordsGenerator: a KIP-868 transaction with the FeatureLevelRecords and ZkMigrationState NONE),
  answers BrokerRegistration (62), BrokerHeartbeat (63), AllocateProducerIds (67), and the admin requests
  CreateTopics (19), DeleteTopics (20), CreatePartitions (37) and IncrementalAlterConfigs (44, TOPIC
  resources), sent to the controller listener or forwarded by a broker inside an Envelope (58, KIP-590: a
  KRaft broker forwards them all to the active controller), each once its records commit, and fences the
  brokers whose ``broker.session.timeout.ms`` (9000) passes without heartbeat. ``delete.topic.enable``
  (true) refuses DeleteTopics when false. Brokers fetch ``__cluster_metadata-0`` as observers (any replica
  id that is not a voter).

- Snapshots (KIP-630): every controller writes a ``.checkpoint`` of its committed image (Kafka's
  SnapshotGenerator) once ``metadata.log.max.record.bytes.between.snapshots`` bytes were appended since the
  last one, or ``metadata.log.max.snapshot.interval.ms`` passed with something appended; it then deletes
  the snapshots and log segments a newer snapshot covers per ``metadata.max.retention.bytes`` / ``.ms``
  (KafkaMetadataLog.cleanSnapshots). On start it loads the latest snapshot and replays the log after it.
  The leader serves FetchSnapshot (59); a follower behind the leader's log start fetches the latest
  snapshot, installs it and reloads its state machine from it. DescribeQuorum lists the observers.

Not yet: forwarded requests other than those four, configs of resources other than topics, dynamic
voters (KIP-853), security on the controller listener (PLAINTEXT only).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.client.async_wire import AsyncWireClient, WireError
from odradek.config import ConfigError, parse_listeners
from odradek.kraft import wire
from odradek.kraft.raft_log import MetadataRaftLog
from odradek.kraft.state_machine import (
    DEFAULT_SESSION_TIMEOUT_MS,
    PRODUCER_ID_BLOCK_SIZE,
    ZERO_UUID,
    AlterConfig,
    AlterResource,
    AlterResult,
    ControllerError,
    ControllerState,
    DeleteResult,
    Heartbeat,
    NewPartitions,
    NewTopic,
    PartitionsResult,
    Registration,
    TopicResult,
)
from odradek.metadata.batches import MetadataBatch
from odradek.metadata.log_store import (
    BOOTSTRAP_SNAPSHOT,
    PARTITION_DIR,
    MetadataLog,
    MetadataLogConfig,
    SnapshotId,
    image_of_snapshot,
    read_snapshot_file,
)
from odradek.metadata.records import (
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerFeature,
    EndTransactionRecord,
    NoOpRecord,
    RecordAndVersion,
    ZkMigrationStateRecord,
    encode_record,
)
from odradek.protocol import codec, errors
from odradek.protocol.framing import (
    FrameDecoder,
    FrameError,
    parse_request_header,
    peek_header,
    response_header,
)
from odradek.raft.client import QuorumConfig, RaftReplica
from odradek.raft.messages import (
    BeginQuorumEpochRequest,
    Effect,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    HighWatermarkChanged,
    LeaderChanged,
    Received,
    Send,
    SnapshotInstalled,
    VoteRequest,
)
from odradek.raft.quorum_store import DEFAULT_FILE_NAME, FileQuorumStateStore, parse_kafka_uuid
from odradek.server import meta_properties as mp

log = logging.getLogger("odradek.kraft.controller")

API_VERSIONS, DESCRIBE_QUORUM, DESCRIBE_CLUSTER = 18, 55, 60
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 37, 44
ENVELOPE, BROKER_REGISTRATION, BROKER_HEARTBEAT, ALLOCATE_PRODUCER_IDS = 58, 62, 63, 67
# what the controller listener answers: (api key, min version, max version)
SUPPORTED_APIS: tuple[tuple[int, int, int], ...] = (
    (wire.FETCH, 17, 17), (API_VERSIONS, 0, 4), (wire.VOTE, 2, 2), (wire.BEGIN_QUORUM_EPOCH, 1, 1),
    (wire.END_QUORUM_EPOCH, 1, 1), (DESCRIBE_QUORUM, 0, 2), (DESCRIBE_CLUSTER, 0, 2),
    (CREATE_TOPICS, 2, 7), (DELETE_TOPICS, 1, 6), (CREATE_PARTITIONS, 0, 3), (INCREMENTAL_ALTER_CONFIGS, 0, 1),
    (ENVELOPE, 0, 0), (BROKER_REGISTRATION, 0, 4), (BROKER_HEARTBEAT, 0, 2), (ALLOCATE_PRODUCER_IDS, 0, 0),
    (wire.FETCH_SNAPSHOT, 0, 1),
)
# the admin requests a broker forwards in an Envelope (KIP-590), also answered on the controller listener
ADMIN_APIS = frozenset({CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS})
MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes

# what the controller reads; any other setting given is named in the start-up warning
IMPLEMENTED = frozenset({
    "process.roles", "node.id", "controller.quorum.voters", "controller.listener.names", "listeners",
    "listener.security.protocol.map", "metadata.log.dir", "log.dirs", "log.dir", "metadata.max.idle.interval.ms",
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms", "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms", "metadata.log.segment.bytes", "metadata.log.segment.ms",
    "broker.session.timeout.ms", "num.partitions", "default.replication.factor", "delete.topic.enable",
    "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
    "metadata.max.retention.bytes", "metadata.max.retention.ms",
})


@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_voters(raw: str) -> dict[int, Voter]:
    """``controller.quorum.voters``: ``id@host:port,...`` (Kafka's QuorumConfig.parseVoterConnections)."""
    voters: dict[int, Voter] = {}
    for item in (s.strip() for s in raw.split(",")):
        if not item:
            continue
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon:
            raise ConfigError(f"Invalid value {raw} for configuration controller.quorum.voters: Unable to parse "
                              f"voter string {item} (expected id@host:port)")
        try:
            voter = Voter(int(node), host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError(f"Invalid value {raw} for configuration controller.quorum.voters: Failed to parse "
                              f"{item}") from None
        voters[voter.node_id] = voter
    return voters


def _int(props: Mapping[str, str], name: str, default: int) -> int:
    raw = props.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"Invalid value {raw} for configuration {name}: Not a number of type INT") from None


def _bool(props: Mapping[str, str], name: str, default: bool) -> bool:
    raw = props.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in ("true", "false"):
        raise ConfigError(f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
    return raw == "true"


@dataclass(frozen=True)
class ControllerConfig:
    node_id: int
    voters: dict[int, Voter]
    listener_name: str
    host: str
    port: int
    metadata_log_dir: Path
    log_dirs: tuple[Path, ...]
    quorum: QuorumConfig
    max_idle_interval_ms: int
    metadata_log: MetadataLogConfig
    ignored: tuple[str, ...] = field(default=())
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    default_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ControllerConfig:
        roles = [r.strip() for r in props.get("process.roles", "").split(",") if r.strip()]
        if roles != ["controller"]:
            raise ConfigError(f"process.roles must be 'controller' for odradek controller, got {props.get('process.roles', '')!r}"
                              " (combined broker,controller mode is not implemented)")
        if "node.id" not in props:
            raise ConfigError("Missing required configuration \"node.id\" which has no default value.")
        node_id = _int(props, "node.id", -1)
        voters = parse_voters(props.get("controller.quorum.voters", ""))
        if not voters:
            raise ConfigError("If using process.roles, controller.quorum.voters must contain a parseable set of "
                              "voters (controller.quorum.bootstrap.servers, KIP-853, is not implemented)")
        if node_id not in voters:
            raise ConfigError(f"If process.roles contains just the 'controller' role, the node id {node_id} must "
                              "be included in the set of voters controller.quorum.voters="
                              f"{set(voters)}")
        names = [n.strip() for n in props.get("controller.listener.names", "").split(",") if n.strip()]
        if not names:
            raise ConfigError("controller.listener.names must contain at least one value when running KRaft "
                              "with just the controller role")
        listener = names[0]
        host, port = voters[node_id].host, voters[node_id].port
        for name, h, p in parse_listeners(props["listeners"]) if props.get("listeners", "").strip() else ():
            if name == listener:
                host, port = h, p
        protocol_map = dict(item.split(":", 1) for item in props.get("listener.security.protocol.map", "").split(",")
                            if ":" in item)
        protocol = protocol_map.get(listener, "PLAINTEXT" if listener in ("PLAINTEXT", "CONTROLLER") else "")
        if protocol != "PLAINTEXT":
            raise ConfigError(f"the controller listener {listener} must be PLAINTEXT (security on the controller "
                              f"listener is not implemented yet), got {protocol or 'no protocol'}")
        log_dirs = tuple(Path(d.strip()) for d in (props.get("log.dirs") or props.get("log.dir") or "").split(",")
                         if d.strip())
        metadata_dir = props.get("metadata.log.dir", "").strip()
        if not metadata_dir and not log_dirs:
            raise ConfigError("metadata.log.dir (or log.dirs) must be set")
        quorum = QuorumConfig(
            election_timeout_ms=_int(props, "controller.quorum.election.timeout.ms", 1000),
            fetch_timeout_ms=_int(props, "controller.quorum.fetch.timeout.ms", 2000),
            election_backoff_max_ms=_int(props, "controller.quorum.election.backoff.max.ms", 1000),
            request_timeout_ms=_int(props, "controller.quorum.request.timeout.ms", 2000),
            retry_backoff_ms=_int(props, "controller.quorum.retry.backoff.ms", 20),
        )
        ignored = tuple(sorted(k for k in props if k not in IMPLEMENTED))
        return cls(node_id, voters, listener, host, port, Path(metadata_dir) if metadata_dir else log_dirs[0],
                   log_dirs, quorum, _int(props, "metadata.max.idle.interval.ms", 500),
                   MetadataLogConfig.from_properties(props), ignored,
                   _int(props, "broker.session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS),
                   _int(props, "num.partitions", 1), _int(props, "default.replication.factor", 1),
                   _bool(props, "delete.topic.enable", True))


def check_formatted(cfg: ControllerConfig) -> tuple[str, str | None]:
    """``(cluster id, directory id of metadata.log.dir)`` from the directories' meta.properties, as Kafka's
    KafkaRaftServer.initializeLogDirs and MetaPropertiesEnsemble.verify refuse them."""
    cluster_id: str | None = None
    directory_id: str | None = None
    for d in (cfg.metadata_log_dir, *(x for x in cfg.log_dirs if x != cfg.metadata_log_dir)):
        path = d / mp.META_PROPERTIES
        props = mp.read(path)
        if props is None:
            raise ConfigError(f"No `meta.properties` found in {d} (have you run `kafka-storage.sh` to format the "
                              "directory?)")
        meta = mp.parse(path, props)
        if meta.version != 1:
            raise ConfigError(f"Found unexpected version in {path}. ZK-based brokers that are not migrating only "
                              "support version 0 (which is implicit when the `version` field is missing).")
        if cluster_id is None:
            cluster_id = meta.cluster_id
        elif meta.cluster_id != cluster_id:
            raise ConfigError(f"Invalid cluster.id in: {path}. Expected {cluster_id}, but read {meta.cluster_id}")
        if meta.node_id != cfg.node_id:
            raise ConfigError(f"Stored node id {meta.node_id} doesn't match previous node id {cfg.node_id} in "
                              f"{path}. If you moved your data, make sure your configured node id matches. If you "
                              "intend to create a new node, you should remove all data in your data directories.")
        if d == cfg.metadata_log_dir:
            directory_id = meta.directory_id
    assert cluster_id is not None
    return cluster_id, directory_id


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class _ClientConnection:
    """One connection on the controller listener: frames in, answers out in request order."""

    def __init__(self, controller: QuorumController, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.controller = controller
        self.reader = reader
        self.writer = writer
        self.answers: collections.deque[tuple[asyncio.Future[bytes], int, bool]] = collections.deque()
        self.ready = asyncio.Event()

    async def run(self) -> None:
        writer_task = asyncio.create_task(self._write_answers())
        decoder = FrameDecoder(MAX_REQUEST_BYTES)
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                for frame in decoder.feed(data):
                    self._on_frame(bytes(frame))
        except (FrameError, ConnectionError, wire.WireFormatError, codec.DecodeError) as e:
            log.warning("closing a connection on the controller listener: %s", e)
        finally:
            writer_task.cancel()
            self.writer.close()

    def _on_frame(self, frame: bytes) -> None:
        api_key, version, correlation_id = peek_header(frame)
        supported = {k: (lo, hi) for k, lo, hi in SUPPORTED_APIS}
        if api_key not in supported:
            raise FrameError(f"api key {api_key} is not served by a controller")
        lo, hi = supported[api_key]
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if api_key == API_VERSIONS and not lo <= version <= hi:
            version = 0  # answered at v0 with UNSUPPORTED_VERSION, as Kafka does
            fut.set_result(codec.encode(self.controller.api_versions(0, errors.UNSUPPORTED_VERSION)))
            self.answers.append((fut, correlation_id, False))
            self.ready.set()
            return
        if not lo <= version <= hi:
            raise FrameError(f"version {version} of api {api_key} is not served (supported {lo}-{hi})")
        header = parse_request_header(frame, codec.request_header_flexible(api_key, version))
        request = codec.decode_request(api_key, version, frame, header.body_offset)
        flexible = codec.response_header_flexible(api_key, version)
        self.answers.append((fut, correlation_id, flexible))
        self.controller.on_request(api_key, version, request, fut)
        self.ready.set()

    async def _write_answers(self) -> None:
        while True:
            while not self.answers:
                self.ready.clear()
                await self.ready.wait()
            fut, correlation_id, flexible = self.answers[0]
            body = await fut
            self.answers.popleft()
            head = response_header(correlation_id, flexible)
            self.writer.write((len(head) + len(body)).to_bytes(4, "big") + head + body)


class QuorumController:
    """The controller process's quorum: the raft core, its log and state file, its sockets."""

    def __init__(self, cfg: ControllerConfig, *, clock: Callable[[], int] = wall_clock_ms,
                 rng: random.Random | None = None) -> None:
        self.cfg = cfg
        self.clock = clock
        self.cluster_id, directory_id = check_formatted(cfg)
        self.directory_id = parse_kafka_uuid(directory_id) if directory_id else None
        now = clock()
        self.mlog = MetadataLog.open(cfg.metadata_log_dir, cfg.metadata_log, now_ms=now)
        # a static controller.quorum.voters is kraft.version 0, whose quorum-state is version 0
        # (KRaftVersion.quorumStateVersion), listing the voters
        self.store = FileQuorumStateStore(cfg.metadata_log_dir / PARTITION_DIR / DEFAULT_FILE_NAME, version=0,
                                          voters=sorted(cfg.voters))
        self.replica = RaftReplica(
            local_id=cfg.node_id, voters=list(cfg.voters), log=MetadataRaftLog(self.mlog, clock), store=self.store,
            rng=rng or random.Random(), now_ms=now, config=cfg.quorum, local_directory_id=self.directory_id,
            cluster_id=self.cluster_id,
        )
        self._next_id = 1 << 40  # correlation ids of requests received (the core's own count from 0)
        self._inbound: dict[tuple[int, int], tuple[int, int, asyncio.Future[bytes]]] = {}
        self._clients: dict[int, AsyncWireClient] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._tick: asyncio.TimerHandle | None = None
        self._noop: asyncio.TimerHandle | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopped = asyncio.Event()
        self.failed = False
        # the metadata state machine: the bootstrap snapshot, then the log up to the high watermark
        self.state = ControllerState(session_timeout_ms=cfg.session_timeout_ms,
                                     default_partitions=cfg.default_partitions,
                                     default_replication_factor=cfg.default_replication_factor)
        self.bootstrap: list[RecordAndVersion] = []
        self.applied_end = 0  # the next offset to apply
        snapshot = self.mlog.latest_snapshot()
        if snapshot is not None:
            batches = self._load_snapshot(snapshot)
            if snapshot == BOOTSTRAP_SNAPSHOT:
                self.bootstrap = [e.record for b in batches for e in b.entries if e.record is not None]
        # (last offset, run once committed, run if leadership is lost first)
        self._waiters: list[tuple[int, Callable[[], None], Callable[[], None] | None]] = []
        self._activated_epoch = -1
        self._last_applied_timestamp = now

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connection, self.cfg.host or None, self.cfg.port,
                                                  reuse_address=True)
        log.info("Controller %d listening on %s:%d (%s), cluster %s, log end %d, epoch %d", self.cfg.node_id,
                 self.cfg.host, self.cfg.port, self.cfg.listener_name, self.cluster_id, self.mlog.log_end_offset,
                 self.replica.epoch)
        self._core(lambda: self.replica.tick(self.clock()))
        self._schedule_noop()

    async def resign(self, timeout_s: float = 1.0) -> None:
        """A leader that stops resigns first (Kafka's graceful shutdown): EndQuorumEpoch to the voters, so that
        one of them stands at once rather than after a fetch timeout."""
        if self.failed or not self.replica.is_leader():
            return
        self._core(lambda: self.replica.resign(self.clock()))
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for h in (self._tick, self._noop):
            if h is not None:
                h.cancel()
        for c in self._clients.values():
            c.close()
        for t in list(self._tasks):
            t.cancel()
        self.mlog.flush()
        self.mlog.close()
        self.stopped.set()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _ClientConnection(self, reader, writer).run()

    # --- driving the core ------------------------------------------------------------------------

    def _run(self, effects: list[Any]) -> None:
        """Carry out the core's effects, then schedule its next tick."""
        for e in effects:
            if isinstance(e, Send):
                if isinstance(e.message, (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                                          FetchSnapshotRequest)):
                    self._send_request(e)
                else:
                    self._answer(e)
            elif isinstance(e, SnapshotInstalled):
                log.info("Controller %d: loading the snapshot fetched from the leader, %d-%d", self.cfg.node_id,
                         e.snapshot_id.end_offset, e.snapshot_id.epoch)
                self.state.reset_pending()
                self._load_snapshot(SnapshotId(e.snapshot_id.end_offset, e.snapshot_id.epoch))
            elif isinstance(e, HighWatermarkChanged):
                self.mlog.update_high_watermark(e.high_watermark)
                self._apply_committed(e.high_watermark)
            elif isinstance(e, LeaderChanged):
                log.info("Controller %d: leader %d in epoch %d", self.cfg.node_id, e.leader_id, e.epoch)
                self._on_leader_change(e.leader_id, e.epoch)
        if self._tick is not None:
            self._tick.cancel()
        deadline = self.replica.next_deadline_ms()
        delay = max(0, deadline - self.clock()) / 1000
        self._tick = asyncio.get_running_loop().call_later(min(delay, 3600.0), self._on_tick)

    def _core(self, step: Callable[[], list[Effect]]) -> None:
        """One call into the core, then its effects. An exception from the core (a leader asking for what
        would undo a commit, a log that cannot be written) stops the process, as Kafka's raft thread failing
        does: it is not carried on with a state nobody checked."""
        if self.failed:
            return
        try:
            effects = step()
        except Exception:
            log.exception("Controller %d: the quorum failed; shutting down", self.cfg.node_id)
            self.failed = True
            self.stopped.set()
            return
        self._run(effects)

    def _on_tick(self) -> None:
        self._tick = None
        self._core(lambda: self.replica.tick(self.clock()))

    def _schedule_noop(self) -> None:
        interval = self.cfg.max_idle_interval_ms
        if interval > 0:
            self._noop = asyncio.get_running_loop().call_later(interval / 1000, self._write_noop)

    def _write_noop(self) -> None:
        try:
            self._noop_and_sessions()
        finally:
            self._schedule_noop()

    def _noop_and_sessions(self) -> None:
        if self.replica.is_leader():
            self._core(lambda: self.replica.append([encode_record(NoOpRecord())], self.clock())[1])
            if self._activated_epoch == self.replica.epoch:
                fence = self.state.expire_sessions(self.clock())
                if fence:
                    log.info("Controller %d: fencing brokers whose session expired: %s", self.cfg.node_id,
                             [r.record for r in fence])
                    self.write(fence)

    # --- the metadata state machine --------------------------------------------------------------

    def _load_snapshot(self, snapshot: SnapshotId) -> list[MetadataBatch]:
        """The state machine from a snapshot (at start, or one fetched from the leader); its batches."""
        batches = read_snapshot_file(self.mlog.snapshot_path(snapshot))
        self.state.load_snapshot(image_of_snapshot(snapshot, batches))
        self.applied_end = snapshot.end_offset
        return batches

    def _apply_committed(self, high_watermark: int) -> None:
        """Every batch wholly below the high watermark, once, to the image; then the requests they answer;
        then a snapshot if one is due."""
        if high_watermark > self.applied_end:
            batches = [b for b in self.mlog.read(self.applied_end)
                       if b.base_offset >= self.applied_end and b.last_offset < high_watermark]
            if batches:
                self.state.apply_committed(batches)
                self.applied_end = batches[-1].last_offset + 1
                self._last_applied_timestamp = batches[-1].append_timestamp
        ready = [cb for last, cb, _ in self._waiters if last < self.applied_end]
        self._waiters = [w for w in self._waiters if w[0] >= self.applied_end]
        for cb in ready:
            cb()
        self.maybe_snapshot()

    def maybe_snapshot(self) -> SnapshotId | None:
        """Kafka's SnapshotGenerator: a snapshot of the committed image when one is due, then the snapshots and
        log segments a newer snapshot covers deleted per the retention settings (cleanSnapshots)."""
        now = self.clock()
        image = self.state.committed
        written = None
        latest = self.mlog.latest_snapshot()
        if (self.mlog.should_snapshot(now) and image.offset >= 0
                and (latest is None or image.offset + 1 > latest.end_offset)):
            written = self.mlog.write_snapshot(image, now_ms=now, last_contained_timestamp=self._last_applied_timestamp)
        if self.mlog.clean(now):
            log.info("Controller %d: the metadata log now starts at %d", self.cfg.node_id, self.mlog.log_start_offset)
        return written

    def _on_leader_change(self, leader_id: int, epoch: int) -> None:
        self.state.reset_pending()
        lost, self._waiters = self._waiters, []
        for _, _, on_lost in lost:  # Kafka answers them NOT_CONTROLLER
            if on_lost is not None:
                on_lost()
        if leader_id != self.cfg.node_id or self._activated_epoch == epoch:
            return
        self._activated_epoch = epoch
        # Kafka's ActivationRecordsGenerator: a log with no metadata record yet gets the bootstrap records,
        # in a metadata transaction (KIP-868), with the ZK migration state NONE of a new KRaft cluster
        latest = self.mlog.latest_snapshot()
        empty = (latest is None or latest == BOOTSTRAP_SNAPSHOT) and not any(
            e.record is not None and not isinstance(e.record.record, NoOpRecord)
            for b in self.mlog.read(0) for e in b.entries)
        if empty and self.bootstrap:
            records = [RecordAndVersion(BeginTransactionRecord(name="Bootstrap records"), 0),
                       *self.bootstrap,
                       RecordAndVersion(ZkMigrationStateRecord(zk_migration_state=0), 0),
                       RecordAndVersion(EndTransactionRecord(), 0)]
            log.info("Controller %d: the metadata log appears to be empty. Appending %d bootstrap record(s) in "
                     "metadata transaction", self.cfg.node_id, len(self.bootstrap))
            loop = asyncio.get_running_loop()
            loop.call_soon(self.write, records)
        self.state.last_heartbeat_ms = {}  # Kafka's BrokerHeartbeatManager starts afresh on activation

    def write(self, records: list[RecordAndVersion], on_commit: Callable[[], None] | None = None,
              on_lost: Callable[[], None] | None = None) -> int:
        """Append ``records`` as one batch (atomic); ``on_commit`` runs once the high watermark passes them."""
        if not self.replica.is_leader():
            raise ControllerError(errors.NOT_CONTROLLER, "This controller is not the active controller")
        first = self.mlog.log_end_offset
        out: list[int] = []

        def step() -> list[Effect]:
            last, effects = self.replica.append([encode_record(r.record, r.version) for r in records], self.clock())
            out.append(last)
            return effects

        if records:
            self._core(step)
        last = out[0] if out else first - 1
        if records:
            self.state.written(last, records, first)
        if on_commit is not None:
            if last < self.applied_end:
                on_commit()
            else:
                self._waiters.append((last, on_commit, on_lost))
        return last

    # --- outbound --------------------------------------------------------------------------------

    def _client(self, node_id: int) -> AsyncWireClient:
        client = self._clients.get(node_id)
        if client is None:
            v = self.cfg.voters[node_id]
            timeout_s = self.cfg.quorum.request_timeout_ms / 1000
            client = AsyncWireClient(v.host, v.port, f"raft-client-{self.cfg.node_id}", timeout_s=timeout_s)
            self._clients[node_id] = client
        return client

    def _send_request(self, send: Send) -> None:
        task = asyncio.create_task(self._exchange(send))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exchange(self, send: Send) -> None:
        message = send.message
        assert isinstance(message, (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                                    FetchSnapshotRequest))
        key, version, request = wire.encode_request(message)
        client = self._client(send.destination)
        lock = self._locks.setdefault(send.destination, asyncio.Lock())
        try:
            async with lock:  # one exchange at a time on a connection (the core may resend after its timeout)
                response = await client.request(key, version, codec.encode(request),
                                                timeout_s=self.cfg.quorum.request_timeout_ms / 1000)
            answer = wire.decode_response(key, response)
        except (WireError, wire.WireFormatError) as e:
            log.debug("request %d to controller %d failed: %s", key, send.destination, e)
            answer = wire.failed_response(message, errors.NETWORK_EXCEPTION)
        received = Received(send.destination, send.correlation_id, answer)
        self._core(lambda: self.replica.handle(received, self.clock()))

    # --- inbound ---------------------------------------------------------------------------------

    def on_request(self, api_key: int, version: int, request: Any, fut: asyncio.Future[bytes]) -> None:
        if api_key == API_VERSIONS:
            fut.set_result(codec.encode(self.api_versions(version, errors.NONE)))
        elif api_key == DESCRIBE_QUORUM:
            fut.set_result(codec.encode(self.describe_quorum(version)))
        elif api_key == DESCRIBE_CLUSTER:
            fut.set_result(codec.encode(self.describe_cluster(version, request)))
        elif api_key == BROKER_REGISTRATION:
            self.broker_registration(version, request, fut)
        elif api_key == BROKER_HEARTBEAT:
            self.broker_heartbeat(version, request, fut)
        elif api_key in ADMIN_APIS:
            def done(body: bytes) -> None:
                if not fut.done():
                    fut.set_result(body)

            self.admin_request(api_key, version, request, done)
        elif api_key == ENVELOPE:
            self.envelope(version, request, fut)
        elif api_key == ALLOCATE_PRODUCER_IDS:
            self.allocate_producer_ids(version, request, fut)
        else:
            source, message = wire.decode_request(api_key, request)
            correlation_id = self._next_id
            self._next_id += 1
            self._inbound[(source, correlation_id)] = (api_key, version, fut)
            received = Received(source, correlation_id, message)
            self._core(lambda: self.replica.handle(received, self.clock()))

    def _answer(self, send: Send) -> None:
        pending = self._inbound.pop((send.destination, send.correlation_id), None)
        if pending is None:
            return  # the connection is gone
        api_key, version, fut = pending
        if not fut.done():
            message: Any = send.message
            fut.set_result(codec.encode(wire.encode_response(api_key, version, message, self.clock())))

    def _not_controller(self) -> ControllerError | None:
        if self.replica.is_leader() and self._activated_epoch == self.replica.epoch:
            return None
        return ControllerError(errors.NOT_CONTROLLER, "This is not the active controller")

    def broker_registration(self, version: int, request: Any, fut: asyncio.Future[bytes]) -> None:
        m = codec.response_module(BROKER_REGISTRATION, version)

        def answer(error: int, epoch: int = -1) -> None:
            if not fut.done():
                fut.set_result(codec.encode(codec.make(m.BrokerRegistrationResponse, throttle_time=0,
                                                       error_code=error, broker_epoch=epoch)))

        reg = Registration(
            broker_id=int(request.broker_id), cluster_id=str(request.cluster_id),
            incarnation_id=request.incarnation_id,
            listeners=tuple(BrokerEndpoint(name=x.name, host=x.host, port=int(x.port),
                                           security_protocol=int(x.security_protocol)) for x in request.listeners),
            features=tuple(BrokerFeature(name=f.name, min_supported_version=int(f.min_supported_version),
                                         max_supported_version=int(f.max_supported_version))
                           for f in request.features),
            rack=request.rack, log_dirs=tuple(getattr(request, "log_dirs", ()) or ()))
        try:
            refused = self._not_controller()
            if refused:
                raise refused
            epoch = self.mlog.log_end_offset
            records = self.state.register_broker(reg, self.cluster_id, epoch, self.clock())
            log.info("Controller %d: registering broker %d (incarnation %s, epoch %d)", self.cfg.node_id,
                     reg.broker_id, reg.incarnation_id, epoch)
            self.write(records, lambda: answer(errors.NONE, epoch), lambda: answer(errors.NOT_CONTROLLER))
        except ControllerError as e:
            log.info("Controller %d: refused the registration of broker %d: %s", self.cfg.node_id, reg.broker_id,
                     e.message)
            answer(e.code)

    def broker_heartbeat(self, version: int, request: Any, fut: asyncio.Future[bytes]) -> None:
        m = codec.response_module(BROKER_HEARTBEAT, version)

        def answer(error: int, caught_up: bool = False, fenced: bool = True, shut_down: bool = False) -> None:
            if not fut.done():
                fut.set_result(codec.encode(codec.make(
                    m.BrokerHeartbeatResponse, throttle_time=0, error_code=error, is_caught_up=caught_up,
                    is_fenced=fenced, should_shut_down=shut_down)))

        hb = Heartbeat(int(request.broker_id), int(request.broker_epoch), int(request.current_metadata_offset),
                       bool(request.want_fence), bool(request.want_shut_down))
        try:
            refused = self._not_controller()
            if refused:
                raise refused
            records, result = self.state.heartbeat(hb, self.clock())
            if records:
                log.info("Controller %d: broker %d heartbeat writes %s", self.cfg.node_id, hb.broker_id,
                         [r.record for r in records])
            self.write(records, lambda: answer(errors.NONE, result.is_caught_up, result.is_fenced,
                                               result.should_shut_down), lambda: answer(errors.NOT_CONTROLLER))
        except ControllerError as e:
            answer(e.code)

    def allocate_producer_ids(self, version: int, request: Any, fut: asyncio.Future[bytes]) -> None:
        m = codec.response_module(ALLOCATE_PRODUCER_IDS, version)

        def answer(error: int, start: int = -1, length: int = -1) -> None:
            if not fut.done():
                fut.set_result(codec.encode(codec.make(m.AllocateProducerIdsResponse, throttle_time=0,
                                                       error_code=error, producer_id_start=start,
                                                       producer_id_len=length)))

        try:
            refused = self._not_controller()
            if refused:
                raise refused
            records, start = self.state.allocate_producer_ids(int(request.broker_id), int(request.broker_epoch))
            self.write(records, lambda: answer(errors.NONE, start, PRODUCER_ID_BLOCK_SIZE),
                       lambda: answer(errors.NOT_CONTROLLER))
        except ControllerError as e:
            answer(e.code)

    def admin_request(self, api_key: int, version: int, request: Any, done: Callable[[bytes], Any]) -> None:
        """CreateTopics, DeleteTopics, CreatePartitions or IncrementalAlterConfigs: ``done`` gets the response
        body once the records commit (or at once, when nothing is written)."""
        handler = {CREATE_TOPICS: self._create_topics, DELETE_TOPICS: self._delete_topics,
                   CREATE_PARTITIONS: self._create_partitions,
                   INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs}[api_key]
        handler(version, request, done)

    def _create_topics(self, version: int, request: Any, done: Callable[[bytes], Any]) -> None:
        m = codec.response_module(CREATE_TOPICS, version)
        topics = [NewTopic(name=t.name, num_partitions=int(t.num_partitions),
                           replication_factor=int(t.replication_factor),
                           assignments={int(a.partition_index): tuple(int(b) for b in a.broker_ids)
                                        for a in t.assignments},
                           configs={c.name: c.value for c in t.configs}) for t in request.topics]

        def answer(results: list[Any]) -> None:
            done(codec.encode(codec.make(m.CreateTopicsResponse, throttle_time=0, topics=tuple(
                codec.make(m.CreatableTopicResult, name=r.name, topic_id=r.topic_id, error_code=r.error_code,
                           error_message=r.error_message, topic_config_error_code=0,
                           num_partitions=r.num_partitions, replication_factor=r.replication_factor,
                           configs=None if r.error_code else configs_of(r.name))
                for r in results))))

        def configs_of(name: str) -> tuple[Any, ...]:
            # the topic's configs set at creation (ConfigSource DYNAMIC_TOPIC_CONFIG = 1)
            given = next((t.configs for t in topics if t.name == name), {})
            return tuple(codec.make(m.CreatableTopicConfigs, name=k, value=v, read_only=False, config_source=1,
                                    is_sensitive=False) for k, v in sorted(given.items()))

        refused = self._not_controller()
        if refused:
            answer([TopicResult(t.name, refused.code, refused.message) for t in topics])
            return
        records, results = self.state.create_topics(topics, validate_only=bool(request.validate_only))
        if records:
            log.info("Controller %d: creating topics %s", self.cfg.node_id,
                     [r.name for r in results if r.error_code == errors.NONE])
        lost = [TopicResult(r.name, errors.NOT_CONTROLLER, "The active controller changed") for r in results]
        self.write(records, lambda: answer(results), lambda: answer(lost))

    def _delete_topics(self, version: int, request: Any, done: Callable[[bytes], Any]) -> None:
        """ControllerApis.handleDeleteTopics: topics by name (topic_names before v6) or by id (v6)."""
        m = codec.response_module(DELETE_TOPICS, version)
        if version >= 6:
            names: list[str | None] = []
            states = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]  # kio reads the zero id as None
        else:
            names, states = list(request.topic_names), []

        def answer(results: list[Any]) -> None:
            done(codec.encode(codec.make(m.DeleteTopicsResponse, throttle_time=0, responses=tuple(
                codec.make(m.DeletableTopicResult, name=r.name, topic_id=r.topic_id, error_code=r.error_code,
                           error_message=r.error_message) for r in results))))

        refused = self._not_controller()
        if refused:
            answer([DeleteResult(n, t, refused.code) for n, t in [(n, ZERO_UUID) for n in names] + states])
            return
        records, results = self.state.delete_topics(names, states, enabled=self.cfg.delete_topic_enable,
                                                    api_version=version)
        if records:
            log.info("Controller %d: deleting topics %s", self.cfg.node_id,
                     [r.name for r in results if r.error_code == errors.NONE])
        lost = [DeleteResult(r.name, r.topic_id, errors.NOT_CONTROLLER) for r in results]
        self.write(records, lambda: answer(results), lambda: answer(lost))

    def _create_partitions(self, version: int, request: Any, done: Callable[[bytes], Any]) -> None:
        m = codec.response_module(CREATE_PARTITIONS, version)
        topics = [NewPartitions(t.name, int(t.count), None if t.assignments is None else
                                tuple(tuple(int(b) for b in a.broker_ids) for a in t.assignments))
                  for t in request.topics]

        def answer(results: list[Any]) -> None:
            done(codec.encode(codec.make(m.CreatePartitionsResponse, throttle_time=0, results=tuple(
                codec.make(m.CreatePartitionsTopicResult, name=r.name, error_code=r.error_code,
                           error_message=r.error_message) for r in results))))

        refused = self._not_controller()
        if refused:
            answer([PartitionsResult(t.name, refused.code, refused.message) for t in topics])
            return
        records, results = self.state.create_partitions(topics, validate_only=bool(request.validate_only))
        if records:
            log.info("Controller %d: adding partitions to %s", self.cfg.node_id,
                     {t.name: t.count for t in topics if any(r.name == t.name and not r.error_code for r in results)})
        lost = [PartitionsResult(r.name, errors.NOT_CONTROLLER, "The active controller changed") for r in results]
        self.write(records, lambda: answer(results), lambda: answer(lost))

    def _incremental_alter_configs(self, version: int, request: Any, done: Callable[[bytes], Any]) -> None:
        m = codec.response_module(INCREMENTAL_ALTER_CONFIGS, version)
        resources = [AlterResource(int(r.resource_type), r.resource_name, tuple(
            AlterConfig(c.name, int(c.config_operation), c.value) for c in r.configs)) for r in request.resources]

        def answer(results: list[Any]) -> None:
            done(codec.encode(codec.make(m.IncrementalAlterConfigsResponse, throttle_time=0, responses=tuple(
                codec.make(m.AlterConfigsResourceResponse, error_code=r.error_code, error_message=r.error_message,
                           resource_type=r.resource_type, resource_name=r.resource_name) for r in results))))

        refused = self._not_controller()
        if refused:
            answer([AlterResult(r.resource_type, r.resource_name, refused.code, refused.message) for r in resources])
            return
        records, results = self.state.incremental_alter_configs(resources, validate_only=bool(request.validate_only))
        if records:
            log.info("Controller %d: altering configs %s", self.cfg.node_id, [r.record for r in records])
        lost = [AlterResult(r.resource_type, r.resource_name, errors.NOT_CONTROLLER, "The active controller changed")
                for r in results]
        self.write(records, lambda: answer(results), lambda: answer(lost))

    def envelope(self, version: int, request: Any, fut: asyncio.Future[bytes]) -> None:
        """KIP-590: a broker forwards a client's admin request wrapped in an Envelope."""
        m = codec.response_module(ENVELOPE, version)

        def reply(data: bytes | None, error: int = errors.NONE) -> None:
            if not fut.done():
                fut.set_result(codec.encode(codec.make(m.EnvelopeResponse, response_data=data, error_code=error)))

        inner = bytes(request.request_data)
        api_key, inner_version, correlation_id = peek_header(inner)
        lo, hi = next(((lo, hi) for k, lo, hi in SUPPORTED_APIS if k == api_key), (0, -1))
        if api_key not in ADMIN_APIS or not lo <= inner_version <= hi:
            log.info("Controller %d: refusing a forwarded request of api %d v%d", self.cfg.node_id, api_key,
                     inner_version)
            reply(None, errors.INVALID_REQUEST)
            return
        header = parse_request_header(inner, codec.request_header_flexible(api_key, inner_version))
        body = codec.decode_request(api_key, inner_version, inner, header.body_offset)
        head = response_header(correlation_id, codec.response_header_flexible(api_key, inner_version))
        self.admin_request(api_key, inner_version, body, lambda b: reply(head + b))

    def api_versions(self, version: int, error: int) -> Any:
        m = codec.response_module(API_VERSIONS, version)
        keys = tuple(codec.make(m.ApiVersion, api_key=k, min_version=lo, max_version=hi) for k, lo, hi in SUPPORTED_APIS)
        return codec.make(m.ApiVersionsResponse, error_code=error, api_keys=keys, throttle_time=0,
                          supported_features=(), finalized_features_epoch=-1, finalized_features=(),
                          zk_migration_ready=False)

    def describe_quorum(self, version: int) -> Any:
        m = codec.response_module(DESCRIBE_QUORUM, version)
        q = self.replica.describe_quorum(self.clock())

        def state(r: Any) -> Any:
            return codec.make(m.ReplicaState, replica_id=r.replica_id, replica_directory_id=r.replica_directory_id,
                              log_end_offset=r.log_end_offset, last_fetch_timestamp=r.last_fetch_timestamp,
                              last_caught_up_timestamp=r.last_caught_up_timestamp)

        partition = codec.make(
            m.PartitionData, partition_index=0, error_code=q.error_code, error_message=None,
            leader_id=q.leader_id, leader_epoch=q.leader_epoch, high_watermark=q.high_watermark,
            current_voters=tuple(state(r) for r in q.current_voters), observers=tuple(state(r) for r in q.observers))
        nodes = ()
        if hasattr(m, "Node"):
            nodes = tuple(
                codec.make(m.Node, node_id=v.node_id,
                           listeners=(codec.make(m.Listener, name=self.cfg.listener_name, host=v.host, port=v.port),))
                for v in self.cfg.voters.values())
        return codec.make(m.DescribeQuorumResponse, error_code=0, error_message=None,
                          topics=(codec.make(m.TopicData, topic_name=wire.TOPIC, partitions=(partition,)),),
                          nodes=nodes)

    def describe_cluster(self, version: int, request: Any) -> Any:
        """KIP-919: asked on a controller listener for its controllers (endpoint type 2)."""
        m = codec.response_module(DESCRIBE_CLUSTER, version)
        endpoint_type = int(getattr(request, "endpoint_type", 1))
        if endpoint_type != 2:
            return codec.make(m.DescribeClusterResponse, throttle_time=0, error_code=errors.UNSUPPORTED_ENDPOINT_TYPE,
                              error_message="The controller can only describe controllers", endpoint_type=endpoint_type,
                              cluster_id=self.cluster_id, controller_id=-1, brokers=(),
                              cluster_authorized_operations=-2147483648)
        leader = self.replica.leader_id
        brokers = tuple(codec.make(m.DescribeClusterBroker, broker_id=v.node_id, host=v.host, port=v.port, rack=None,
                                   is_fenced=False) for v in self.cfg.voters.values())
        return codec.make(m.DescribeClusterResponse, throttle_time=0, error_code=0, error_message=None,
                          endpoint_type=2, cluster_id=self.cluster_id, controller_id=leader, brokers=brokers,
                          cluster_authorized_operations=-2147483648)


async def run_controller(cfg: ControllerConfig) -> bool:
    """Run until SIGTERM / SIGINT (True) or a failure of the quorum (False)."""
    controller = QuorumController(cfg)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, controller.stopped.set)
    await controller.start()
    try:
        await controller.stopped.wait()
        await controller.resign()
    finally:
        await controller.close()
    return not controller.failed
