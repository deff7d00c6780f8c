"""``odradek configs --entity-type users|clients|ips``: kafka-configs.sh's client quotas (and
KIP-612's connection_creation_rate of ip entities) over DescribeClientQuotas (48) and
AlterClientQuotas (49), KIP-546. Lines as Kafka's tool prints them::

    Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0
    Quota configs for the default client-id are consumer_byte_rate=2048.0
    Completed updating config for user-principal 'alice'.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.cli.add_config import parse_add_config
from odradek.client.wire import WireClient

_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
MATCH_EXACT, MATCH_DEFAULT = 0, 1


def describe_entity(parts: list[tuple[str, str | None]]) -> str:
    out = []
    for kind, name in parts:
        label = _LABELS.get(kind, kind)
        out.append(f"the default {label}" if name is None else f"{label} '{name}'")
    return ", ".join(out)


def _entities(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    parts: list[tuple[str, str | None]] = []
    for kind, name, default in args.entities:
        if kind not in _TYPES:
            raise ValueError(f"--entity-type {kind} cannot be combined with users, clients or ips")
        if default and name is not None:
            raise ValueError("--entity-name and --entity-default cannot both be given for one entity")
        parts.append((_TYPES[kind], None if default else name))
    if len(parts) > 1 and any(k == "ip" for k, _ in parts):
        raise ValueError("--entity-type ips cannot be combined with users or clients")
    return parts


def run_quotas(args: argparse.Namespace) -> int:
    try:
        parts = _entities(args)
        from odradek.client.command_config import client_security

        security = client_security(getattr(args, "command_config", None))
        with WireClient(args.bootstrap_server, timeout=args.command_timeout, security=security) as w:
            return _describe(w, args, parts) if args.describe else _alter(w, args, parts)
    except ValueError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


def _describe(w: WireClient, args: argparse.Namespace, parts: list[tuple[str, str | None]]) -> int:
    from kio.schema.describe_client_quotas.v1.request import ComponentData
    from kio.static.primitive import i8

    components = []
    for (kind, name), (_, given, default) in zip(parts, args.entities, strict=True):
        if default:
            components.append(ComponentData(entity_type=kind, match_type=i8(MATCH_DEFAULT), match=None))
        elif given is not None:
            components.append(ComponentData(entity_type=kind, match_type=i8(MATCH_EXACT), match=name))
        else:  # every entity of this type
            components.append(ComponentData(entity_type=kind, match_type=i8(2), match=None))
    r: Any = w.request(48, 1, components=tuple(components), strict=True)
    if int(r.error_code):
        print(f"Error: {r.error_message}", file=sys.stderr)
        return 1
    for entry in r.entries or ():
        ent = [(e.entity_type, e.entity_name) for e in entry.entity]
        values = ", ".join(f"{v.key}={float(v.value)}" for v in sorted(entry.values, key=lambda v: v.key))
        print(f"Quota configs for {describe_entity(ent)} are {values}")
    return 0


def _alter(w: WireClient, args: argparse.Namespace, parts: list[tuple[str, str | None]]) -> int:
    from kio.schema.alter_client_quotas.v1.request import EntityData, EntryData, OpData
    from kio.static.primitive import f64

    for (kind, name), (_, _, default) in zip(parts, args.entities, strict=True):
        if name is None and not default:
            raise ValueError(f"--entity-name or --entity-default is required for {kind} with --alter")
    ops = []
    for k, v in (parse_add_config(args.add_config) if args.add_config else {}).items():
        try:
            ops.append(OpData(key=k, value=f64(float(v)), remove=False))
        except ValueError:
            raise ValueError(f"{k}={v}: a quota value is a number") from None
    ops += [OpData(key=k.strip(), value=f64(0.0), remove=True)
            for k in (args.delete_config.split(",") if args.delete_config else [])]
    if not ops:
        raise ValueError("--alter needs --add-config or --delete-config")
    entity = tuple(EntityData(entity_type=k, entity_name=n) for k, n in parts)
    r: Any = w.request(49, 1, entries=(EntryData(entity=entity, ops=tuple(ops)),), validate_only=False)
    res = r.entries[0]
    if int(res.error_code):
        print(f"Error: {res.error_message}", file=sys.stderr)
        return 1
    print(f"Completed updating config for {describe_entity(parts)}.")
    return 0
