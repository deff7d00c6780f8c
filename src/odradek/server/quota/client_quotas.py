"""The broker's client quotas: the configs read from the metadata store, one
:class:`ClientQuotaManager` per quota kind, and KIP-546's describe filter and alter checks (as
Kafka's ZkAdminManager.describeClientQuotas / alterClientQuotas).

Entity types: ``user`` and ``client-id`` (``ip`` connection-rate quotas, KIP-612, are not
implemented: filters and alterations naming them are refused with UNSUPPORTED_VERSION).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.controller.store import MetadataStore
from odradek.protocol import errors
from odradek.server.quota import store as qstore
from odradek.server.quota.manager import (
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
    if e.has_user:
        out.append((USER, e.user))
    if e.has_client:
        out.append((CLIENT_ID, e.client_id))
    return out


def entity_from_parts(parts: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    seen: dict[str, str | None] = {}
    for kind, name in parts:
        if kind not in (USER, CLIENT_ID):
            if kind == "ip":
                raise QuotaRequestError(errors.UNSUPPORTED_VERSION, "IP connection-rate quotas are not supported.")
            raise QuotaRequestError(errors.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
        if kind in seen:
            raise QuotaRequestError(errors.INVALID_REQUEST, f"Duplicate {kind} entity type")
        seen[kind] = name
    if not seen:
        raise QuotaRequestError(errors.INVALID_REQUEST, "Invalid empty client quota entity")
    return QuotaEntity(seen.get(USER), seen.get(CLIENT_ID), USER in seen and seen[USER] is None,
                       CLIENT_ID in seen and seen[CLIENT_ID] is None)


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
        for kind, m in self.managers.items():
            wanted: dict[QuotaEntity, float] = {}
            for e, cfg in self.configs.items():
                if kind in cfg:
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
            if c.entity_type not in (USER, CLIENT_ID):
                entity_from_parts([(c.entity_type, None)])  # raises the right error
            if c.entity_type in by_type:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Duplicate {c.entity_type} filter component entity type")
            if c.match_type == MATCH_EXACT and c.match is None:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Missing match for {c.entity_type} component")
            if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Unexpected match type {c.match_type}")
            by_type[c.entity_type] = c
        out = []
        for e, cfg in sorted(self.configs.items(), key=lambda kv: qstore.entity_path(kv[0])):
            parts = dict(entity_parts(e))
            if strict and set(parts) != set(by_type):
                continue
            if any(t not in parts or not _matches(parts[t], c) for t, c in by_type.items()):
                continue
            values = {k: float(v) for k, v in sorted(cfg.items()) if k in QUOTA_KEYS}
            if values:
                out.append((e, values))
        return out

    # -- AlterClientQuotas
    @staticmethod
    def check_ops(ops: Sequence[tuple[str, float, bool]]) -> None:
        seen: set[str] = set()
        for key, value, remove in ops:
            if key not in QUOTA_KEYS:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Invalid configuration key {key}")
            if key in seen:
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Duplicate quota key {key}")
            seen.add(key)
            if not remove and key in LONG_KEYS and value != int(value):
                raise QuotaRequestError(errors.INVALID_REQUEST, f"Configuration {key} must be a Long value")

    def alter(self, store: MetadataStore | None, e: QuotaEntity, ops: Sequence[tuple[str, float, bool]]) -> str | None:
        """Check and (with a store) write one entity's changes; returns the entity path written."""
        self.check_ops(ops)
        cfg = qstore.read(store, e) if store is not None else dict(self.configs.get(e, {}))
        for key, value, remove in ops:
            if remove:
                cfg.pop(key, None)
            else:
                cfg[key] = str(int(value)) if key in LONG_KEYS else repr(float(value))
        if store is None:
            return None
        return qstore.write(store, e, cfg)
