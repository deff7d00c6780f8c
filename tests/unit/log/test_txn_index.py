"""TransactionIndex (the .txnindex of a segment)."""

from __future__ import annotations

from pathlib import Path


def test_absent_index_reads_nothing_and_resets_without_the_file(tmp_path: Path) -> None:
    """A segment the loader listed without a .txnindex: no read, no truncate, until an entry is written."""
    from odradek.log.txn_index import AbortedTxn, TransactionIndex

    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path, 0, absent=True)
    assert idx.entries == []
    idx.reset()
    assert not path.exists()
    idx.append(AbortedTxn(1, 0, 5, 6))
    assert path.stat().st_size > 0
    idx.reset()  # the file is there now: emptied
    assert path.stat().st_size == 0 and idx.entries == []
    idx.close()
