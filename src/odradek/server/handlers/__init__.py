"""Request handlers: one module per API, each declaring API_KEY, MIN_VERSION,
MAX_VERSION and ``handle(ctx, request)``, registered in :data:`registry`.

``handle`` returns a kio response entity, a :class:`RawResponse` (pre-encoded buffers,
used by Fetch for zero copy), :data:`NO_RESPONSE` (Produce with acks=0), or an
``asyncio.Future`` resolving to one of those (delayed operations).
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from odradek.protocol.fetch_response import FileRegion


class HandlerError(Exception):
    """The request is well-formed on the wire but unacceptable; the connection closes."""


@dataclass(slots=True)
class RawResponse:
    parts: Sequence[bytes | FileRegion]
    size: int


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Any = _NoResponse()


class Handler(Protocol):
    api_key: int
    min_version: int
    max_version: int

    def handle(self, ctx: Any, request: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class _ModuleHandler:
    api_key: int
    min_version: int
    max_version: int
    module: ModuleType
    # a module with its own ``decode_request(version, frame, offset)`` bypasses kio; its
    # headers are flexible from ``FIRST_FLEXIBLE`` on
    decode: Callable[[int, Any, int], Any] | None = None
    first_flexible: int = 1 << 15

    def handle(self, ctx: Any, request: Any) -> Any:
        return self.module.handle(ctx, request)


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
]

registry: dict[int, _ModuleHandler] = {}


def _register() -> None:
    # Versions are declared by each module; tests/unit/server/test_handlers.py checks kio
    # decodes every one of them. Loading kio's schema modules here would cost ~1 s of start-up.
    for name in _MODULES:
        mod = importlib.import_module(f"odradek.server.handlers.{name}")
        registry[mod.API_KEY] = _ModuleHandler(
            mod.API_KEY, mod.MIN_VERSION, mod.MAX_VERSION, mod,
            getattr(mod, "decode_request", None), getattr(mod, "FIRST_FLEXIBLE", 1 << 15),
        )


_register()

# Versions librdkafka 2.16 sends (measured with debug=protocol against this broker): the
# schemas worth loading early (all versions of all APIs would cost ~0.4 s of CPU).
CLIENT_VERSIONS: dict[int, tuple[int, ...]] = {
    18: (3,), 3: (12,), 1: (16,), 2: (7,), 10: (2,), 19: (4,), 22: (4,),
    11: (5,), 14: (3,), 12: (3,), 13: (1,), 8: (9,), 9: (9,),
}


def warm_up_schemas() -> threading.Thread:
    """Load kio's schemas for the versions clients use most, on a background thread.

    kio builds a version's classes on first use, 5-20 ms each (Fetch v16: ~20 ms); left to the
    first request, that lands in its latency. Start-up does not wait for this (~0.15 s); the
    thread runs once the listeners are open, the GIL handing the event loop its turn every
    few milliseconds."""
    from odradek.protocol import codec

    pairs = [(k, v) for k, vs in CLIENT_VERSIONS.items() if k in registry for v in vs]

    def run() -> None:
        for key, version in pairs:
            try:
                codec.request_class(key, version)
                codec.response_class(key, version)
                codec.response_module(key, version)
            except Exception:  # a schema that fails to load fails again, and is reported, on use
                logging.getLogger("odradek.protocol").debug("no schema for api %d v%d", key, version)

    t = threading.Thread(target=run, name="schema-warm-up", daemon=True)
    t.start()
    return t
