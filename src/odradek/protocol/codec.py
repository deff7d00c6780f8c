"""Adapter over kio: decode request bodies, encode response bodies, safely.

kio raises assorted exceptions on malformed input (BufferUnderflow, KeyError on an
unknown tagged field, ValueError, UnicodeDecodeError ...). Every one of them becomes a
:class:`DecodeError` here so nothing escapes up the stack.
"""

from __future__ import annotations

import datetime
import io
from collections import OrderedDict
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.protocol import kio_guard
from odradek.protocol.api_keys import ApiKey


class DecodeError(Exception):
    pass


@cache
def request_class(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except Exception:
        return None


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module holding the response classes (nested ones included) of a version."""
    return load_payload_module(api_key, version, EntityType.response)


@cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: Any) -> Any:
    return entity_writer(cls)


def load(api_key: int, version: int) -> None:
    """Build (and cache) everything a request of this version needs: its request class and
    reader, its response class, writer and module. Raises what kio raises for an unknown one."""
    cls: Any = request_class(api_key, version)
    if cls is not None:
        _reader(cls)
    response: Any = response_class(api_key, version)
    _writer(response)
    response_module(api_key, version)


def _any(x: Any) -> Any:
    return x


def request_header_flexible(api_key: int, version: int) -> bool | None:
    """Whether the request header is v2 (tagged fields); None when unknown."""
    cls = request_class(api_key, version)
    if cls is None:
        return None
    return bool(cls.__header_schema__.__version__ >= 2)


def response_header_flexible(api_key: int, version: int) -> bool:
    if api_key == ApiKey.API_VERSIONS:  # ApiVersions responses always use header v0
        return False
    return bool(response_class(api_key, version).__header_schema__.__version__ >= 1)


def decode_request(api_key: int, version: int, frame: bytes | bytearray | memoryview, offset: int) -> Any:
    cls = request_class(api_key, version)
    if cls is None:
        raise DecodeError(f"no schema for api {api_key} v{version}")
    if isinstance(frame, memoryview) and not frame.readonly:
        frame = frame.toreadonly()  # kio insists on immutable buffers
    try:
        kio_guard.check(cls, frame, offset)  # kio's native reader aborts the process on a lying count
    except kio_guard.LengthError as e:
        raise DecodeError(f"malformed api {api_key} v{version} body: {e}") from None
    try:
        value, size = _reader(_any(cls))(frame, offset)
    except Exception as e:  # kio raises many types on malformed input
        raise DecodeError(f"malformed api {api_key} v{version} body: {type(e).__name__}: {e}") from e
    if offset + size > len(frame):
        raise DecodeError("body runs past the frame")
    return value


# entity classes (by name, any version) whose encodings are remembered: a few recent responses,
# entity -> bytes. kio entities are frozen dataclasses (hashable, compared by value), so an equal
# response is the same bytes; hashing one costs a fraction of encoding it again.
_MEMO_NAMES: set[str] = set()
_MEMO: OrderedDict[Any, bytes] = OrderedDict()
_MEMO_MAX = 8


def memoize_encoding(class_name: str) -> None:
    """Remember the encodings of entities of this class name (large and often repeated, e.g. a
    MetadataResponse describing thousands of partitions)."""
    _MEMO_NAMES.add(class_name)


def encode(entity: Any) -> bytes:
    memo = type(entity).__name__ in _MEMO_NAMES
    if memo:
        hit = _MEMO.get(entity)
        if hit is not None:
            _MEMO.move_to_end(entity)
            return hit
    buf = io.BytesIO()
    _writer(_any(type(entity)))(buf, entity)
    out = buf.getvalue()
    if memo:
        _MEMO[entity] = out
        if len(_MEMO) > _MEMO_MAX:
            _MEMO.popitem(last=False)
    return out


@cache
def _field_names(cls: Any) -> frozenset[str]:
    return frozenset(cls.__dataclass_fields__)


_ERROR_FIELDS = frozenset({"error_code", "topic_config_error_code"})
_ZERO = datetime.timedelta(0)


@cache
def error_code(code: int) -> ErrorCode:
    return ErrorCode(code)


def make(cls: type[Any], **kwargs: Any) -> Any:
    """Build a kio entity from keyword arguments, dropping those the version lacks.

    Plain ints are accepted for error codes and milliseconds for ``throttle_time``.
    """
    names = _field_names(_any(cls))
    out: dict[str, Any] = {}
    for k, v in kwargs.items():
        if k not in names:
            continue
        if k in _ERROR_FIELDS and not isinstance(v, ErrorCode):
            v = error_code(v)
        elif k == "throttle_time" and isinstance(v, int):
            v = datetime.timedelta(milliseconds=v) if v else _ZERO
        out[k] = v
    return cls(**out)
