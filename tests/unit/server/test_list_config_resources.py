"""ListConfigResources (74), without a socket: v0 lists the client metrics subscriptions (KIP-714), v1 the
resources of the asked types (KIP-1142), DESCRIBE_CONFIGS on the cluster is required, and a type without
configs here is refused; every answer encodes."""

from __future__ import annotations

from types import SimpleNamespace

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
from odradek.server.handlers import list_config_resources
from odradek.server.request_context import RequestContext

from .test_request_context import FakeConnection, services

TOPICS = SimpleNamespace(topics={"orders": object(), "audit": object()},
                         client_metrics_names=lambda: ["everything", "producers"])


def ask(version: int, types: tuple[int, ...] = (), **svc_overrides: object) -> object:
    svc = services(topics=TOPICS, cluster=SimpleNamespace(embedded=True), **svc_overrides)
    resp = list_config_resources.handle(RequestContext(svc, FakeConnection(), 74, version, 1, "c"),
                                        SimpleNamespace(resource_types=types))
    assert codec.encode(resp)
    return resp


def test_v0_lists_the_client_metrics_subscriptions() -> None:
    resp = ask(0)
    assert resp.error_code == errors.NONE  # type: ignore[attr-defined]
    assert [r.resource_name for r in resp.config_resources] == ["everything", "producers"]  # type: ignore[attr-defined]


def test_v1_lists_the_asked_types_or_every_type() -> None:
    resp = ask(1, (16, 2))
    assert [(r.resource_type, r.resource_name) for r in resp.config_resources] == [  # type: ignore[attr-defined]
        (16, "everything"), (16, "producers"), (2, "audit"), (2, "orders")]
    every = ask(1)
    assert {(r.resource_type, r.resource_name) for r in every.config_resources} == {  # type: ignore[attr-defined]
        (2, "audit"), (2, "orders"), (4, "3"), (8, "3"), (16, "everything"), (16, "producers")}
    assert ask(1, (32,)).error_code == errors.INVALID_REQUEST  # type: ignore[attr-defined]


def test_describe_configs_on_the_cluster_is_required() -> None:
    class Alice(FakeConnection):
        principal = "User:alice"

    az = AclAuthorizer()
    security = SecurityServices(None, AclStore(LocalStore(None), az))
    svc = services(topics=TOPICS, cluster=SimpleNamespace(embedded=True), security=security)
    resp = list_config_resources.handle(RequestContext(svc, Alice(), 74, 1, 1, "c"), SimpleNamespace(resource_types=()))
    assert resp.error_code == errors.CLUSTER_AUTHORIZATION_FAILED and resp.config_resources == ()
    az.set_entries(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                   {AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)})
    resp = list_config_resources.handle(RequestContext(svc, Alice(), 74, 0, 1, "c"), SimpleNamespace(resource_types=()))
    assert resp.error_code == errors.NONE and len(resp.config_resources) == 2
