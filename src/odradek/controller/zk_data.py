"""Cluster state in the metadata store, in Kafka's ZooKeeper-mode paths and JSON
(what Kafka's KafkaZkClient reads and writes), over any MetadataStore.

    /brokers/ids/<id>         ephemeral {"version":5,"host","port","endpoints":["PLAINTEXT://h:p"],
                              "listener_security_protocol_map":{...},"rack","jmx_port":-1,
                              "features":{},"timestamp"}; the broker epoch is the node's czxid
    /controller               ephemeral {"version":1,"brokerid":N,"timestamp":"ms"}
    /controller_epoch         "N" (a decimal number)
    /brokers/topics/<t>/partitions/<p>/state
                              {"version":1,"controller_epoch","leader","leader_epoch","isr":[...]}
    /isr_change_notification/isr_change_<seq>
                              {"version":1,"partitions":[{"topic","partition"}]}
    /admin/reassign_partitions, /admin/preferred_replica_election
                              {"version":1,"partitions":[{"topic","partition"[,"replicas"]}]}
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from odradek.controller import features as ft
from odradek.controller.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, Op
from odradek.protocol import errors

BROKER_IDS = "/brokers/ids"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ISR_CHANGE = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGE + "/isr_change_"
REASSIGN = "/admin/reassign_partitions"
PREFERRED = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
LOG_DIR_EVENT = "/log_dir_event_notification"

PERSISTENT_PATHS = (
    "/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/brokers",
    "/config/changes", "/admin/delete_topics", ISR_CHANGE, "/latest_producer_id_block", LOG_DIR_EVENT,
)


def _j(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[str, ...] = ()
    epoch: int = -1  # czxid of the registration (ZooKeeper); -1 with the local store
    protocols: tuple[tuple[str, str], ...] = ()  # listener name -> security protocol of each endpoint

    def to_json(self) -> bytes:
        return _j(
            {
                "version": 5,
                "host": self.host,
                "port": self.port,
                "endpoints": list(self.endpoints) or [f"PLAINTEXT://{self.host}:{self.port}"],
                "listener_security_protocol_map": dict(self.protocols) or {"PLAINTEXT": "PLAINTEXT"},
                "rack": self.rack,
                "jmx_port": -1,
                "features": {},
                "timestamp": str(int(time.time() * 1000)),
            }
        )

    @classmethod
    def from_json(cls, broker_id: int, data: bytes, epoch: int = -1) -> BrokerInfo:
        doc = json.loads(data)
        return cls(broker_id, doc.get("host") or "", int(doc.get("port", -1)), doc.get("rack"),
                   tuple(doc.get("endpoints", ())), epoch)


@dataclass
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1

    def to_json(self) -> bytes:
        return _j({"version": 1, "controller_epoch": self.controller_epoch, "leader": self.leader,
                   "leader_epoch": self.leader_epoch, "isr": self.isr})


@dataclass
class ControllerClaim:
    epoch: int
    epoch_zk_version: int
    extra: dict[str, Any] = field(default_factory=dict)


def live_broker_endpoints(live_brokers: dict[int, dict[str, Any]], listener: str
                          ) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of each live broker on ``listener``, by id: what Metadata and DescribeCluster
    list in cluster mode (Kafka's MetadataCache.getAliveBrokerNodes)."""
    return [(b, *endpoint_for(n, listener), n.get("rack")) for b, n in sorted(live_brokers.items())]


def endpoint_for(node: dict[str, Any], listener: str) -> tuple[str, int]:
    """A broker's address on ``listener`` (its registration lists every advertised listener as
    ``NAME://host:port``, as /brokers/ids/<id> does), else its inter-broker address."""
    prefix = f"{listener}://"
    for ep in node.get("endpoints") or ():
        if isinstance(ep, str) and ep.startswith(prefix):
            host, _, port = ep[len(prefix):].rpartition(":")
            with contextlib.suppress(ValueError):
                return host.strip("[]"), int(port)
    return str(node["host"]), int(node["port"])


def ensure_paths(store: MetadataStore) -> None:
    for p in PERSISTENT_PATHS:
        if store.exists(p) is None:
            with contextlib.suppress(NodeExistsError):
                store.create(p, b"", makepath=True)


# -- brokers
def register_broker(store: MetadataStore, info: BrokerInfo) -> int:
    """Create /brokers/ids/<id> (ephemeral); returns the broker epoch (czxid, or -1)."""
    path = f"{BROKER_IDS}/{info.broker_id}"
    store.create(path, info.to_json(), ephemeral=True, makepath=True)
    return broker_epoch(store, info.broker_id)


