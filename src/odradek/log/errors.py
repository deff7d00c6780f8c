"""Exceptions raised by the storage layer, each carrying Kafka's error code."""

from __future__ import annotations

OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
INVALID_TIMESTAMP = 32
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
KAFKA_STORAGE_ERROR = 56
UNKNOWN_PRODUCER_ID = 59
INCONSISTENT_TOPIC_ID = 103


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
