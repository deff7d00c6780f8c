"""The console's view-model: pure functions from Kafka responses (kio entities, read by attribute)
and records to what a page shows. No I/O, no HTML (odradek.console.pages renders these)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol import errors as _errors

_ERROR_NAMES = {v: k for k, v in vars(_errors).items() if k.isupper() and isinstance(v, int)}


def error_name(code: int) -> str:
    """Kafka's name of an error code (TOPIC_AUTHORIZATION_FAILED ...)."""
    return _ERROR_NAMES.get(int(code), f"error {int(code)}")


@dataclass(frozen=True)
class BrokerRow:
    node_id: int
    host: str
    port: int
    rack: str | None
    controller: bool


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    size: int | None = None  # bytes of this broker's replica, None when it holds none
    # tiered storage (KIP-405): bytes of its remote segments (Kafka's RemoteLogSizeBytes), where the broker
    # serving the console leads it; None otherwise
    remote_size: int | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicRow:
    name: str
    internal: bool
    error: str | None
    partitions: tuple[PartitionRow, ...]

    @property
    def size(self) -> int:
        return sum(p.size or 0 for p in self.partitions)

    @property
    def remote_size(self) -> int | None:
        """Bytes in the remote tier (the partitions with a known remote size); None when none has one."""
        known = [p.remote_size for p in self.partitions if p.remote_size is not None]
        return sum(known) if known else None


@dataclass(frozen=True)
class Cluster:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerRow, ...]
    topics: tuple[TopicRow, ...]


def cluster_view(metadata: Any, sizes: Mapping[tuple[str, int], int] | None = None,
                 remote_sizes: Mapping[tuple[str, int], int] | None = None) -> Cluster:
    """A Metadata response (and DescribeLogDirs sizes, and the remote tier's sizes of tiered partitions) as
    brokers and topics, sorted by id and name."""
    sizes = sizes or {}
    remote_sizes = remote_sizes or {}
    controller = int(metadata.controller_id)
    brokers = tuple(sorted(
        (BrokerRow(int(b.node_id), str(b.host), int(b.port), b.rack, int(b.node_id) == controller)
         for b in metadata.brokers), key=lambda b: b.node_id))
    topics = []
    for t in metadata.topics:
        code = int(t.error_code)
        parts = tuple(sorted(
            (PartitionRow(int(p.partition_index), int(p.leader_id), tuple(int(r) for r in p.replica_nodes),
                          tuple(int(r) for r in p.isr_nodes), sizes.get((str(t.name), int(p.partition_index))),
                          remote_sizes.get((str(t.name), int(p.partition_index))))
             for p in t.partitions), key=lambda p: p.partition))
        topics.append(TopicRow(str(t.name), bool(t.is_internal), error_name(code) if code else None, parts))
    return Cluster(getattr(metadata, "cluster_id", None), controller, brokers,
                   tuple(sorted(topics, key=lambda t: t.name)))


def log_sizes(describe_log_dirs: Any) -> dict[tuple[str, int], int]:
    """(topic, partition) -> bytes from a DescribeLogDirs response (the largest copy when a
    partition is in more than one directory: a move in progress)."""
    out: dict[tuple[str, int], int] = {}
    for d in describe_log_dirs.results:
        if int(d.error_code):
            continue
        for t in d.topics:
            for p in t.partitions:
                key = (str(t.name), int(p.partition_index))
                out[key] = max(out.get(key, 0), int(p.partition_size))
    return out


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
            7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


def config_rows(describe_configs: Any) -> tuple[str | None, tuple[ConfigRow, ...]]:
    """(error, rows) of the first resource of a DescribeConfigs response; sensitive values hidden."""
    res = describe_configs.results[0]
    if int(res.error_code):
        return error_text(res.error_code, res.error_message), ()
    rows = tuple(sorted(
        (ConfigRow(str(c.name), None if c.is_sensitive else c.value, _SOURCES.get(int(c.config_source), "UNKNOWN"),
                   bool(c.read_only), bool(c.is_sensitive)) for c in res.configs), key=lambda r: r.name))
    return None, rows


def error_text(code: Any, message: str | None) -> str:
    name = error_name(int(code))
    return f"{name}: {message}" if message else name


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    group_type: str


def group_rows(list_groups: Any) -> tuple[str | None, tuple[GroupRow, ...]]:
    if int(list_groups.error_code):
        return error_name(list_groups.error_code), ()
    return None, tuple(sorted(
        (GroupRow(str(g.group_id), str(g.group_state), str(g.protocol_type), str(getattr(g, "group_type", "classic")))
         for g in list_groups.groups), key=lambda g: g.group_id))


@dataclass(frozen=True)
class MemberRow:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None


@dataclass(frozen=True)
class LagRow:
    topic: str
    partition: int
    committed: int
    end: int | None

    @property
    def lag(self) -> int | None:
        if self.end is None or self.committed < 0:
            return None
        return max(self.end - self.committed, 0)


