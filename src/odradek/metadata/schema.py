"""Kafka's flexible message encoding (KIP-482), driven by field declarations: the body of a metadata record.

Every metadata record of KIP-631 is a message whose versions are all flexible (``"flexibleVersions": "0+"``
in Kafka's JSON specs), so one encoding covers them all. A message is its untagged fields in declaration
order, then its tagged-field section; a struct inside an array is encoded the same way (its fields, then
its own tagged-field section)::

    int8 / bool     1 byte (bool: 0 or 1)
    int16 / uint16  2 bytes, big-endian
    int32           4 bytes, big-endian
    int64           8 bytes, big-endian
    float64         8 bytes, IEEE 754 big-endian
    uuid            16 bytes (Kafka's Uuid: most significant long, then least significant)
    string          uvarint length+1, then UTF-8 (0 = null; at most 32767 bytes)
    bytes           uvarint length+1, then the bytes (0 = null)
    array           uvarint count+1, then the elements (0 = null)
    tagged fields   uvarint count, then per field, by ascending tag: uvarint tag, uvarint size, value

A tagged field is written only when it differs from its default (Kafka's generated ``write``); a field
absent from the version being written must hold its default, or the write is refused, as Kafka's
generated code throws UnsupportedVersionException. Tags the declarations do not know (a newer Kafka's) are
kept on read as ``unknown_tags`` and written back in tag order, as Kafka keeps ``_unknownTaggedFields``.

The unsigned varints are :mod:`odradek.protocol.varint`'s. Declarations are :class:`F` tuples on each
message class (``FIELDS``); the dataclass attribute of a field holds its value and its default.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from odradek.protocol.varint import VarintError, encode_uvarint, read_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_FIXED: dict[str, struct.Struct] = {
    "int8": _I8, "int16": _I16, "uint16": _U16, "int32": _I32, "int64": _I64, "float64": _F64,
}
MAX_STRING = 0x7FFF
ZERO_UUID = uuid.UUID(int=0)


class MetadataRecordError(ValueError):
    """A metadata record that cannot be read (truncated, an unknown type or version, garbage after it) or
    written (a field the version cannot carry)."""


@dataclass(frozen=True)
class Array:
    """An array type: of a primitive ("int32", "uuid", "string") or of a struct (a :class:`Message` class)."""

    element: str | type[Message]


FieldType = str | Array


@dataclass(frozen=True)
class F:
    """One field of a message, as Kafka's JSON spec declares it.

    ``attr``: the dataclass attribute; ``type``: a primitive name or an :class:`Array`; ``since`` /
    ``until``: the versions that have it (``until`` None: all later ones); ``nullable_since``: the first
    version where it may be null (None: never); ``tag``: its tag when it is a tagged field (in every
    version that has it, as in all metadata records)."""

    attr: str
    type: FieldType
    since: int = 0
    until: int | None = None
    nullable_since: int | None = None
    tag: int | None = None

    def present(self, version: int) -> bool:
        return version >= self.since and (self.until is None or version <= self.until)

    def nullable(self, version: int) -> bool:
        return self.nullable_since is not None and version >= self.nullable_since


@dataclass(frozen=True, kw_only=True)
class Message:
    """A flexible Kafka message (a metadata record or a struct inside one). Subclasses are frozen
    dataclasses declaring ``FIELDS``; ``unknown_tags`` are the tagged fields read but not declared."""

    FIELDS: ClassVar[tuple[F, ...]] = ()
    unknown_tags: tuple[tuple[int, bytes], ...] = ()


# ------------------------------------------------------------------------------------------ writing

Writer = Callable[[bytearray, Any, int], None]


def _write_string(out: bytearray, v: Any, _version: int) -> None:
    b = v.encode()
    if len(b) > MAX_STRING:
        raise MetadataRecordError(f"string of {len(b)} bytes is longer than {MAX_STRING}")
    out += encode_uvarint(len(b) + 1)
    out += b


def _write_bytes(out: bytearray, v: Any, _version: int) -> None:
    out += encode_uvarint(len(v) + 1)
    out += v


def _write_uuid(out: bytearray, v: Any, _version: int) -> None:
    out += v.bytes


def _write_bool(out: bytearray, v: Any, _version: int) -> None:
    out.append(1 if v else 0)


def _fixed_writer(s: struct.Struct) -> Writer:
    def write(out: bytearray, v: Any, _version: int) -> None:
        try:
            out += s.pack(v)
        except struct.error as e:
            raise MetadataRecordError(f"{v!r} does not fit the field: {e}") from None

    return write


def _struct_writer(cls: type[Message]) -> Writer:
    def write(out: bytearray, v: Any, version: int) -> None:
        write_message(out, v, version)

    return write


def _writer(t: FieldType) -> Writer:
    if isinstance(t, Array):
        element = _writer_of_element(t.element)

        def write_array(out: bytearray, v: Any, version: int) -> None:
            out += encode_uvarint(len(v) + 1)
            for item in v:
                element(out, item, version)

        return write_array
    return _writer_of_element(t)


def _writer_of_element(t: str | type[Message]) -> Writer:
    if not isinstance(t, str):
        return _struct_writer(t)
    if t in _FIXED:
        return _fixed_writer(_FIXED[t])
    return {"string": _write_string, "bytes": _write_bytes, "uuid": _write_uuid, "bool": _write_bool}[t]


_DEFAULTS: dict[type[Message], dict[str, Any]] = {}
_WRITE_PLANS: dict[type[Message], tuple[tuple[F, Writer], ...]] = {}
_READ_PLANS: dict[tuple[type[Message], int], tuple[tuple[tuple[F, Reader], ...], dict[int, tuple[F, Reader]]]] = {}


def defaults(cls: type[Message]) -> dict[str, Any]:
    """Each field's default: the dataclass default (Kafka's ``default``, or its type's zero)."""
    hit = _DEFAULTS.get(cls)
    if hit is not None:
        return hit
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    for decl in cls.FIELDS:
        out.setdefault(decl.attr, _zero(decl.type))
    _DEFAULTS[cls] = out
    return out


