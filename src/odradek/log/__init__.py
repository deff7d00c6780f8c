"""Storage layer: Kafka's on-disk log format (segments, indexes, checkpoints).

Pure synchronous file I/O, called from the broker's event loop thread.
"""

from odradek.log.config import LogConfig
from odradek.log.errors import LogError, OffsetOutOfRangeError, ProducerStateError
from odradek.log.fetch_isolation import FetchIsolation, IsolationLevel
from odradek.log.file_records import FetchData, FileRecords
from odradek.log.log import AppendInfo, Log
from odradek.log.manager import LogManager
from odradek.log.segment import LogSegment
from odradek.log.validator import AppendOrigin
from odradek.protocol.fetch_response import FileRegion

__all__ = [
    "AppendInfo",
    "AppendOrigin",
    "FetchData",
    "FetchIsolation",
    "FileRecords",
    "FileRegion",
    "IsolationLevel",
    "Log",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogSegment",
    "OffsetOutOfRangeError",
    "ProducerStateError",
]
