"""Request handlers: one module per API, each declaring API_KEY (an :class:`ApiKey`), MIN_VERSION,
MAX_VERSION and ``handle(ctx: RequestContext, request) -> HandlerResult``, registered in :data:`registry`.

A :data:`HandlerResult` is one of five kinds, and :func:`kind_of` tells which, for both places that
answer requests (the connection, and the console's in-process dispatch):

- an *entity*: a kio response entity (or its encoded body as ``bytes``), answered now;
- a :class:`RawResponse`: pre-encoded buffers, used by Fetch for zero copy, answered now;
- :data:`NO_RESPONSE`: nothing is answered (Produce with acks=0);
- a :class:`~odradek.purgatory.DelayedResponse`: a delayed operation in a purgatory and the function
  that builds the answer from its completion;
- an ``asyncio.Future`` resolving to an entity or a :class:`RawResponse` (work done over several loop
  turns, or another component's answer).
"""

from __future__ import annotations

import asyncio
import enum
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch_response import FileRegion
from odradek.purgatory import DelayedResponse
from odradek.security.api_acls import API_ACLS

if TYPE_CHECKING:
    from odradek.server.request_context import RequestContext


class HandlerError(Exception):
    """The request is well-formed on the wire but unacceptable; the connection closes."""


@dataclass(slots=True)
class RawResponse:
    parts: Sequence[bytes | FileRegion]
    size: int
    # error code -> occurrences in the response (ErrorsPerSec; odradek.metrics.error_counts)
    errors: dict[int, int] | None = None


class NoResponse(enum.Enum):
    """The one value a handler returns when the request gets no answer (Produce with acks=0)."""

    NO_RESPONSE = "NO_RESPONSE"


NO_RESPONSE: Final = NoResponse.NO_RESPONSE

# a kio response entity: kio's classes are loaded per API version at run time (protocol.codec), so a
# handler holds them as Any; the alias names what the Any stands for
KioResponse: TypeAlias = Any
HandlerResult: TypeAlias = "KioResponse | bytes | RawResponse | NoResponse | DelayedResponse | asyncio.Future[Any]"


class ResultKind(enum.Enum):
    """The five kinds of :data:`HandlerResult` (see the module docstring)."""

    ENTITY = "entity"
    RAW = "raw"
    NONE = "none"
    DELAYED = "delayed"
    FUTURE = "future"


def kind_of(result: HandlerResult) -> ResultKind:
    """Which kind of answer a handler gave (the checks in the order the connection's hot path needs)."""
    if isinstance(result, RawResponse):
        return ResultKind.RAW
    if result is NO_RESPONSE:
        return ResultKind.NONE
    if isinstance(result, DelayedResponse):
        return ResultKind.DELAYED
    if isinstance(result, asyncio.Future):
        return ResultKind.FUTURE
    return ResultKind.ENTITY


class Handler(Protocol):
    api_key: ApiKey
    min_version: int
    max_version: int

    def handle(self, ctx: RequestContext, request: Any) -> HandlerResult: ...


@dataclass(frozen=True, slots=True)
class _ModuleHandler:
    api_key: ApiKey
    min_version: int
    max_version: int
    module: ModuleType
    # a module with its own ``decode_request(version, frame, offset)`` bypasses kio; its
    # headers are flexible from ``FIRST_FLEXIBLE`` on
    decode: Callable[[int, Any, int], Any] | None = None
    first_flexible: int = 1 << 15
    # a module's ``check_frame(services, version, frame, body_offset)``: why a request must be refused
    # before it is decoded (the connection closes), or None
    check_frame: Callable[[Any, int, Any, int], str | None] | None = None

    def handle(self, ctx: RequestContext, request: Any) -> HandlerResult:
        result: HandlerResult = self.module.handle(ctx, request)
        return result


_MODULES = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "delete_records",
    "describe_cluster",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "init_producer_id",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "offset_for_leader_epoch",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "sasl_handshake",
    "sasl_authenticate",
    "create_acls",
    "describe_acls",
    "delete_acls",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    "update_features",
    "describe_client_quotas",
    "alter_client_quotas",
    "list_config_resources",
    "describe_topic_partitions",
    "share_group_heartbeat",
    "share_group_describe",
    "share_fetch",
    "share_acknowledge",
    "initialize_share_group_state",
    "read_share_group_state",
    "write_share_group_state",
    "delete_share_group_state",
    "read_share_group_state_summary",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
]

registry: dict[int, _ModuleHandler] = {}  # by API key


def _register() -> None:
    # Versions are declared by each module; tests/unit/server/test_handlers.py checks kio
    # decodes every one of them. Loading kio's schema modules here would cost ~1 s of start-up.
    for name in _MODULES:
        mod = importlib.import_module(f"odradek.server.handlers.{name}")
        if mod.API_KEY not in API_ACLS:  # every API states the ACL it needs (Kafka's authorization table)
            raise RuntimeError(f"handler {name} (api {mod.API_KEY}) has no entry in odradek.security.api_acls")
        registry[mod.API_KEY] = _ModuleHandler(
            ApiKey(mod.API_KEY), mod.MIN_VERSION, mod.MAX_VERSION, mod,
            getattr(mod, "decode_request", None), getattr(mod, "FIRST_FLEXIBLE", 1 << 15),
            getattr(mod, "check_frame", None),
        )


_register()

# Versions librdkafka 2.16 sends (measured with debug=protocol against this broker), in the order
# they are warmed up: connecting, then consuming, then groups. kafka-python and aiokafka use older
# versions, which still load on first use; Produce has its own codec.
CLIENT_VERSIONS: dict[int, tuple[int, ...]] = {
    18: (3,), 3: (12,), 1: (16,), 2: (7,), 10: (2,), 9: (9,), 8: (9,),
    11: (5,), 14: (3,), 12: (3,), 13: (1,), 19: (4,), 22: (4,),
}


def schema_warm_up_steps() -> list[Callable[[], None]]:
    """One step per (API, version) clients use most: loading kio's classes for it.

    kio builds a version's classes on first use, 5-40 ms each (Fetch v16 ~20 ms, OffsetCommit v9
    ~40 ms); left to the first request that blocks the event loop and lands in that request's
    latency and in everyone else's waiting behind it. The broker runs these steps on its loop
    when it is idle, one per turn, after its listeners open (~0.2 s of CPU in all)."""
    from odradek.protocol import codec

    def step(key: int, version: int) -> Callable[[], None]:
        return lambda: codec.load(key, version)

    return [
        step(k, v)
        for k, vs in CLIENT_VERSIONS.items()
        if k in registry
        for v in vs
        if registry[k].min_version <= v <= registry[k].max_version
    ]
