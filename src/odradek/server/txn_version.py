"""``transaction.version`` (KIP-584 feature, Kafka's TransactionVersion) as the request path
sees it: which request versions belong to KIP-890 part 2, and what ApiVersions advertises.

With the finalized level below 2 the broker advertises the last versions before transaction
version 2 (Produce 11, AddPartitionsToTxn 4, EndTxn 4, TxnOffsetCommit 4: Kafka's
``LAST_..._BEFORE_TRANSACTION_V2`` versions of those requests), so a client keeps the
transaction protocol it had; at 2 the next ones (Produce 12, AddPartitionsToTxn 5, EndTxn 5,
TxnOffsetCommit 5), with which a partition leader adds its partition to the transaction itself
and every EndTxn bumps the producer epoch. A request at a TV2 version while the level is below
2 is answered as its handler says (EndTxn and TxnOffsetCommit: UNSUPPORTED_VERSION; Produce v12
is served as v11, with KIP-890 part 1's verification)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from odradek.controller.features import TRANSACTION_VERSION

TV_2 = 2
PRODUCE, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 0, 24, 26, 28
# api key -> the first version that needs transaction.version 2
TV2_FIRST_VERSION: dict[int, int] = {PRODUCE: 12, ADD_PARTITIONS_TO_TXN: 5, END_TXN: 5, TXN_OFFSET_COMMIT: 5}


class FeatureLevels(Protocol):
    def level(self, feature: str) -> int: ...


def transaction_version(features: FeatureLevels) -> int:
    """The finalized transaction.version (0 when not finalized)."""
    return features.level(TRANSACTION_VERSION)


def is_tv2_request(api_key: int, version: int) -> bool:
    """Whether this request version is one of KIP-890 part 2's (the client transaction version 2)."""
    first = TV2_FIRST_VERSION.get(api_key)
    return first is not None and version >= first


def client_transaction_version(api_key: int, version: int) -> int:
    """Kafka's TransactionVersion.transactionVersionForEndTxn and its kin: 2 for the TV2
    versions, else 0."""
    return TV_2 if is_tv2_request(api_key, version) else 0


def advertised(versions: Iterable[tuple[int, int, int]], level: int) -> list[tuple[int, int, int]]:
    """(api key, min, max) as ApiVersions lists them under transaction.version ``level``."""
    if level >= TV_2:
        return list(versions)
    return [(k, lo, min(hi, TV2_FIRST_VERSION[k] - 1) if k in TV2_FIRST_VERSION else hi) for k, lo, hi in versions]
