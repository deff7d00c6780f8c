"""Faults a broker can be started with on purpose, so that the verification checker
(odradek.verify) is shown able to fail: ``ODRADEK_FAULT_INJECTION=name[,name]`` in the broker's
environment. Never for real use: a broker started with one logs a warning naming it, and a name it
does not know stops it.

- ``expose-aborted``: read_committed fetches get no aborted-transaction list, so consumers deliver
  records of aborted transactions (the checker reports G1a);
- ``consumer-skip``: a consumer's fetch at an offset that is 13 modulo 97 reads from the next
  offset, so every consumer misses those records (the checker reports poll-skip and lost-write);
- ``duplicate-append``: a non-transactional produce batch of one record appended at an offset that
  is 3 modulo 29 is appended a second time, as a batch of no producer (the checker reports duplicate);
- ``misreport-offset``: a produce batch of one record appended at an offset that is 7 modulo 31 is
  acknowledged at the next offset, which holds another record (the checker reports
  inconsistent-offsets).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from odradek.protocol.records import BatchHeader

log = logging.getLogger(__name__)

ENV = "ODRADEK_FAULT_INJECTION"
KNOWN = frozenset({"expose-aborted", "consumer-skip", "duplicate-append", "misreport-offset"})
SKIP_MODULUS, SKIP_REMAINDER = 97, 13


def _parse(raw: str) -> frozenset[str]:
    return frozenset(n.strip() for n in raw.split(",") if n.strip())


FAULTS: frozenset[str] = _parse(os.environ.get(ENV, ""))


def check_at_start() -> None:
    """Warn about every fault this broker was started with; refuse one it does not know."""
    unknown = FAULTS - KNOWN
    if unknown:
        raise ValueError(f"{ENV}: unknown fault(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(KNOWN))}")
    for name in sorted(FAULTS):
        log.warning("FAULT INJECTION %s is on (%s): this broker breaks its guarantees on purpose", name, ENV)


def skipped_fetch_offset(offset: int) -> int:
    """The offset a consumer's fetch reads from under ``consumer-skip``."""
    return offset + 1 if offset % SKIP_MODULUS == SKIP_REMAINDER else offset


def duplicates(first_offset: int, headers: Sequence[BatchHeader]) -> bool:
    """Whether ``duplicate-append`` appends this produce's records a second time."""
    return ("duplicate-append" in FAULTS and first_offset % 29 == 3 and len(headers) == 1
            and headers[0].record_count == 1 and not headers[0].is_transactional)


def misreports(first_offset: int, headers: Sequence[BatchHeader]) -> bool:
    """Whether ``misreport-offset`` acknowledges this produce at the wrong offset."""
    return ("misreport-offset" in FAULTS and first_offset % 31 == 7 and len(headers) == 1
            and headers[0].record_count == 1)
