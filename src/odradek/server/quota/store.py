"""Client quota configs in the metadata store, Kafka's ZooKeeper layout (KIP-546 over ZooKeeper)::

    /config/users/<user>                      {"version": 1, "config": {"producer_byte_rate": "1048576"}}
    /config/users/<user>/clients/<client-id>  same payload
    /config/clients/<client-id>               same payload
    /config/ips/<ip>                          {"version": 1, "config": {"connection_creation_rate": "10"}}

Names are sanitized as Kafka's Sanitizer does (URL encoding: letters, digits and ``.-_*`` kept,
``*`` then written %2A, everything else percent-encoded as UTF-8); the default entity is
``<default>``. A change is announced under /config/changes with the entity path (``users/u/clients/c``,
``clients/c``) so every broker reloads, as Kafka's DynamicConfigManager does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import unquote

from odradek.controller.store import MetadataStore, NoNodeError
from odradek.server.quota.manager import DEFAULT_NAME, QuotaEntity, parse_zk_path, zk_path

_KEEP = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    return "".join(c if c in _KEEP else "".join(f"%{b:02X}" for b in c.encode()) for c in name)


def desanitize(name: str) -> str:
    return unquote(name)


def entity_path(e: QuotaEntity) -> str:
    """``users/<sanitized>/clients/<sanitized>`` (defaults as ``<default>``)."""
    if e.has_ip:
        return zk_path(e)  # an address needs no sanitizing (Kafka writes it as it is)
    sane = QuotaEntity(
        None if e.user is None else sanitize(e.user), None if e.client_id is None else sanitize(e.client_id),
        e.user_default, e.client_default,
    )
    return zk_path(sane)


def _entity_of_path(path: str) -> QuotaEntity:
    e = parse_zk_path(path)
    if e.has_ip:
        return e
    return QuotaEntity(
        None if e.user is None else desanitize(e.user), None if e.client_id is None else desanitize(e.client_id),
        e.user_default, e.client_default,
    )


def _read(store: MetadataStore, path: str) -> dict[str, str]:
    try:
        data, _ = store.get(path)
    except NoNodeError:
        return {}
    if not data:
        return {}
    try:
        doc = json.loads(data)
        cfg = doc.get("config", {}) if isinstance(doc, dict) else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in cfg.items()} if isinstance(cfg, dict) else {}


def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return store.children(path)
    except NoNodeError:
        return []


def read_all(store: MetadataStore) -> dict[QuotaEntity, dict[str, str]]:
    """Every quota entity with a non-empty config."""
    paths: list[str] = []
    for user in _children(store, "/config/users"):
        paths.append(f"users/{user}")
        paths.extend(f"users/{user}/clients/{c}" for c in _children(store, f"/config/users/{user}/clients"))
    paths.extend(f"clients/{c}" for c in _children(store, "/config/clients"))
    paths.extend(f"ips/{i}" for i in _children(store, "/config/ips"))
    out: dict[QuotaEntity, dict[str, str]] = {}
    for p in paths:
        cfg = _read(store, f"/config/{p}")
        if cfg:
            try:
                out[_entity_of_path(p)] = cfg
            except ValueError:
                continue
    return out


def read(store: MetadataStore, e: QuotaEntity) -> dict[str, str]:
    return _read(store, f"/config/{entity_path(e)}")


def write(store: MetadataStore, e: QuotaEntity, config: Mapping[str, str]) -> str:
    """Replace the entity's quota config; returns the entity path to announce."""
    rel = entity_path(e)
    path = f"/config/{rel}"
    data = json.dumps({"version": 1, "config": dict(sorted(config.items()))}).encode()
    if store.exists(path) is None:
        store.create(path, data, makepath=True)
    else:
        store.set(path, data)
    return rel


__all__ = ["DEFAULT_NAME", "desanitize", "entity_path", "read", "read_all", "sanitize", "write"]
