"""Kafka requests dispatched in-process for the console, as the HTTP user's principal.

The console never touches the broker's state directly for what a Kafka client could ask: it builds
the request a client would send (CreateTopics, IncrementalAlterConfigs, OffsetCommit, Metadata,
DescribeConfigs, ListGroups, DescribeGroups, OffsetFetch, ListOffsets, DescribeLogDirs) and hands
it to the same handler (odradek.server.handlers) with a :class:`RequestContext` whose connection
carries the principal authenticated over HTTP. The authorizer therefore decides exactly as it would
for a Kafka client with that principal, and a refusal comes back as Kafka's error code.

Requests are attribute bags (``SimpleNamespace``) with the fields the handler reads; responses are
the handler's kio entities, read by attribute.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Protocol

from odradek.protocol.api_keys import ApiKey
from odradek.purgatory import DelayedResponse, future_of
from odradek.security.sasl import SaslServer
from odradek.server.handlers import ResultKind, kind_of, registry
from odradek.server.request_context import BrokerServices, RequestContext

# the versions the console speaks (each handler's response module follows the version)
METADATA = (ApiKey.METADATA, 12)
CREATE_TOPICS = (ApiKey.CREATE_TOPICS, 7)
DESCRIBE_CONFIGS = (ApiKey.DESCRIBE_CONFIGS, 4)
INCREMENTAL_ALTER_CONFIGS = (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
LIST_GROUPS = (ApiKey.LIST_GROUPS, 4)
DESCRIBE_GROUPS = (ApiKey.DESCRIBE_GROUPS, 5)
OFFSET_FETCH = (ApiKey.OFFSET_FETCH, 7)
OFFSET_COMMIT = (ApiKey.OFFSET_COMMIT, 8)
LIST_OFFSETS = (ApiKey.LIST_OFFSETS, 7)
DESCRIBE_LOG_DIRS = (ApiKey.DESCRIBE_LOG_DIRS, 4)

CONSOLE_CLIENT_ID = "odradek-console"


def ns(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**fields)


class KafkaDispatch(Protocol):
    """What the console may do: send one Kafka request as ``principal`` from ``host``."""

    async def call(self, principal: str, host: str, api: tuple[int, int], request: Any) -> Any: ...


class _ConsoleConnection:
    """The ConnectionHandle of an in-process request: the principal and address of the HTTP user."""

    def __init__(self, listener: str, principal: str, host: str) -> None:
        self.sasl: SaslServer | None = None
        self.listener = listener
        self.principal = principal
        self.peer_host = host
        self.peer = f"{host}:0"
        self._on_close: list[Callable[[], None]] = []

    @property
    def failed_authentication_delay_s(self) -> float:
        return 0.0

    def sasl_authenticated(self, principal: str) -> int:  # pragma: no cover - no SASL in-process
        return 0

    def close_after_response(self) -> None:
        pass

    def park(self, fut: asyncio.Future[Any], cancel: Callable[[], None]) -> None:
        self._on_close.append(cancel)

    def close(self, reason: str | None = None) -> None:
        for cancel in self._on_close:
            cancel()
        self._on_close.clear()

    def throttle(self, ms: int) -> None:
        pass


class InProcessDispatch:
    """:class:`KafkaDispatch` over the broker's handler registry and services."""

    def __init__(self, services: Callable[[], BrokerServices | None], listener: str,
                 timeout_s: float = 30.0) -> None:
        self._services = services
        self.listener = listener
        self.timeout_s = timeout_s
        self._correlation = 0

    async def call(self, principal: str, host: str, api: tuple[int, int], request: Any) -> Any:
        services = self._services()
        if services is None:
            raise RuntimeError("the broker is not started")
        api_key, version = api
        handler = registry[api_key]
        if not handler.min_version <= version <= handler.max_version:
            raise ValueError(f"api {api_key} v{version} is not served")
        self._correlation += 1
        conn = _ConsoleConnection(self.listener, principal, host)
        ctx = RequestContext(services, conn, api_key, version, self._correlation, CONSOLE_CLIENT_ID)
        try:
            result = handler.handle(ctx, request)
            kind = kind_of(result)
            if kind is ResultKind.DELAYED:
                assert isinstance(result, DelayedResponse)
                result = await asyncio.wait_for(future_of(result.op, result.build), self.timeout_s)
            elif kind is ResultKind.FUTURE:
                assert isinstance(result, asyncio.Future)
                result = await asyncio.wait_for(result, self.timeout_s)
        finally:
            conn.close()
        kind = kind_of(result)  # what a delayed answer or a future resolved to
        if kind is not ResultKind.ENTITY:
            raise RuntimeError(f"api {api_key} answered with no entity ({kind.value})")
        return result
