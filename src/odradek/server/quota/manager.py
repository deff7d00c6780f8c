"""Client quotas as Kafka's ClientQuotaManager applies them — pure, the clock passed in.

Entities (KIP-55, KIP-546): a quota is set for a user, a client id, or a (user, client id) pair,
each name either a concrete one or the default (``<default>`` in ZooKeeper paths, None in
:class:`QuotaEntity` fields with the ``*_default`` flags). For a request from (user, client id)
the quota that applies is the first one set, in Kafka's order:

1. /config/users/<user>/clients/<client-id>
2. /config/users/<user>/clients/<default>
3. /config/users/<user>
4. /config/users/<default>/clients/<client-id>
5. /config/users/<default>/clients/<default>
6. /config/users/<default>
7. /config/clients/<client-id>
8. /config/clients/<default>

The matched level also decides who shares a rate (Kafka's metric tags): a quota on a user
(levels 3 and 6) is shared by all that user's client ids, one on a client id (7, 8) by all users
of that client id, one on a pair (1, 2, 4, 5) by that pair only. Without any quota a client is
not throttled.

Throttling (Kafka's QuotaUtils.throttleTime): once recording a value takes the measured rate
above the bound, the client waits ``(rate - bound) / bound * window`` ms, the window being the
rate's current window size; the request-time quota (``request_percentage``) caps it at one
``quota.window.size.seconds``. Quota kinds: ``producer_byte_rate`` and ``consumer_byte_rate``
(bytes/s), ``request_percentage`` (percent of one I/O thread's time), ``controller_mutation_rate``
(KIP-599: partitions created or deleted per second, a token bucket).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.server.quota.rate import SampledRate, TokenBucket

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
CONTROLLER_MUTATION = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION)
CONNECTION_CREATION = "connection_creation_rate"  # KIP-612: the one quota of ip entities

DEFAULT_NAME = "<default>"  # Kafka's ConfigEntityName.Default in ZooKeeper paths

# nanoseconds of request time -> percent-seconds (Kafka's ClientQuotaManager.NanosToPercentagePerSecond)
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1_000_000_000


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota's entity: ``user``/``client_id`` name it; ``None`` with the flag False means the
    entity type is absent, ``None`` with the flag True its default."""

    user: str | None = None
    client_id: str | None = None
    user_default: bool = False
    client_default: bool = False
    ip: str | None = None  # KIP-612 ip entities (never combined with a user or client id)
    ip_default: bool = False

    @property
    def has_user(self) -> bool:
        return self.user is not None or self.user_default

    @property
    def has_client(self) -> bool:
        return self.client_id is not None or self.client_default

    @property
    def has_ip(self) -> bool:
        return self.ip is not None or self.ip_default


def entity(*, user: str | None | bool = False, client_id: str | None | bool = False) -> QuotaEntity:
    """``user=None``/``client_id=None`` is the default entity; False (the default) leaves it out."""
    u = None if user is False or user is None else str(user)
    c = None if client_id is False or client_id is None else str(client_id)
    return QuotaEntity(u, c, user is None, client_id is None)


def zk_path(e: QuotaEntity) -> str:
    """The entity's znode under /config (Kafka's ZooKeeper layout; names are sanitized by the caller)."""
    parts = []
    if e.has_ip:
        return f"ips/{DEFAULT_NAME if e.ip_default else e.ip}"
    if e.has_user:
        parts.append(f"users/{DEFAULT_NAME if e.user_default else e.user}")
    if e.has_client:
        parts.append(f"clients/{DEFAULT_NAME if e.client_default else e.client_id}")
    if not parts:
        raise ValueError("a quota entity names a user, a client id or both")
    return "/".join(parts)


def parse_zk_path(path: str) -> QuotaEntity:
    """Inverse of :func:`zk_path` (``users/u``, ``users/u/clients/c``, ``clients/c``, ``ips/i``)."""
    segs = path.strip("/").split("/")
    if len(segs) == 2 and segs[0] == "ips":
        return QuotaEntity(ip=None if segs[1] == DEFAULT_NAME else segs[1], ip_default=segs[1] == DEFAULT_NAME)
    user: str | None | bool = False
    client: str | None | bool = False
    while segs:
        if len(segs) < 2 or segs[0] not in ("users", "clients"):
            raise ValueError(f"not a quota entity path: {path!r}")
        kind, name = segs[0], segs[1]
        value = None if name == DEFAULT_NAME else name
        if kind == "users" and user is False and client is False:
            user = value
        elif kind == "clients" and client is False:
            client = value
        else:
            raise ValueError(f"not a quota entity path: {path!r}")
        segs = segs[2:]
    return entity(user=user, client_id=client)


