"""Storage layer: Kafka's on-disk log format (segments, indexes, checkpoints).

Pure synchronous file I/O, called from the broker's event loop thread.
"""

from odradek.log.config import LogConfig
from odradek.log.errors import LogError, OffsetOutOfRangeError, ProducerStateError
from odradek.log.file_records import FetchData, FileRecords
from odradek.log.log import AppendInfo, Log
from odradek.log.manager import LogManager
from odradek.log.segment import LogSegment
from odradek.protocol.fetch_response import FileRegion

__all__ = [
    "AppendInfo",
    "FetchData",
    "FileRecords",
    "FileRegion",
    "Log",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogSegment",
    "OffsetOutOfRangeError",
    "ProducerStateError",
]
