"""``odradek acls``: kafka-acls.sh (--add / --remove / --list, --producer / --consumer)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

_OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
               "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--principal", help="with --list: only this principal's ACLs")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[], choices=_OPERATIONS, type=_operation_name)
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default="literal",
                   choices=["literal", "prefixed", "any", "match"], type=str.lower)
    p.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on the topics")
    p.add_argument("--consumer", action="store_true", help="READ, DESCRIBE on the topics, READ on the groups")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh compatibility")
    p.add_argument("--command-timeout", type=float, default=30.0)
    p.set_defaults(func=run)


def _operation_name(raw: str) -> str:
    for op in _OPERATIONS:
        if op.lower() == raw.replace("_", "").replace("-", "").lower():
            return op
    return raw


def _resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    out = [("TOPIC", t) for t in args.topic] + [("GROUP", g) for g in args.group]
    out += [("TRANSACTIONAL_ID", t) for t in args.transactional_id]
    if args.cluster:
        out.append(("CLUSTER", "kafka-cluster"))
    return out


def _operations_for(args: argparse.Namespace, rtype: str) -> list[str]:
    ops = list(args.operation)
    if args.producer:
        ops += {"TOPIC": ["Write", "Describe", "Create"], "TRANSACTIONAL_ID": ["Write", "Describe"]}.get(rtype, [])
        if rtype == "CLUSTER" and args.idempotent:
            ops.append("IdempotentWrite")
    if args.consumer:
        ops += {"TOPIC": ["Read", "Describe"], "GROUP": ["Read"]}.get(rtype, [])
    return list(dict.fromkeys(ops))


def _pattern_str(b: Any) -> str:
    return (f"ResourcePattern(resourceType={b.restype.name}, name={b.name}, "
            f"patternType={b.resource_pattern_type.name})")


def _entry_str(b: Any) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from odradek.client.command_config import admin_config

    conf: dict[str, Any] = admin_config(args.bootstrap_server, args.command_config)
    admin = AdminClient(conf)
    anything: Any = None  # confluent-kafka's stubs do not say a filter field may be None
    timeout = args.command_timeout
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    resources = _resources(args)
    if args.producer and args.idempotent and not args.cluster:
        resources.append(("CLUSTER", "kafka-cluster"))
    if args.consumer and args.topic and not args.group:
        print("Error: --consumer needs --group", file=sys.stderr)
        return 1
    try:
        if args.list:
            listed: list[tuple[str, Any]] = list(resources) or [("ANY", anything)]
            for rt, name in listed:
                flt = AclBindingFilter(ResourceType[rt], name, pattern if name else ResourcePatternType.ANY,
                                       args.principal, anything, AclOperation.ANY, AclPermissionType.ANY)
                grouped: dict[str, list[Any]] = {}
                for b in admin.describe_acls(flt, request_timeout=timeout).result(timeout):
                    grouped.setdefault(_pattern_str(b), []).append(b)
                for pat, bs in grouped.items():
                    print(f"Current ACLs for resource `{pat}`: ")
                    for b in bs:
                        print(f" \t{_entry_str(b)}")
                    print()
            return 0
        entries: list[tuple[str, str, AclPermissionType]] = []
        for principal in args.allow_principal:
            for host in args.allow_host or ["*"]:
                entries.append((principal, host, AclPermissionType.ALLOW))
        for principal in args.deny_principal:
            for host in args.deny_host or ["*"]:
                entries.append((principal, host, AclPermissionType.DENY))
        if not resources:
            print("Error: name a resource (--topic, --group, --transactional-id or --cluster)", file=sys.stderr)
            return 1
        if args.add:
            if not entries:
                print("Error: --add needs --allow-principal or --deny-principal", file=sys.stderr)
                return 1
            if pattern not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
                print("Error: --add takes --resource-pattern-type literal or prefixed", file=sys.stderr)
                return 1
            bindings = [AclBinding(ResourceType[rt], name, pattern, principal, host, AclOperation[op_upper(op)], perm)
                        for rt, name in resources for op in _operations_for(args, rt)
                        for principal, host, perm in entries]
            if not bindings:
                print("Error: --add needs --operation, --producer or --consumer", file=sys.stderr)
                return 1
            for b in bindings:
                print(f"Adding ACLs for resource `{_pattern_str(b)}`: \n \t{_entry_str(b)} \n")
            for fut in admin.create_acls(bindings, request_timeout=timeout).values():
                fut.result(timeout)
            return 0
        # --remove: every ACL of the resources matching the given principals and operations
        filters: list[Any] = []
        for rt, name in resources:
            ops: list[Any] = _operations_for(args, rt) or [None]
            for op in ops:
                matching: list[tuple[Any, Any, AclPermissionType]] = list(entries) or [
                    (anything, anything, AclPermissionType.ANY)]
                for principal, host, perm in matching:
                    filters.append(AclBindingFilter(
                        ResourceType[rt], name, pattern, principal, host,
                        AclOperation[op_upper(op)] if op else AclOperation.ANY, perm))
        removed = 0
        for fut in admin.delete_acls(filters, request_timeout=timeout).values():
            for b in fut.result(timeout):
                removed += 1
                print(f"Removed ACL for resource `{_pattern_str(b)}`: {_entry_str(b)}")
        if not removed:
            print("No ACLs matched.")
        return 0
    except KafkaException as e:
        print(f"Error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 1


def op_upper(op: str) -> str:
    """Kafka's operation name (``DescribeConfigs``) as confluent-kafka's enum member (``DESCRIBE_CONFIGS``)."""
    out = ""
    for i, ch in enumerate(op):
        if ch.isupper() and i:
            out += "_"
        out += ch.upper()
    return out
