"""The error codes a response carries, counted: what Kafka's ``AbstractResponse.errorCounts`` gives
``RequestChannel.updateErrorMetrics`` for the ErrorsPerSec meter of RequestMetrics (one mark per error
code occurrence, NONE included).

A kio response entity is walked for its ``error_code`` fields, at any depth (top level, per topic, per
partition, per member...): Kafka's per-response ``errorCounts`` counts the same fields, response by
response. The field names of each entity class are looked up once. The hand-encoded responses (Produce,
Fetch) carry their counts with them (``RawResponse.errors``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) \
            else ()
    return names


def entity_error_counts(entity: Any) -> dict[int, int]:
    """Occurrences of each error code in ``entity``'s ``error_code`` fields, nested entities included."""
    counts: dict[int, int] = {}
    stack = [entity]
    while stack:
        e = stack.pop()
        for name in _fields(type(e)):
            v = getattr(e, name)
            if name == "error_code":
                if v is not None:
                    code = int(v)
                    counts[code] = counts.get(code, 0) + 1
            elif isinstance(v, tuple):
                stack.extend(x for x in v if dataclasses.is_dataclass(x))
            elif dataclasses.is_dataclass(v):
                stack.append(v)
    return counts


def add_error(counts: dict[int, int], code: int) -> None:
    counts[code] = counts.get(code, 0) + 1
