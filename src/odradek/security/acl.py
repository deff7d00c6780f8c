"""ACLs and their semantics, exactly Kafka's (AclAuthorizer / StandardAuthorizer), free of I/O.

An ACL binding is a resource pattern (resource type, name, LITERAL or PREFIXED) and an access
control entry (principal, host, operation, ALLOW or DENY). A request by ``principal`` from
``host`` to do ``operation`` on a resource is allowed when:

1. the principal is one of ``super.users``; or
2. no ACL matches the resource at all (literal name, the literal wildcard ``*``, or a prefix of
   the name) and ``allow.everyone.if.no.acl.found`` is true; or
3. no matching DENY entry covers it (principal or ``User:*``, host or ``*``, the operation or
   ALL) and a matching ALLOW entry does, where ALLOW of READ, WRITE, DELETE or ALTER implies
   DESCRIBE and ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS. Deny wins.

Numbers are the wire protocol's (CreateAcls / DescribeAcls / DeleteAcls); names are those of
Kafka's ZooKeeper ACL documents.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# Kafka's names in ZooKeeper's ACL documents and kafka-acls.sh
RESOURCE_NAMES = {
    ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
OPERATION_NAMES = {
    AclOperation.ALL: "All", AclOperation.READ: "Read", AclOperation.WRITE: "Write", AclOperation.CREATE: "Create",
    AclOperation.DELETE: "Delete", AclOperation.ALTER: "Alter", AclOperation.DESCRIBE: "Describe",
    AclOperation.CLUSTER_ACTION: "ClusterAction", AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs", AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
    AclOperation.CREATE_TOKENS: "CreateTokens", AclOperation.DESCRIBE_TOKENS: "DescribeTokens",
}
PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}

# an ALLOW of any of these implies the key (Kafka's AclEntry implied operations)
_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# the operations each resource type has (Kafka's AclEntry.supportedOperations)
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    # DESCRIBE_CONFIGS and ALTER_CONFIGS: a group's own configs (KIP-848), DescribeConfigs and
    # IncrementalAlterConfigs on a GROUP resource
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


class InvalidAcl(ValueError):
    """An ACL binding CreateAcls must refuse (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches_resource(self, name: str) -> bool:
        """Whether this pattern covers the resource ``name`` (literal, wildcard or prefix)."""
        if self.pattern_type is PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type is PatternType.PREFIXED and name.startswith(self.name)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(b: AclBinding) -> None:
    """Kafka's checks of a binding to create (the request's AclCreation)."""
    p, e = b.pattern, b.entry
    if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise InvalidAcl("Invalid resource type")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid pattern type {p.pattern_type.name}: only LITERAL and PREFIXED ACLs can be created")
    if not p.name:
        raise InvalidAcl("Resource name must not be empty")
    if p.pattern_type is PatternType.PREFIXED and p.name == WILDCARD:
        raise InvalidAcl("A PREFIXED ACL cannot use the wildcard resource name '*'")
    if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise InvalidAcl("Invalid operation")
    if e.operation is not AclOperation.ALL and e.operation not in SUPPORTED_OPERATIONS[p.resource_type]:
        raise InvalidAcl(f"ACL operation {e.operation.name} is not supported by resource type "
                         f"{p.resource_type.name}")
    if e.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl("Invalid permission type")
    kind, sep, name = e.principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"Could not parse principal from `{e.principal}` (no colon is present separating the "
                         "principal type from the principal name)")
    if not e.host:
        raise InvalidAcl("Host must not be empty")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter: None and ANY match everything in their field; MATCH
    patterns match what would apply to the named resource (Kafka's ResourcePatternFilter)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        p, e = b.pattern, b.entry
        if self.resource_type is not ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is not None and not (
                (p.pattern_type is PatternType.LITERAL and p.name in (self.name, WILDCARD))
                or (p.pattern_type is PatternType.PREFIXED and self.name.startswith(p.name))
            ):
                return False
        else:
            if self.pattern_type is not PatternType.ANY and self.pattern_type != p.pattern_type:
                return False
            if self.name is not None and self.name != p.name:
                return False
        if self.principal is not None and self.principal != e.principal:
            return False
        if self.host is not None and self.host != e.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != e.operation:
            return False
        return self.permission is AclPermissionType.ANY or self.permission == e.permission

    def validate(self) -> None:
        if AclOperation.UNKNOWN in (self.operation,) or self.permission is AclPermissionType.UNKNOWN:
            raise InvalidAcl("Filter contains UNKNOWN elements")
        if self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN:
            raise InvalidAcl("Filter contains UNKNOWN elements")


def parse_super_users(raw: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:CN=broker,O=x``)."""
    return frozenset(p.strip() for p in (raw or "").split(";") if p.strip())


class AclAuthorizer:
    """The ACLs in memory and the authorization decision (Kafka's AclAuthorizer.authorize)."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, set[AccessControlEntry]] = {}

    # -- the ACLs
    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, entries in self._acls.items() for e in entries]

    def entries(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        return set(self._acls.get(pattern, ()))

    def set_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        es = set(entries)
        if es:
            self._acls[pattern] = es
        else:
            self._acls.pop(pattern, None)

    def add(self, binding: AclBinding) -> None:
        self._acls.setdefault(binding.pattern, set()).add(binding.entry)

    def matching(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if flt.matches(b)]

    def remove(self, flt: AclBindingFilter) -> list[AclBinding]:
        gone = self.matching(flt)
        for b in gone:
            entries = self._acls.get(b.pattern)
            if entries is not None:
                entries.discard(b.entry)
                if not entries:
                    del self._acls[b.pattern]
        return gone

    # -- decisions
    def _applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        return [e for p, entries in self._acls.items()
                if p.resource_type == resource_type and p.matches_resource(name) for e in entries]

    @staticmethod
    def _covers(e: AccessControlEntry, principal: str, host: str) -> bool:
        return e.principal in (principal, WILDCARD_PRINCIPAL) and e.host in (host, WILDCARD)

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._applicable(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        for e in acls:
            if (e.permission is AclPermissionType.DENY and self._covers(e, principal, host)
                    and e.operation in (operation, AclOperation.ALL)):
                return False
        allowing = {operation, AclOperation.ALL} | _IMPLIED_BY.get(operation, frozenset())
        return any(e.permission is AclPermissionType.ALLOW and self._covers(e, principal, host)
                   and e.operation in allowing for e in acls)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type (KIP-679,
        Kafka's Authorizer.authorizeByResourceType): an ALLOW that no DENY of a wider or equal
        pattern cancels."""
        if principal in self.super_users:
            return True
        ops = (operation, AclOperation.ALL)
        denies = [p for p, entries in self._acls.items() if p.resource_type == resource_type
                  for e in entries if e.permission is AclPermissionType.DENY and self._covers(e, principal, host)
                  and e.operation in ops]
        if any(p.pattern_type is PatternType.LITERAL and p.name == WILDCARD for p in denies):
            return False
        for p, entries in self._acls.items():
            if p.resource_type != resource_type:
                continue
            for e in entries:
                if not (e.permission is AclPermissionType.ALLOW and self._covers(e, principal, host)
                        and e.operation in ops):
                    continue
                cancelled = any(
                    (d.pattern_type is PatternType.PREFIXED and p.name.startswith(d.name))
                    or (d.pattern_type is PatternType.LITERAL and p.pattern_type is PatternType.LITERAL
                        and d.name == p.name)
                    for d in denies)
                if not cancelled:
                    return True
        has_any = any(p.resource_type == resource_type for p in self._acls)
        return not has_any and self.allow_if_no_acl
