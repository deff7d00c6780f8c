"""Handlers with an authorizer, driven without a socket: a principal without ACLs is refused with
Kafka's error, one with the ACL is served, and the answer encodes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from odradek.controller.store import LocalStore
from odradek.protocol import codec, errors
from odradek.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.acl_store import AclStore
from odradek.security.services import SecurityServices
from odradek.server.handlers import describe_transactions
from odradek.server.request_context import RequestContext

from .test_request_context import FakeConnection, services


class Principal(FakeConnection):
    principal = "User:alice"


def test_describe_transactions_needs_describe_on_the_transactional_id() -> None:
    az = AclAuthorizer()
    az.set_entries(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "mine", PatternType.LITERAL),
                   {AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)})
    asked: list[list[str]] = []

    def describe(ids: list[str]) -> list[Any]:
        asked.append(list(ids))
        return []

    svc = services(security=SecurityServices(None, AclStore(LocalStore(None), az)),
                   txn=SimpleNamespace(coordinator=SimpleNamespace(describe_transactions=describe)))
    ctx = RequestContext(svc, Principal(), 65, 0, 1, "c")
    req = SimpleNamespace(transactional_ids=["mine", "theirs"])
    resp = describe_transactions.handle(ctx, req)
    assert asked == [["mine"]]  # only what alice may DESCRIBE reaches the coordinator
    assert [(s.transactional_id, int(s.error_code)) for s in resp.transaction_states] == [
        ("theirs", errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    assert codec.encode(resp)
