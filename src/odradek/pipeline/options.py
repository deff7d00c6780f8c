"""Options of the ``odradek`` Spark data source, parsed the way Spark's Kafka source parses them.

Pure functions (no Spark, no sockets) so they are unit-testable:

- which topics: exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a Java-style
  regex matched against the whole topic name) or ``assign`` (JSON ``{"topicA": [0, 1]}``);
- where to start / end: ``startingOffsets`` / ``endingOffsets`` = ``earliest`` | ``latest`` | JSON
  ``{"topicA": {"0": 23, "1": -2}}`` (-2 = earliest, -1 = latest), ``startingTimestamp`` /
  ``endingTimestamp`` (one epoch-ms timestamp for every partition), ``startingOffsetsByTimestamp`` /
  ``endingOffsetsByTimestamp`` (JSON ``{"topicA": {"0": 1700000000000}}``), with
  ``startingOffsetsByTimestampStrategy`` = ``error`` | ``latest`` when no record is that recent;
- ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``, ``minPartitions``,
  ``kafkaConsumer.pollTimeoutMs``, ``groupIdPrefix``. ``minPartitions`` gives the number of tasks asked
  for (Spark's rounding of each partition's share could give fewer); without it a read gets one task
  per core of the application (``source.default_min_partitions``: at most one per 50,000 records, so a
  small micro-batch keeps one task per topic partition), where Spark's Kafka source keeps one task per
  topic partition. And, Odradek's own, ``reader``: ``wire`` (the
  default: Fetch requests whose record batches are decoded into Arrow in C, ``wire_fetch.py``) or
  ``librdkafka`` (confluent-kafka's consumer; always used for ``includeHeaders`` and TLS/SASL), and
  ``coalesceBelowRecords`` (default 20,000; 0 turns it off): a batch of fewer records than that is read
  by one Spark task for all its topic partitions instead of one task per partition: a small micro-batch
  pays one task's fixed cost instead of several (measured in one run at 1,000 events/s, local[2],
  3 partitions: micro-batches of 412 ms median against 620 ms, freshness p50 0.61 s against 0.96 s),
  while a task decodes 20,000 records in about 15 ms;
- ``kafka.*``: handed to the confluent-kafka client with the prefix removed; the Java client's security
  settings (``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``, ...) become librdkafka's.
  ``kafka.isolation.level`` (``read_uncommitted``, the default as in Spark, or ``read_committed``: no
  aborted record, and the latest offset of a partition is its last stable offset) applies to planning
  and reading. ``kafka.check.crcs`` (the Java consumer's ``check.crcs``, default true as there): every
  fetched batch's CRC-32C is checked before its records are read, by both readers (librdkafka's
  ``check.crcs``, whose own default is false, is set to it); a mismatch fails the task naming the
  topic, partition and offset. ``false`` skips the check (a CPU saving; corrupt bytes then become rows
  or a malformed-record error).

- ``shareGroup`` (streaming only) switches the source to reading a share group, with ``shareTasks``,
  ``shareMaxRecordsPerTask`` and ``shareFetchWaitMs``; those options are parsed by ``share_source.py``.

Offsets kept in Spark's checkpoint are JSON dicts ``{"topic:partition": next_offset}`` with keys in a
canonical order (topic, then partition number), so equal offsets always serialise to equal JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1
DEFAULT_COALESCE_BELOW = 20_000

# Client settings that Spark's Kafka source refuses because the source manages them itself.
_UNSUPPORTED_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "the source does not commit offsets to Kafka; they live in Spark's checkpoint",
    "key.deserializer": "keys are always read as bytes",
    "value.deserializer": "values are always read as bytes",
    "key.serializer": "keys are always written as bytes",
    "value.serializer": "values are always written as bytes",
    "interceptor.classes": "interceptors are not supported",
}


class OptionError(ValueError):
    """A data-source option is missing, contradictory or malformed."""


TopicPartitionKey = tuple[str, int]
Offsets = dict[TopicPartitionKey, int]


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def parse_tp_key(key: str) -> TopicPartitionKey:
    topic, _, part = key.rpartition(":")
    if not topic or not part.lstrip("-").isdigit():
        raise OptionError(f"bad offset key {key!r}: expected 'topic:partition'")
    return topic, int(part)


def offsets_to_json(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, int]:
    """The checkpoint form: ``{"topic:partition": next}``, keys sorted by (topic, partition)."""
    return {tp_key(t, p): int(offsets[(t, p)]) for t, p in sorted(offsets)}


def offsets_from_json(data: Mapping[str, object]) -> Offsets:
    out: Offsets = {}
    for k, v in data.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise OptionError(f"bad offset for {k!r}: {v!r}")
        out[parse_tp_key(k)] = v
    return out


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    val = str(raw).strip().lower()
    if val in ("true", "1", "yes"):
        return True
    if val in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, got {raw!r}")


def _int(options: Mapping[str, str], name: str, default: int | None = None, minimum: int | None = None) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        val = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, got {raw!r}") from None
    if minimum is not None and val < minimum:
        raise OptionError(f"option {name!r} must be at least {minimum}, got {val}")
    return val


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``kind`` is ``earliest``, ``latest``, ``offsets`` (per-partition, -2/-1
    allowed), ``timestamp`` (one timestamp for all partitions) or ``timestamps`` (per partition)."""

    kind: str
    offsets: dict[TopicPartitionKey, int] = field(default_factory=dict)
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return json.dumps(offsets_to_json(self.offsets))