def broker_epoch(store: MetadataStore, broker_id: int) -> int:
    getter = getattr(store, "get_with_stat", None)
    if getter is None:
        return -1
    _, stat = getter(f"{BROKER_IDS}/{broker_id}")
    return int(stat.czxid)


def live_brokers(store: MetadataStore) -> dict[int, BrokerInfo]:
    out: dict[int, BrokerInfo] = {}
    try:
        ids = store.children(BROKER_IDS)
    except NoNodeError:
        return out
    getter = getattr(store, "get_with_stat", None)
    for child in ids:
        try:
            if getter is not None:
                data, stat = getter(f"{BROKER_IDS}/{child}")
                out[int(child)] = BrokerInfo.from_json(int(child), data, int(stat.czxid))
            else:
                data, _ = store.get(f"{BROKER_IDS}/{child}")
                out[int(child)] = BrokerInfo.from_json(int(child), data)
        except (NoNodeError, ValueError):
            continue
    return out


# -- controller
def read_controller(store: MetadataStore) -> int | None:
    try:
        data, _ = store.get(CONTROLLER)
    except NoNodeError:
        return None
    return int(json.loads(data)["brokerid"])


def read_controller_epoch(store: MetadataStore) -> tuple[int, int]:
    """(epoch, znode version); (0, -1) when the node does not exist yet."""
    try:
        data, version = store.get(CONTROLLER_EPOCH)
    except NoNodeError:
        return 0, -1
    return int(data.decode() or 0), version


def try_become_controller(store: MetadataStore, broker_id: int) -> ControllerClaim | None:
    """Create /controller and bump /controller_epoch in one atomic multi, like Kafka's
    registerControllerAndIncrementControllerEpoch. None when another broker holds it."""
    epoch, version = read_controller_epoch(store)
    if version < 0:
        with contextlib.suppress(NodeExistsError):
            store.create(CONTROLLER_EPOCH, b"0")
        epoch, version = read_controller_epoch(store)
    claim = _j({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))})
    try:
        store.multi(
            [
                Op("create", CONTROLLER, claim, ephemeral=True),
                Op("set", CONTROLLER_EPOCH, str(epoch + 1).encode(), version),
            ]
        )
    except NodeExistsError:
        if read_controller(store) != broker_id:
            return None
        # still ours (the session survived a disconnection during which this broker stopped
        # acting): take it up again under a new epoch, so anything sent before is fenced
        e, v = read_controller_epoch(store)
        try:
            store.set(CONTROLLER_EPOCH, str(e + 1).encode(), v)
        except Exception:
            return None
        return ControllerClaim(e + 1, v + 1)
    except Exception:
        # lost a race on /controller_epoch, or the store is unreachable: not the controller
        if read_controller(store) == broker_id:
            e, v = read_controller_epoch(store)
            return ControllerClaim(e, v)
        return None
    return ControllerClaim(epoch + 1, version + 1)


# -- partition state
def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def read_partition_state(store: MetadataStore, topic: str, partition: int) -> LeaderAndIsr | None:
    try:
        data, version = store.get(state_path(topic, partition))
    except NoNodeError:
        return None
    doc = json.loads(data)
    return LeaderAndIsr(int(doc["leader"]), int(doc["leader_epoch"]), [int(b) for b in doc["isr"]],
                        int(doc["controller_epoch"]), version)


def create_partition_states(store: MetadataStore, topic: str, states: dict[int, LeaderAndIsr]) -> None:
    """All partitions' state znodes in one multi (ZooKeeper's multi does not create
    parents, so the intermediate nodes are part of it)."""
    ops: list[Op] = []
    base = f"/brokers/topics/{topic}/partitions"
    if store.exists(base) is None:
        ops.append(Op("create", base))
    for p, s in sorted(states.items()):
        if store.exists(f"{base}/{p}") is None:
            ops.append(Op("create", f"{base}/{p}"))
        ops.append(Op("create", state_path(topic, p), s.to_json()))
    store.multi(ops)


def update_partition_state(store: MetadataStore, topic: str, partition: int, state: LeaderAndIsr) -> int:
    """Conditional write on the znode version the caller read; returns the new version.
    Raises BadVersionError when someone else changed it (controller or leader)."""
    return store.set(state_path(topic, partition), state.to_json(), state.zk_version)


# -- notifications
def notify_isr_change(store: MetadataStore, partitions: list[tuple[str, int]]) -> str:
    body = _j({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})
    return store.create(ISR_CHANGE_PREFIX, body, sequential=True, makepath=True)


