"""partition.metadata (KIP-516) read back: a damaged file is a LogError naming it, never a traceback
nor a silent adoption by whichever topic has the name (issue 33, item 2)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.log.checkpoint import read_partition_metadata, write_partition_metadata
from odradek.log.errors import LogError


def test_round_trip_and_missing(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    write_partition_metadata(tmp_path, tid)
    assert read_partition_metadata(tmp_path) == tid
    assert read_partition_metadata(tmp_path / "nowhere") is None


def test_empty_file_says_no_more_than_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "partition.metadata").write_bytes(b"")
    assert read_partition_metadata(tmp_path) is None


@pytest.mark.parametrize("content", [
    b"\xff\xfe\x00\x01", b"version: 0\n", b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
    b"version: 0\ntopic_id: not*base64\n", b"version: 0\ntopic_id: AAAA\n", b"\n",
])
def test_damaged_file_is_one_line_log_error_naming_it(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "partition.metadata").write_bytes(content)
    with pytest.raises(LogError) as e:
        read_partition_metadata(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "partition.metadata") in msg and "\n" not in msg