def offsets_option_json(offsets: Mapping[TopicPartitionKey, int]) -> str:
    """The ``startingOffsets`` / ``endingOffsets`` option form, ``{"topic": {"0": 23}}`` (what
    :func:`_per_partition_json` reads)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return json.dumps(out)


def _per_partition_json(raw: str, name: str) -> dict[TopicPartitionKey, int]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name!r}: not JSON ({e}): {raw!r}") from None
    if not isinstance(data, dict):
        raise OptionError(f"option {name!r} must be a JSON object like {{\"topic\": {{\"0\": 23}}}}, got {raw!r}")
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: partitions of {topic!r} must be an object, got {parts!r}")
        for p, off in parts.items():
            if not str(p).lstrip("-").isdigit() or not isinstance(off, int) or isinstance(off, bool):
                raise OptionError(f"option {name!r}: bad entry {topic!r}/{p!r}: {off!r}")
            out[(str(topic), int(p))] = off
    return out


def parse_offset_spec(options: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """``which`` is ``starting`` or ``ending``. Precedence as in Spark: ``<which>Timestamp``, then
    ``<which>OffsetsByTimestamp``, then ``<which>Offsets``."""
    ts = options.get(f"{which}Timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(str(ts).strip()))
        except ValueError:
            raise OptionError(f"option '{which}Timestamp' must be epoch milliseconds, got {ts!r}") from None
    by_ts = options.get(f"{which}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=_per_partition_json(str(by_ts), f"{which}OffsetsByTimestamp"))
    raw = str(options.get(f"{which}Offsets", default)).strip()
    low = raw.lower()
    if low in ("earliest", "latest"):
        spec = OffsetSpec(low)
    else:
        spec = OffsetSpec("offsets", offsets=_per_partition_json(raw, f"{which}Offsets"))
        for (t, p), off in spec.offsets.items():
            if off < EARLIEST:
                raise OptionError(f"option '{which}Offsets': offset {off} for {t}:{p} is not valid")
            if which == "ending" and off == EARLIEST:
                raise OptionError(f"option 'endingOffsets': earliest (-2) is not allowed ({t}:{p})")
    if which == "ending" and spec.kind == "earliest":
        raise OptionError("option 'endingOffsets' cannot be 'earliest'")
    return spec


@dataclass(frozen=True)
class TopicSelection:
    """Exactly one of subscribe / subscribePattern / assign."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartitionKey, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def select(self, available: Mapping[str, Iterable[int]]) -> list[TopicPartitionKey]:
        """The partitions to read, given the broker's metadata ``{topic: partitions}``. Internal topics
        (``__consumer_offsets`` ...) only match when named explicitly."""
        if self.kind == "assign":
            return sorted(self.assigned)
        out: list[TopicPartitionKey] = []
        for topic, parts in available.items():
            if self.kind == "subscribePattern" and topic.startswith("__"):
                continue
            if self.matches(topic):
                out.extend((topic, p) for p in parts)
        return sorted(out)