def _zero(t: FieldType) -> Any:
    if isinstance(t, Array):
        return ()
    if not isinstance(t, str):
        return None
    return {"string": "", "bytes": b"", "uuid": ZERO_UUID, "bool": False, "float64": 0.0}.get(t, 0)


def _write_plan(cls: type[Message]) -> tuple[tuple[F, Writer], ...]:
    plan = _WRITE_PLANS.get(cls)
    if plan is None:
        plan = _WRITE_PLANS[cls] = tuple((decl, _writer(decl.type)) for decl in cls.FIELDS)
    return plan


def write_message(out: bytearray, msg: Message, version: int) -> None:
    """Append ``msg`` encoded at ``version`` to ``out``."""
    cls = type(msg)
    dflt = defaults(cls)
    tagged: list[tuple[int, bytes]] = []
    for decl, write in _write_plan(cls):
        value = getattr(msg, decl.attr)
        if not decl.present(version):
            if value != dflt[decl.attr]:
                raise MetadataRecordError(
                    f"{cls.__name__} version {version} cannot carry {decl.attr} = {value!r}")
            continue
        if decl.tag is not None:
            if value == dflt[decl.attr]:
                continue
            body = bytearray()
            _write_value(body, decl, write, value, version, cls)
            tagged.append((decl.tag, bytes(body)))
            continue
        _write_value(out, decl, write, value, version, cls)
    if msg.unknown_tags:
        known = {t for t, _ in tagged}
        for tag, raw in msg.unknown_tags:
            if tag in known:
                raise MetadataRecordError(f"{cls.__name__}: unknown tag {tag} is a declared field")
            tagged.append((tag, raw))
    tagged.sort(key=lambda t: t[0])  # by ascending tag, as Kafka's generated write (a TreeMap of the tags)
    out += encode_uvarint(len(tagged))
    for tag, raw in tagged:
        out += encode_uvarint(tag)
        out += encode_uvarint(len(raw))
        out += raw


def _write_value(out: bytearray, decl: F, write: Writer, value: Any, version: int, cls: type) -> None:
    if value is None:
        if not decl.nullable(version):
            raise MetadataRecordError(f"{cls.__name__}.{decl.attr} is not nullable in version {version}")
        out.append(0)  # compact length/count 0: null
        return
    write(out, value, version)


def encode_message(msg: Message, version: int) -> bytes:
    out = bytearray()
    write_message(out, msg, version)
    return bytes(out)


# ------------------------------------------------------------------------------------------ reading

Reader = Callable[[Any, int, int, int], tuple[Any, int]]


