"""Exceptions raised by the storage layer, each carrying Kafka's error code."""

from __future__ import annotations

from odradek.protocol.errors import (  # Kafka's codes, from the one table (re-exported for the storage layer)
    CORRUPT_MESSAGE,
    INCONSISTENT_TOPIC_ID,
    INVALID_PRODUCER_EPOCH,
    INVALID_TIMESTAMP,
    INVALID_TXN_STATE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    OFFSET_OUT_OF_RANGE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    RECORD_LIST_TOO_LARGE,
    TRANSACTION_COORDINATOR_FENCED,
    UNKNOWN_PRODUCER_ID,
)

__all__ = [
    "CORRUPT_MESSAGE", "INCONSISTENT_TOPIC_ID", "INVALID_PRODUCER_EPOCH", "INVALID_TIMESTAMP", "INVALID_TXN_STATE",
    "KAFKA_STORAGE_ERROR", "MESSAGE_TOO_LARGE", "OFFSET_OUT_OF_RANGE", "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "RECORD_LIST_TOO_LARGE", "TRANSACTION_COORDINATOR_FENCED", "UNKNOWN_PRODUCER_ID",
]


class LogError(Exception):
    """Base class: ``error_code`` is the Kafka error code to put in a response."""

    error_code: int = KAFKA_STORAGE_ERROR

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_code is not None:
            self.error_code = error_code


class OffsetOutOfRangeError(LogError):
    error_code = OFFSET_OUT_OF_RANGE


class ProducerStateError(LogError):
    """Idempotent/transactional producer check failed (45, 47, 52, ...)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message, error_code)


class CorruptIndexError(LogError):
    """An index file failed its sanity check; the caller rebuilds it."""

    error_code = CORRUPT_MESSAGE


class InconsistentTopicIdError(LogError):
    """A log on disk belongs to another topic of the same name (Kafka's InconsistentTopicIdException:
    its partition.metadata names a different topic id than the one asked for)."""

    error_code = INCONSISTENT_TOPIC_ID