def _levels(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """Kafka's eight levels, each with the metric tags (shared-rate key) it gives."""
    return [
        (entity(user=user, client_id=client_id), (user, client_id)),
        (entity(user=user, client_id=None), (user, client_id)),
        (entity(user=user), (user, "")),
        (entity(user=None, client_id=client_id), (user, client_id)),
        (entity(user=None, client_id=None), (user, client_id)),
        (entity(user=None), (user, "")),
        (entity(client_id=client_id), ("", client_id)),
        (entity(client_id=None), ("", client_id)),
    ]


def resolve(quotas: Mapping[QuotaEntity, float], user: str, client_id: str) -> tuple[QuotaEntity, tuple[str, str]] | None:
    """The entity whose quota applies to (user, client id) and the key of the rate it shares."""
    for e, tags in _levels(user, client_id):
        if e in quotas:
            return e, tags
    return None


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    samples: int = 11  # quota.window.num
    window_s: int = 1  # quota.window.size.seconds


class ClientQuotaManager:
    """One quota kind's bounds and the rates they are measured on (Kafka's ClientQuotaManager)."""

    def __init__(self, kind: str, config: QuotaConfig | None = None) -> None:
        if kind not in QUOTA_KEYS:
            raise ValueError(f"unknown quota kind {kind!r}")
        self.kind = kind
        self.config = config or QuotaConfig()
        self.quotas: dict[QuotaEntity, float] = {}
        self._rates: dict[tuple[str, str], SampledRate | TokenBucket] = {}
        # (user, client id) -> its resolution; cleared whenever a bound changes
        self._resolved: dict[tuple[str, str], tuple[QuotaEntity, tuple[str, str]] | None] = {}
        # (user, client id) -> (sum, count) of its throttle times: Kafka's throttle-time sensor
        self.throttle_times: dict[tuple[str, str], tuple[SampledRate, SampledRate]] = {}

    @property
    def window_ms(self) -> int:
        return self.config.window_s * 1000

    def update_quota(self, e: QuotaEntity, bound: float | None) -> None:
        """Set (or with None remove) an entity's bound; rates are kept, bounds apply at once."""
        if bound is None:
            self.quotas.pop(e, None)
        else:
            self.quotas[e] = float(bound)
        self._resolved.clear()
        if self.kind == CONTROLLER_MUTATION:
            self._rates.clear()  # buckets are sized by their quota

    def _resolve(self, user: str, client_id: str) -> tuple[QuotaEntity, tuple[str, str]] | None:
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            if len(self._resolved) > 100_000:  # many short-lived client ids: start over
                self._resolved.clear()
            hit = self._resolved[key] = resolve(self.quotas, user, client_id)
            return hit

    def quota(self, user: str, client_id: str) -> float | None:
        hit = self._resolve(user, client_id)
        return None if hit is None else self.quotas[hit[0]]

    def _rate(self, tags: tuple[str, str], bound: float, now_ms: int) -> SampledRate | TokenBucket:
        r = self._rates.get(tags)
        if r is None:
            if self.kind == CONTROLLER_MUTATION:
                r = TokenBucket(bound, self.config.samples, self.window_ms, now_ms)
            else:
                r = SampledRate(self.config.samples, self.window_ms)
            self._rates[tags] = r
        return r

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, percent-seconds or mutations) and the throttle time it earns."""
        if not self.quotas:
            return 0  # no quota anywhere: nothing measured (the common case costs one check)
        hit = self._resolve(user, client_id)
        if hit is None:
            return 0
        throttle = self._record(hit, value, now_ms)
        self._note_throttle(hit[1], throttle, now_ms)
        return throttle

    def _note_throttle(self, tags: tuple[str, str], throttle_ms: int, now_ms: int) -> None:
        """Kafka's throttle-time sensor of the (user, client id): every throttle time, zero or not,
        of a client a quota applies to, averaged over the quota window (read by odradek.metrics)."""
        pair = self.throttle_times.get(tags)
        if pair is None:
            if len(self.throttle_times) > 10_000:
                self.throttle_times.clear()
            pair = self.throttle_times[tags] = (SampledRate(self.config.samples, self.window_ms),
                                                SampledRate(self.config.samples, self.window_ms))
        pair[0].record(throttle_ms, now_ms)
        pair[1].record(1, now_ms)

    def throttle_time_avg_ms(self, now_ms: int) -> dict[tuple[str, str], float]:
        """(user, client id) -> average throttle time (ms) over the quota window."""
        out: dict[tuple[str, str], float] = {}
        for tags, (total, count) in self.throttle_times.items():
            n = count.total(now_ms)
            out[tags] = total.total(now_ms) / n if n > 0 else 0.0
        return out

    def _record(self, hit: tuple[QuotaEntity, tuple[str, str]], value: float, now_ms: int) -> int:
        e, tags = hit
        bound = self.quotas[e]
        r = self._rate(tags, bound, now_ms)
        r.record(value, now_ms)
        if isinstance(r, TokenBucket):
            return r.throttle_time_ms(now_ms)
        rate = r.measure(now_ms)
        if rate <= bound:
            return 0
        if bound <= 0:
            return self.window_ms * self.config.samples  # a zero quota: as long as a full window
        throttle = round((rate - bound) / bound * r.window_size_ms(now_ms))
        if self.kind == REQUEST:
            throttle = min(throttle, self.window_ms)  # ClientRequestQuotaManager's maxThrottleTimeMs
        return int(throttle)

    def bucket(self, user: str, client_id: str, now_ms: int) -> TokenBucket | None:
        """The token bucket (user, client id) shares, None without a quota (controller mutations)."""
        if self.kind != CONTROLLER_MUTATION or not self.quotas:
            return None
        hit = self._resolve(user, client_id)
        if hit is None:
            return None
        r = self._rate(hit[1], self.quotas[hit[0]], now_ms)
        assert isinstance(r, TokenBucket)
        return r

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take a recorded value back (a throttled Fetch returns no data: Kafka's unrecordQuotaSensor)."""
        hit = self._resolve(user, client_id)
        if hit is not None:
            r = self._rates.get(hit[1])
            if r is not None:
                r.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: bound * (samples - 1) * window seconds, what a client
        may take at once (bounds a consumer Fetch's max bytes); None without a quota."""
        bound = self.quota(user, client_id)
        return None if bound is None else bound * max(self.config.samples - 1, 1) * self.config.window_s