def _need(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise MetadataRecordError("record runs past its end")
    return pos + n


def _fixed_reader(s: struct.Struct) -> Reader:
    size = s.size
    unpack = s.unpack_from

    def read(buf: Any, pos: int, end: int, _version: int) -> tuple[Any, int]:
        nxt = _need(pos, size, end)
        return unpack(buf, pos)[0], nxt

    return read


def _read_bool(buf: Any, pos: int, end: int, _version: int) -> tuple[Any, int]:
    nxt = _need(pos, 1, end)
    return buf[pos] != 0, nxt


def _read_uuid(buf: Any, pos: int, end: int, _version: int) -> tuple[Any, int]:
    nxt = _need(pos, 16, end)
    return uuid.UUID(bytes=bytes(buf[pos:nxt])), nxt


def _read_string(buf: Any, pos: int, end: int, _version: int) -> tuple[Any, int]:
    n, pos = read_uvarint(buf, pos, end)
    n -= 1
    if n > MAX_STRING:
        raise MetadataRecordError(f"string of {n} bytes is longer than {MAX_STRING}")
    nxt = _need(pos, n, end)
    try:
        return bytes(buf[pos:nxt]).decode("utf-8"), nxt
    except UnicodeDecodeError as e:
        raise MetadataRecordError(f"invalid UTF-8 in a string: {e.reason}") from None


def _read_bytes(buf: Any, pos: int, end: int, _version: int) -> tuple[Any, int]:
    n, pos = read_uvarint(buf, pos, end)
    nxt = _need(pos, n - 1, end)
    return bytes(buf[pos:nxt]), nxt


def _reader_of_element(t: str | type[Message]) -> Reader:
    if not isinstance(t, str):
        cls = t

        def read_struct(buf: Any, pos: int, end: int, version: int) -> tuple[Any, int]:
            return read_message(cls, buf, pos, end, version)

        return read_struct
    if t in _FIXED:
        return _fixed_reader(_FIXED[t])
    return {"string": _read_string, "bytes": _read_bytes, "uuid": _read_uuid, "bool": _read_bool}[t]


def _reader(t: FieldType) -> Reader:
    if isinstance(t, Array):
        element = _reader_of_element(t.element)

        def read_array(buf: Any, pos: int, end: int, version: int) -> tuple[Any, int]:
            n, pos = read_uvarint(buf, pos, end)
            n -= 1
            if n > end - pos:  # every element takes at least one byte: a lying count is refused before use
                raise MetadataRecordError(f"array of {n} elements runs past the record's end")
            items = []
            for _ in range(n):
                item, pos = element(buf, pos, end, version)
                items.append(item)
            return tuple(items), pos

        return read_array
    return _reader_of_element(t)


def _is_null(buf: Any, pos: int, end: int) -> bool:
    return pos < end and buf[pos] == 0


def _read_plan(cls: type[Message], version: int) -> tuple[tuple[tuple[F, Reader], ...], dict[int, tuple[F, Reader]]]:
    hit = _READ_PLANS.get((cls, version))
    if hit is not None:
        return hit
    plain: list[tuple[F, Reader]] = []
    tagged: dict[int, tuple[F, Reader]] = {}
    for decl in cls.FIELDS:
        if not decl.present(version):
            continue
        if decl.tag is not None:
            tagged[decl.tag] = (decl, _reader(decl.type))
        else:
            plain.append((decl, _reader(decl.type)))
    _READ_PLANS[(cls, version)] = (tuple(plain), tagged)
    return tuple(plain), tagged


def _read_field(decl: F, read: Reader, buf: Any, pos: int, end: int, version: int, cls: type) -> tuple[Any, int]:
    if _is_null(buf, pos, end) and not _fixed_or_uuid(decl.type):
        if not decl.nullable(version):
            raise MetadataRecordError(f"non-nullable field {cls.__name__}.{decl.attr} was serialized as null")
        return None, pos + 1
    return read(buf, pos, end, version)


def _fixed_or_uuid(t: FieldType) -> bool:
    return isinstance(t, str) and t not in ("string", "bytes")


def read_message(cls: type[Message], buf: Any, pos: int, end: int, version: int) -> tuple[Any, int]:
    """The message of class ``cls`` at ``pos`` (not reading at or past ``end``), read at ``version``:
    ``(message, position after it)``."""
    plain, tagged_plan = _read_plan(cls, version)
    values: dict[str, Any] = {}
    try:
        for decl, read in plain:
            values[decl.attr], pos = _read_field(decl, read, buf, pos, end, version, cls)
        count, pos = read_uvarint(buf, pos, end)
        unknown: list[tuple[int, bytes]] = []
        for _ in range(count):  # any order, as Kafka's generated read (a switch on the tag)
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            stop = _need(pos, size, end)
            known = tagged_plan.get(tag)
            if known is None:
                unknown.append((tag, bytes(buf[pos:stop])))
            else:
                decl, read = known
                values[decl.attr], after = _read_field(decl, read, buf, pos, stop, version, cls)
                if after != stop:
                    raise MetadataRecordError(
                        f"{cls.__name__}.{decl.attr}: tagged field of {size} bytes holds {after - pos}")
            pos = stop
    except VarintError as e:
        raise MetadataRecordError(f"{cls.__name__}: {e}") from None
    except struct.error as e:
        raise MetadataRecordError(f"{cls.__name__}: {e}") from None
    return cls(**values, unknown_tags=tuple(unknown)), pos