def parse_topics(options: Mapping[str, str]) -> TopicSelection:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be given"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    raw = str(options[kind]).strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return TopicSelection(kind, topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as e:
            raise OptionError(f"option 'subscribePattern': bad regex {raw!r}: {e}") from None
        return TopicSelection(kind, pattern=raw)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option 'assign': not JSON ({e}): {raw!r}") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in v) for v in data.values()
    ):
        raise OptionError(f"option 'assign' must look like {{\"topicA\": [0, 1]}}, got {raw!r}")
    assigned = tuple(sorted((str(t), int(p)) for t, parts in data.items() for p in parts))
    if not assigned:
        raise OptionError("option 'assign' names no partition")
    return TopicSelection(kind, assigned=assigned)


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _java_security_option(name: str, value: str) -> dict[str, str]:
    """A Java client's security setting (what Spark's Kafka source is given: ``kafka.sasl.jaas.config``,
    ``kafka.ssl.truststore.location``, ...) as librdkafka's; other names pass as they are."""
    if name == "sasl.jaas.config":
        opts = dict(_JAAS_OPTION.findall(value))
        return {k: opts[o] for k, o in (("sasl.username", "username"), ("sasl.password", "password")) if o in opts}
    if name == "ssl.truststore.location":
        return {"ssl.ca.location": value}
    if name == "ssl.keystore.location":  # a PEM key store: key and certificate in one file
        return {"ssl.certificate.location": value, "ssl.key.location": value}
    if name in ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password", "ssl.keystore.password"):
        return {}
    if name == "ssl.endpoint.identification.algorithm":
        return {name: value or "none"}
    return {name: value}


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options with the prefix removed (Spark's convention), the Java client's security
    settings (``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``) turned into librdkafka's.
    ``kafka.bootstrap.servers`` is required."""
    out: dict[str, str] = {}
    for k, v in options.items():
        if k.lower().startswith("kafka."):
            name = k[len("kafka."):]
            if name in _UNSUPPORTED_KAFKA:
                raise OptionError(f"Kafka option '{name}' is not supported: {_UNSUPPORTED_KAFKA[name]}")
            out.update(_java_security_option(name, str(v)))
    crcs = out.get("check.crcs")
    if crcs is not None and crcs.strip().lower() not in ("true", "false"):
        raise OptionError(f"Kafka option 'check.crcs' must be true or false, got {crcs!r}")
    iso = out.get("isolation.level")
    if iso is not None and iso not in ("read_committed", "read_uncommitted"):
        raise OptionError(f"Kafka option 'isolation.level' must be read_committed or read_uncommitted, got {iso!r}")
    if not out.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    return out


@dataclass(frozen=True)
class SourceOptions:
    kafka: dict[str, str]
    topics: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    poll_timeout_ms: int
    group_id_prefix: str
    timestamp_strategy: str
    reader: str = "wire"  # "wire" (Fetch + C record decoding) or "librdkafka" (confluent-kafka's consumer)
    coalesce_below: int = 20_000  # fewer records than this in a batch: one task reads every range (0: off)

    @property
    def check_crcs(self) -> bool:
        """``kafka.check.crcs``: check each fetched batch's CRC-32C (default true, as Kafka's consumer)."""
        return self.kafka.get("check.crcs", "true").strip().lower() != "false"

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> SourceOptions:
        opts = {str(k): str(v) for k, v in options.items()}
        # Spark's DataSource options are case-insensitive; normalise the ones we read by name.
        canon = {
            n.lower(): n
            for n in (
                "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
                "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
                "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "failOnDataLoss",
                "includeHeaders", "maxOffsetsPerTrigger", "minPartitions", "kafkaConsumer.pollTimeoutMs",
                "groupIdPrefix", "reader", "coalesceBelowRecords",
            )
        }
        norm: dict[str, str] = {}
        for k, v in opts.items():
            norm[canon.get(k.lower(), k)] = v
        if streaming and any(k in norm for k in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")):
            raise OptionError("ending offsets are not valid in a streaming query (use Trigger.AvailableNow)")
        strategy = norm.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
        max_per_trigger = _int(norm, "maxOffsetsPerTrigger", None, minimum=1)
        reader = norm.get("reader", "wire").strip().lower()
        if reader not in ("wire", "librdkafka"):
            raise OptionError("option 'reader' must be 'wire' or 'librdkafka'")
        return cls(
            kafka=kafka_params(norm),
            topics=parse_topics(norm),
            starting=parse_offset_spec(norm, "starting", "latest" if streaming else "earliest"),
            ending=parse_offset_spec(norm, "ending", "latest"),
            fail_on_data_loss=_bool(norm, "failOnDataLoss", True),
            include_headers=_bool(norm, "includeHeaders", False),
            max_offsets_per_trigger=max_per_trigger,
            min_partitions=_int(norm, "minPartitions", None, minimum=1),
            poll_timeout_ms=_int(norm, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=1) or 120_000,
            group_id_prefix=norm.get("groupIdPrefix", "spark-kafka-source"),
            timestamp_strategy=strategy,
            reader=reader,
            coalesce_below=_int(norm, "coalesceBelowRecords", DEFAULT_COALESCE_BELOW, minimum=0) or 0,
        )


def rate_limit(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int],
               limit: int) -> Offsets:
    """Spread ``limit`` offsets over the partitions in proportion to their backlog (Spark's rule:
    each partition advances by its share, rounded down, or up when the share is below one), never past
    ``latest``. ``start`` must hold every partition of ``latest`` (new partitions at their earliest)."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        size = backlog[tp]
        if size == 0:
            out[tp] = end
            continue
        share = limit * size / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin + step, end)
    return out
