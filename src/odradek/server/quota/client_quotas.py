"""The broker's client quotas: the configs read from the metadata store, one
:class:`ClientQuotaManager` per quota kind, and KIP-546's describe filter and alter checks (as
Kafka's ZkAdminManager.describeClientQuotas / alterClientQuotas).

Entity types: ``user`` and ``client-id`` (alone or paired), and ``ip`` alone (KIP-612: its one
key, ``connection_creation_rate``, bounds the connections an address may open per second; the
listener applies it through :attr:`ClientQuotas.ip_rates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.controller.store import MetadataStore
from odradek.protocol import errors
from odradek.server.quota import store as qstore
from odradek.server.quota.manager import (
    CONNECTION_CREATION,
    CONTROLLER_MUTATION,
    FETCH,
    PRODUCE,
    QUOTA_KEYS,
    REQUEST,
    ClientQuotaManager,
    QuotaConfig,
    QuotaEntity,
)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
LONG_KEYS = frozenset({PRODUCE, FETCH})

# DescribeClientQuotas match types
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


class QuotaRequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def entity_parts(e: QuotaEntity) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default), user first."""
    out: list[tuple[str, str | None]] = []
    if e.has_ip:
        return [(IP, e.ip)]
    if e.has_user:
        out.append((USER, e.user))
    if e.has_client:
        out.append((CLIENT_ID, e.client_id))
    return out


def entity_from_parts(parts: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    seen: dict[str, str | None] = {}
    for kind, name in parts:
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(errors.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
        if kind in seen:
            raise QuotaRequestError(errors.INVALID_REQUEST, f"Duplicate {kind} entity type")
        seen[kind] = name
    if not seen:
        raise QuotaRequestError(errors.INVALID_REQUEST, "Invalid empty client quota entity")
    if IP in seen:
        if len(seen) > 1:
            raise QuotaRequestError(errors.INVALID_REQUEST, "Invalid quota entity combination, IP entity should "
                                    "not be combined with User or ClientId entities.")
        ip = seen[IP]
        if ip is not None and not _valid_ip(ip):
            raise QuotaRequestError(errors.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
        return QuotaEntity(ip=ip, ip_default=ip is None)
    return QuotaEntity(seen.get(USER), seen.get(CLIENT_ID), USER in seen and seen[USER] is None,
                       CLIENT_ID in seen and seen[CLIENT_ID] is None)


def _valid_ip(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _matches(name: str | None, c: Component) -> bool:
    if c.match_type == MATCH_EXACT:
        return name is not None and name == c.match
    if c.match_type == MATCH_DEFAULT:
        return name is None
    return name is not None  # SPECIFIED


class ClientQuotas:
    def __init__(self, config: QuotaConfig | None = None) -> None:
        self.config = config or QuotaConfig()
        self.managers = {k: ClientQuotaManager(k, self.config) for k in QUOTA_KEYS}
        self.configs: dict[QuotaEntity, dict[str, str]] = {}
        # KIP-612: connection_creation_rate per address, the default address under None
        self.ip_rates: dict[str | None, float] = {}

    @property
    def produce(self) -> ClientQuotaManager:
        return self.managers[PRODUCE]

    @property
    def fetch(self) -> ClientQuotaManager:
        return self.managers[FETCH]

    @property
    def request(self) -> ClientQuotaManager:
        return self.managers[REQUEST]

    @property
    def controller_mutation(self) -> ClientQuotaManager:
        return self.managers[CONTROLLER_MUTATION]

    def apply(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        """Make ``configs`` the quotas in force (bounds change at once; rates are kept)."""
        self.configs = {e: dict(c) for e, c in configs.items() if c}
        ip_rates: dict[str | None, float] = {}
        for e, cfg in self.configs.items():
            if e.has_ip and CONNECTION_CREATION in cfg:
                try:
                    ip_rates[e.ip] = float(cfg[CONNECTION_CREATION])
                except ValueError:
                    continue
        self.ip_rates = ip_rates
        for kind, m in self.managers.items():
            wanted: dict[QuotaEntity, float] = {}
            for e, cfg in self.configs.items():
                if kind in cfg and not e.has_ip:
                    try:
                        wanted[e] = float(cfg[kind])
                    except ValueError:
                        continue
            for e in set(m.quotas) - set(wanted):
                m.update_quota(e, None)
            for e, v in wanted.items():
                if m.quotas.get(e) != v:
                    m.update_quota(e, v)

    def reload(self, store: MetadataStore) -> None:
        self.apply(qstore.read_all(store))

    # -- DescribeClientQuotas
    def describe(self, components: Sequence[Component], strict: bool) -> list[tuple[QuotaEntity, dict[str, float]]]:
        by_type: dict[str, Component] = {}
        for c in components:
            if c.entity_type not in (USER, CLIENT_ID, IP):
                entity_from_parts([(c.entity_type, None)])  # raises the right error
            if c.entity_type in by_type:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Duplicate {c.entity_type} filter component entity type")
            if c.match_type == MATCH_EXACT and c.match is None:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Missing match for {c.entity_type} component")
            if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Unexpected match type {c.match_type}")
            by_type[c.entity_type] = c
        if IP in by_type and len(by_type) > 1:
            raise QuotaRequestError(errors.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                                    "component should not be used with User or ClientId filter component.")
        out = []
        for e, cfg in sorted(self.configs.items(), key=lambda kv: qstore.entity_path(kv[0])):
            parts = dict(entity_parts(e))
            if strict and set(parts) != set(by_type):
                continue
            if any(t not in parts or not _matches(parts[t], c) for t, c in by_type.items()):
                continue
            values = {k: float(v) for k, v in sorted(cfg.items()) if k in _keys(e)}
            if values:
                out.append((e, values))
        return out

    # -- AlterClientQuotas
    @staticmethod
    def check_ops(ops: Sequence[tuple[str, float, bool]], e: QuotaEntity | None = None) -> None:
        seen: set[str] = set()
        keys = _keys(e) if e is not None else (*QUOTA_KEYS, CONNECTION_CREATION)
        for key, value, remove in ops:
            if key not in keys:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Invalid configuration key {key}")
            if key in seen:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Duplicate quota key {key}")
            seen.add(key)
            if not remove and key in LONG_KEYS and value != int(value):
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Configuration {key} must be a Long value")
            if not remove and key == CONNECTION_CREATION and (value != int(value) or not 0 <= value < 2**31):
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Configuration {key} must be an Int value")

    def alter(self, store: MetadataStore | None, e: QuotaEntity, ops: Sequence[tuple[str, float, bool]]) -> str | None:
        """Check and (with a store) write one entity's changes; returns the entity path written."""
        self.check_ops(ops, e)
        cfg = qstore.read(store, e) if store is not None else dict(self.configs.get(e, {}))
        for key, value, remove in ops:
            if remove:
                cfg.pop(key, None)
            else:
                cfg[key] = str(int(value)) if key in LONG_KEYS or key == CONNECTION_CREATION else repr(float(value))
        if store is None:
            return None
        return qstore.write(store, e, cfg)


def _keys(e: QuotaEntity) -> tuple[str, ...]:
    """The quota keys an entity may have: connection_creation_rate for ips, the client quotas else."""
    return (CONNECTION_CREATION,) if e.has_ip else QUOTA_KEYS
