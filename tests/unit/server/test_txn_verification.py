"""KIP-890 part 1: the leader asks the coordinator before a transaction's first append."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from odradek.protocol import errors
from odradek.protocol.records import build_batch
from odradek.server.txn_verification import RemoteCheck, verify_transactional_append


class FakeCoordinator:
    def __init__(self, answer: int, owned: bool = True) -> None:
        self.answer = answer
        self.owned = owned
        self.asked: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    def partition_for(self, tid: str) -> int:
        return 0

    def owned_partitions(self) -> set[int]:
        return {0} if self.owned else set()

    def verify_partitions(self, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]]) -> dict[Any, int]:
        self.asked.append((tid, pid, epoch, parts))
        return dict.fromkeys(parts, self.answer)


def _svc(coord: FakeCoordinator, entry: Any = None, enabled: bool = True, remote: int | None = None) -> Any:
    plog = SimpleNamespace(producer_entry=lambda pid: entry)
    return SimpleNamespace(
        txn=SimpleNamespace(verification_enabled=enabled, coordinator=coord, coordinator_broker=lambda tid: remote,
                            channel=object() if remote is not None else None),
        replica_manager=SimpleNamespace(get_log=lambda t, p: plog),
    )


def _batch(transactional: bool = True, pid: int = 42, epoch: int = 3) -> bytes:
    return build_batch([(None, b"v")], timestamp=1, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                       transactional=transactional)


def test_partition_in_the_transaction_is_appended() -> None:
    coord = FakeCoordinator(errors.NONE)
    assert verify_transactional_append(_svc(coord), "tx", "t", 0, _batch(), 9) == (errors.NONE, None)
    assert coord.asked == [("tx", 42, 3, [("t", 0)])]


@pytest.mark.parametrize(("answer", "version", "expected"), [
    (errors.TRANSACTION_ABORTABLE, 9, errors.INVALID_TXN_STATE),
    (errors.TRANSACTION_ABORTABLE, 11, errors.TRANSACTION_ABORTABLE),
    (errors.PRODUCER_FENCED, 9, errors.INVALID_PRODUCER_EPOCH),
    (errors.INVALID_PRODUCER_ID_MAPPING, 9, errors.INVALID_TXN_STATE),
    (errors.CONCURRENT_TRANSACTIONS, 9, errors.NOT_ENOUGH_REPLICAS),
    (errors.COORDINATOR_LOAD_IN_PROGRESS, 9, errors.NOT_ENOUGH_REPLICAS),
])
def test_coordinator_answers_map_to_produce_errors(answer: int, version: int, expected: int) -> None:
    code, msg = verify_transactional_append(_svc(FakeCoordinator(answer)), "tx", "t", 0, _batch(), version)
    assert code == expected and msg


def test_no_question_once_the_transaction_is_open_on_the_partition() -> None:
    coord = FakeCoordinator(errors.TRANSACTION_ABORTABLE)
    open_entry = SimpleNamespace(current_txn_first_offset=10, epoch=3)
    assert verify_transactional_append(_svc(coord, open_entry), "tx", "t", 0, _batch(), 9)[0] == errors.NONE
    assert coord.asked == []
    # the same producer id at a newer epoch starts a new transaction: asked again
    assert verify_transactional_append(_svc(coord, open_entry), "tx", "t", 0, _batch(epoch=4), 9)[0] \
        == errors.INVALID_TXN_STATE
    assert len(coord.asked) == 1


def test_not_asked_for_plain_batches_or_when_disabled() -> None:
    coord = FakeCoordinator(errors.TRANSACTION_ABORTABLE)
    assert verify_transactional_append(_svc(coord), "tx", "t", 0, _batch(transactional=False), 9) == (errors.NONE, None)
    assert verify_transactional_append(_svc(coord, enabled=False), "tx", "t", 0, _batch(), 9) == (errors.NONE, None)
    assert verify_transactional_append(_svc(coord), "tx", "t", 0, b"\x00" * 10, 9) == (errors.NONE, None)
    assert coord.asked == []


def test_a_coordinator_on_another_broker_is_asked_over_the_network() -> None:
    elsewhere = FakeCoordinator(errors.TRANSACTION_ABORTABLE, owned=False)
    assert verify_transactional_append(_svc(elsewhere, remote=2), "tx", "t", 0, _batch(), 9) == RemoteCheck(2, 42, 3)
    # no coordinator known (its partition has no leader): retriable
    assert verify_transactional_append(_svc(elsewhere), "tx", "t", 0, _batch(), 9)[0] == errors.NOT_ENOUGH_REPLICAS
    assert elsewhere.asked == []
