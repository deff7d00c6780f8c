"""Kafka's ACL semantics (odradek.security.acl): literal, wildcard and prefixed patterns,
principals and hosts, implied operations, deny wins, super users, the no-ACL default,
filters, and the ZooKeeper document layout."""

from __future__ import annotations

import pytest

from odradek.controller.store import LocalStore
from odradek.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_super_users,
    validate_binding,
)
from odradek.security.acl_store import AclStore, decode_entries, encode_entries

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = "User:alice", "User:bob"


def acl(name: str, principal: str, op: AclOperation, perm: AclPermissionType = Perm.ALLOW, *,
        rtype: ResourceType = RT.TOPIC, pattern: PatternType = PT.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm))


def authorizer(*bindings: AclBinding, allow_if_none: bool = False, supers: str = "") -> AclAuthorizer:
    a = AclAuthorizer(parse_super_users(supers), allow_if_none)
    for b in bindings:
        a.add(b)
    return a


def test_literal_allow_and_other_principals_denied() -> None:
    a = authorizer(acl("orders", ALICE, Op.READ))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(BOB, "10.0.0.1", Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", Op.WRITE, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "orders2")  # literal is exact


def test_no_acl_found_default() -> None:
    assert not authorizer().authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    assert authorizer(allow_if_none=True).authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    # an ACL for someone else on the resource means ACLs are found: the default no longer applies
    assert not authorizer(acl("t", BOB, Op.READ), allow_if_none=True).authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")


def test_wildcards_and_prefixes() -> None:
    a = authorizer(acl("*", "User:*", Op.DESCRIBE), acl("logs-", ALICE, Op.WRITE, pattern=PT.PREFIXED))
    assert a.authorize(BOB, "h", Op.DESCRIBE, RT.TOPIC, "anything")
    assert a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "logs-app")
    assert not a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "log")
    assert not a.authorize(BOB, "h", Op.WRITE, RT.TOPIC, "logs-app")


def test_host() -> None:
    a = authorizer(acl("t", ALICE, Op.READ, host="10.0.0.1"))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, RT.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied(granted: AclOperation) -> None:
    a = authorizer(acl("t", ALICE, granted))
    assert a.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t")


def test_describe_configs_implied_by_alter_configs_and_all_implies_everything() -> None:
    a = authorizer(acl("t", ALICE, Op.ALTER_CONFIGS), acl("u", ALICE, Op.ALL))
    assert a.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.DESCRIBE, Op.ALTER_CONFIGS):
        assert a.authorize(ALICE, "h", op, RT.TOPIC, "u")
    # READ does not imply WRITE, DESCRIBE does not imply READ
    b = authorizer(acl("t", ALICE, Op.DESCRIBE))
    assert not b.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")


def test_deny_wins() -> None:
    a = authorizer(acl("*", ALICE, Op.ALL), acl("secret", ALICE, Op.READ, Perm.DENY))
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "secret")
    assert a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "secret")
    # a DENY of DESCRIBE is not implied by denying READ, but a DENY of ALL denies everything
    c = authorizer(acl("t", ALICE, Op.ALL), acl("t", "User:*", Op.ALL, Perm.DENY, host="10.9.9.9"))
    assert not c.authorize(ALICE, "10.9.9.9", Op.DESCRIBE, RT.TOPIC, "t")
    assert c.authorize(ALICE, "10.0.0.1", Op.DESCRIBE, RT.TOPIC, "t")
    d = authorizer(acl("pre", BOB, Op.WRITE, Perm.DENY, pattern=PT.PREFIXED), acl("prefix-x", BOB, Op.WRITE))
    assert not d.authorize(BOB, "h", Op.WRITE, RT.TOPIC, "prefix-x")


def test_super_users_and_resource_types_are_separate() -> None:
    a = authorizer(acl("g", ALICE, Op.READ, rtype=RT.GROUP), supers="User:admin; User:CN=broker,O=x")
    assert a.authorize("User:admin", "h", Op.ALTER, RT.CLUSTER, "kafka-cluster")
    assert a.authorize("User:CN=broker,O=x", "h", Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
    assert a.authorize(ALICE, "h", Op.READ, RT.GROUP, "g")
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "g")