def read_isr_changes(store: MetadataStore) -> tuple[list[str], set[tuple[str, int]]]:
    """(notification node names, partitions they mention)."""
    try:
        names = store.children(ISR_CHANGE)
    except NoNodeError:
        return [], set()
    out: set[tuple[str, int]] = set()
    for n in names:
        try:
            data, _ = store.get(f"{ISR_CHANGE}/{n}")
        except NoNodeError:
            continue
        for item in json.loads(data).get("partitions", []):
            out.add((str(item["topic"]), int(item["partition"])))
    return names, out


def delete_isr_changes(store: MetadataStore, names: list[str]) -> None:
    for n in names:
        with contextlib.suppress(NoNodeError):
            store.delete(f"{ISR_CHANGE}/{n}")


def read_admin_partitions(store: MetadataStore, path: str) -> list[dict[str, Any]]:
    try:
        data, _ = store.get(path)
    except NoNodeError:
        return []
    return list(json.loads(data).get("partitions", []))


# -- features (KIP-584; payload in controller.features)
def ensure_feature_znode(store: MetadataStore, default: dict[str, int]) -> None:
    """Kafka's controller enabling feature versioning: a cluster without /feature gets ``default``."""
    if store.exists(ft.FEATURE_ZNODE) is None:
        with contextlib.suppress(NodeExistsError):
            store.create(ft.FEATURE_ZNODE, ft.encode_znode(default))


def update_features(
    store: MetadataStore, updates: list[Any], validate_only: bool
) -> tuple[int, str | None, dict[str, int], int]:
    """UpdateFeatures on the controller: (error, message, finalized, epoch) after the update.
    The znode is written with its read version, so a concurrent writer fails it (retried by the client)."""
    try:
        data, version = store.get(ft.FEATURE_ZNODE)
        current = ft.decode_znode(data)
    except NoNodeError:
        data, version, current = b"", -1, {}
    except ValueError as e:
        return errors.FEATURE_UPDATE_FAILED, str(e), {}, -1
    result = ft.apply_updates(updates, current)
    if result.error_code != errors.NONE or validate_only or result.finalized == current:
        return result.error_code, result.error_message, result.finalized, version
    payload = ft.encode_znode(result.finalized)
    try:
        if version < 0:
            store.create(ft.FEATURE_ZNODE, payload)
            version = 0
        else:
            version = store.set(ft.FEATURE_ZNODE, payload, version)
    except (BadVersionError, NodeExistsError) as e:
        return errors.FEATURE_UPDATE_FAILED, f"The finalized features changed concurrently: {e}", current, version
    return errors.NONE, None, result.finalized, version


# -- znode ACLs (ZkData.defaultAcls), with zookeeper.set.acl=true
#
# ALL for the creator (the ``auth`` scheme: ZooKeeper records the identity the session authenticated
# as, ``sasl:<username>``), and READ for everyone (``world:anyone``) unless the path is sensitive
# (ZkData.SensitiveRootPaths: /config/users — SCRAM credentials —, /config/brokers, /delegation_token).

# ZooKeeper's permission bits (ZooDefs.Perms)
PERM_READ, PERM_WRITE, PERM_CREATE, PERM_DELETE, PERM_ADMIN = 1, 2, 4, 8, 16
PERM_ALL = 31

# ZkData.SensitiveRootPaths: never world-readable
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token")
# the old consumers' path stays open (ZkData.defaultAcls: ConsumerPathZNode)
CONSUMERS_PATH = "/consumers"


@dataclass(frozen=True)
class AclSpec:
    """One ZooKeeper ACL entry: permission bits, scheme and id."""

    perms: int
    scheme: str
    id: str


CREATOR_ALL = AclSpec(PERM_ALL, "auth", "")
WORLD_READ = AclSpec(PERM_READ, "world", "anyone")
WORLD_ALL = AclSpec(PERM_ALL, "world", "anyone")


def sensitive_path(path: str) -> bool:
    """ZkData.sensitivePath: a path at or under a sensitive root."""
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS)


def default_acls(path: str, secure: bool) -> tuple[AclSpec, ...]:
    """ZkData.defaultAcls: what a znode the broker creates at ``path`` carries."""
    if not secure or path == CONSUMERS_PATH:
        return (WORLD_ALL,)
    return (CREATOR_ALL,) if sensitive_path(path) else (CREATOR_ALL, WORLD_READ)

# ZkData.SecureRootPaths: the trees zookeeper-security-migration sets ACLs on
SECURE_ROOT_PATHS = (
    "/admin", "/brokers", "/cluster", "/config", CONTROLLER, CONTROLLER_EPOCH, ISR_CHANGE,
    "/latest_producer_id_block", LOG_DIR_EVENT, "/delegation_token", "/kafka-acl-extended", "/kafka-acl",
    "/kafka-acl-changes", "/kafka-acl-extended-changes", "/feature",
)