@dataclass(frozen=True)
class GroupDetail:
    group_id: str
    state: str
    protocol: str
    error: str | None
    members: tuple[MemberRow, ...]
    lag: tuple[LagRow, ...] = field(default=())

    @property
    def active(self) -> bool:
        """Whether the group has members (kafka-consumer-groups.sh refuses a reset unless the
        group is Empty or Dead)."""
        return self.state not in ("Empty", "Dead", "")

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.lag)


def group_detail(described: Any) -> GroupDetail:
    """The first group of a DescribeGroups response."""
    g = described.groups[0]
    code = int(g.error_code)
    members = tuple(MemberRow(str(m.member_id), str(m.client_id), str(m.client_host),
                              getattr(m, "group_instance_id", None)) for m in g.members)
    return GroupDetail(str(g.group_id), str(g.group_state), str(g.protocol_data),
                       error_name(code) if code else None, members)


def committed(offset_fetch: Any) -> tuple[str | None, dict[tuple[str, int], int]]:
    """(error, (topic, partition) -> committed offset) of an OffsetFetch (v1-v7) response."""
    code = int(getattr(offset_fetch, "error_code", 0))
    if code:
        return error_name(code), {}
    out: dict[tuple[str, int], int] = {}
    for t in offset_fetch.topics:
        for p in t.partitions:
            if int(p.error_code) == 0 and int(p.committed_offset) >= 0:
                out[(str(t.name), int(p.partition_index))] = int(p.committed_offset)
    return None, out


def list_offsets(response: Any) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset of a ListOffsets response; partitions in error are left out."""
    out: dict[tuple[str, int], int] = {}
    for t in response.topics:
        for p in t.partitions:
            if int(p.error_code) == 0:
                out[(str(t.name), int(p.partition_index))] = int(p.offset)
    return out


def list_offsets_errors(response: Any) -> list[str]:
    return [f"{t.name}-{p.partition_index}: {error_name(p.error_code)}"
            for t in response.topics for p in t.partitions if int(p.error_code)]


def lag_rows(committed_offsets: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> tuple[LagRow, ...]:
    return tuple(LagRow(t, p, off, ends.get((t, p))) for (t, p), off in sorted(committed_offsets.items()))


# -- records


@dataclass(frozen=True)
class Shown:
    """Bytes as a page shows them: ``text`` (UTF-8 without control characters) or base64, and
    whether they were absent (null)."""

    text: str
    kind: str  # "null" | "text" | "base64"
    size: int


_ALLOWED_CONTROLS = frozenset("\t\n\r")


def show_bytes(b: bytes | None, limit: int = 4096) -> Shown:
    """Record keys, values and header values shown safely: valid UTF-8 without control characters
    as text, anything else as base64 (cut at ``limit`` bytes); escaping for HTML is the renderer's."""
    if b is None:
        return Shown("null", "null", 0)
    cut = b[:limit]
    try:
        text = cut.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not any((ord(c) < 32 and c not in _ALLOWED_CONTROLS) or 0x7F <= ord(c) < 0xA0
                                    for c in text):
        return Shown(text + ("…" if len(b) > limit else ""), "text", len(b))
    return Shown(base64.b64encode(cut).decode() + ("…" if len(b) > limit else ""), "base64", len(b))


@dataclass(frozen=True)
class RecordRow:
    offset: int
    timestamp: int
    key: Shown
    value: Shown
    headers: tuple[tuple[str, Shown], ...]


def record_rows(records: Iterable[Any], start: int, limit: int) -> tuple[RecordRow, ...]:
    """Records (offset, timestamp, key, value, headers) at or after ``start``, at most ``limit``."""
    out: list[RecordRow] = []
    for r in records:
        if r.offset < start:
            continue
        if len(out) >= limit:
            break
        out.append(RecordRow(r.offset, r.timestamp, show_bytes(r.key), show_bytes(r.value),
                             tuple((str(k), show_bytes(v)) for k, v in r.headers)))
    return tuple(out)


# -- actions: parsing form input


class FormError(ValueError):
    pass


def parse_int(form: Mapping[str, str], name: str, default: int | None = None, lo: int | None = None) -> int:
    raw = form.get(name, "").strip()
    if not raw:
        if default is None:
            raise FormError(f"{name} is required")
        return default
    try:
        v = int(raw)
    except ValueError:
        raise FormError(f"{name} must be an integer, not {raw!r}") from None
    if lo is not None and v < lo:
        raise FormError(f"{name} must be at least {lo}")
    return v


def parse_configs(text: str) -> dict[str, str]:
    """``name=value`` pairs, one a line or comma-separated (kafka-configs.sh --add-config style)."""
    out: dict[str, str] = {}
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise FormError(f"a config is name=value, not {item!r}")
        out[name.strip()] = value.strip()
    return out


RESET_TARGETS = ("earliest", "latest", "offset")


def reset_refusal(detail: GroupDetail) -> str | None:
    """kafka-consumer-groups.sh's refusal of a reset while the group is active."""
    if detail.error is not None:
        return detail.error
    if detail.active:
        return (f"Assignments can only be reset if the group '{detail.group_id}' is inactive, "
                f"but the current state is {detail.state}.")
    return None


def sequence_str(xs: Sequence[int]) -> str:
    return ",".join(str(x) for x in xs)