def test_authorize_by_resource_type() -> None:
    a = authorizer(acl("a-", ALICE, Op.WRITE, pattern=PT.PREFIXED))
    assert a.authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not a.authorize_by_resource_type(BOB, "h", Op.WRITE, RT.TOPIC)
    a.add(acl("a", ALICE, Op.WRITE, Perm.DENY, pattern=PT.PREFIXED))
    assert not a.authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)


@pytest.mark.parametrize("binding", [
    acl("t", ALICE, Op.ANY),
    acl("t", ALICE, Op.READ, Perm.ANY),
    acl("t", "alice", Op.READ),
    acl("*", ALICE, Op.READ, pattern=PT.PREFIXED),
    acl("t", ALICE, Op.READ, pattern=PT.MATCH),
    acl("other", ALICE, Op.ALTER, rtype=RT.CLUSTER),
    acl("g", ALICE, Op.WRITE, rtype=RT.GROUP),
    acl("t", ALICE, Op.READ, rtype=RT.ANY),
])
def test_invalid_bindings(binding: AclBinding) -> None:
    with pytest.raises(InvalidAcl):
        validate_binding(binding)


def test_filters() -> None:
    a = authorizer(acl("t", ALICE, Op.READ), acl("t-", BOB, Op.WRITE, pattern=PT.PREFIXED),
                   acl("*", BOB, Op.DESCRIBE), acl("g", ALICE, Op.READ, rtype=RT.GROUP))
    assert len(a.matching(AclBindingFilter())) == 4
    assert {b.entry.principal for b in a.matching(AclBindingFilter(RT.TOPIC, "t-1", PT.MATCH))} == {BOB}
    assert len(a.matching(AclBindingFilter(RT.TOPIC, "t", PT.MATCH))) == 2  # literal t and literal *
    assert len(a.matching(AclBindingFilter(RT.TOPIC, None, PT.PREFIXED))) == 1
    assert len(a.matching(AclBindingFilter(principal=ALICE))) == 2
    gone = a.remove(AclBindingFilter(RT.GROUP))
    assert len(gone) == 1 and len(a.bindings()) == 3


def test_acl_store_layout_and_reload(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalStore(tmp_path / "meta.json")
    az = AclAuthorizer()
    s = AclStore(store, az)
    lit = acl("orders", ALICE, Op.READ)
    pre = acl("logs-", BOB, Op.WRITE, Perm.DENY, pattern=PT.PREFIXED)
    s.write(lit.pattern, {lit.entry})
    s.write(pre.pattern, {pre.entry})
    data, _ = store.get("/kafka-acl/Topic/orders")
    assert decode_entries(data) == {lit.entry}
    assert b'"operation": "Read"' in data and b'"permissionType": "Allow"' in data
    assert store.exists("/kafka-acl-extended/prefixed/Topic/logs-") is not None
    assert store.children("/kafka-acl-changes") and store.children("/kafka-acl-extended-changes")
    other = AclAuthorizer()
    AclStore(store, other).load()
    assert set(other.bindings()) == {lit, pre}
    s.write(lit.pattern, set())
    assert store.exists("/kafka-acl/Topic/orders") is None
    AclStore(store, other).load()
    assert other.bindings() == [pre]
    assert decode_entries(encode_entries({lit.entry})) == {lit.entry}


def test_group_configs_acls_are_valid_as_kafkas_acl_entry_supported_operations() -> None:
    """Kafka's AclEntry.supportedOperations(GROUP) has DESCRIBE_CONFIGS and ALTER_CONFIGS (a group's configs,
    KIP-848): CreateAcls took them for INVALID_REQUEST here, so only a super user could read or change a group's
    configs (found by the Java authorization judge, peers/kafka AuthzJudge)."""
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        validate_binding(acl("g", ALICE, op, rtype=RT.GROUP))
    a = authorizer(acl("g", ALICE, Op.ALTER_CONFIGS, rtype=RT.GROUP))
    assert a.authorize(ALICE, "127.0.0.1", Op.ALTER_CONFIGS, RT.GROUP, "g")
    assert a.authorize(ALICE, "127.0.0.1", Op.DESCRIBE_CONFIGS, RT.GROUP, "g")  # implied, as Kafka's
    assert not a.authorize(ALICE, "127.0.0.1", Op.READ, RT.GROUP, "g")
