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


def _verify(svc: Any, tid: str, topic: str, partition: int, records: bytes, version: int) -> Any:
    return verify_transactional_append(svc, tid, topic, partition, records, version, 0)[0]


def _svc(coord: FakeCoordinator, entry: Any = None, enabled: bool = True, remote: int | None = None) -> Any:
    plog = SimpleNamespace(producer_entry=lambda pid: entry,
                           maybe_start_transaction_verification=lambda pid, seq, epoch, now: None)
    return SimpleNamespace(
        txn=SimpleNamespace(verification_enabled=enabled, coordinator=coord, coordinator_broker=lambda tid: remote,
                            channel=object() if remote is not None else None),
        replica_manager=SimpleNamespace(get_log=lambda t, p: plog, leading=lambda t, p: object()),
    )


def _batch(transactional: bool = True, pid: int = 42, epoch: int = 3) -> bytes:
    return build_batch([(None, b"v")], timestamp=1, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                       transactional=transactional)


def test_partition_in_the_transaction_is_appended() -> None:
    coord = FakeCoordinator(errors.NONE)
    assert _verify(_svc(coord), "tx", "t", 0, _batch(), 9) == (errors.NONE, None)
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
    code, msg = _verify(_svc(FakeCoordinator(answer)), "tx", "t", 0, _batch(), version)
    assert code == expected and msg


def test_no_question_once_the_transaction_is_open_on_the_partition() -> None:
    coord = FakeCoordinator(errors.TRANSACTION_ABORTABLE)
    open_entry = SimpleNamespace(current_txn_first_offset=10, epoch=3)
    assert _verify(_svc(coord, open_entry), "tx", "t", 0, _batch(), 9)[0] == errors.NONE
    assert coord.asked == []
    # the same producer id at a newer epoch starts a new transaction: asked again
    assert _verify(_svc(coord, open_entry), "tx", "t", 0, _batch(epoch=4), 9)[0] \
        == errors.INVALID_TXN_STATE
    assert len(coord.asked) == 1


def test_not_asked_for_plain_batches_or_when_disabled() -> None:
    coord = FakeCoordinator(errors.TRANSACTION_ABORTABLE)
    assert _verify(_svc(coord), "tx", "t", 0, _batch(transactional=False), 9) == (errors.NONE, None)
    assert _verify(_svc(coord, enabled=False), "tx", "t", 0, _batch(), 9) == (errors.NONE, None)
    assert _verify(_svc(coord), "tx", "t", 0, b"\x00" * 10, 9) == (errors.NONE, None)
    assert coord.asked == []


def test_a_coordinator_on_another_broker_is_asked_over_the_network() -> None:
    elsewhere = FakeCoordinator(errors.TRANSACTION_ABORTABLE, owned=False)
    assert _verify(_svc(elsewhere, remote=2), "tx", "t", 0, _batch(), 9) == RemoteCheck(2, 42, 3)
    # no coordinator known (its partition has no leader): retriable
    assert _verify(_svc(elsewhere), "tx", "t", 0, _batch(), 9)[0] == errors.NOT_ENOUGH_REPLICAS
    assert elsewhere.asked == []


# ---------------------------------------------------------------- transaction.version 2 (KIP-890 part 2)
class AddingCoordinator(FakeCoordinator):
    def __init__(self, answer: int, owned: bool = True) -> None:
        super().__init__(answer, owned)
        self.added: list[tuple[str, int, int, list[tuple[str, int]], int]] = []

    def add_partitions(self, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]], respond: Any,
                       client_transaction_version: int = 0) -> None:
        self.added.append((tid, pid, epoch, parts, client_transaction_version))
        respond(self.answer)


def _svc_tv(coord: FakeCoordinator, level: int, entry: Any = None, enabled: bool = True,
            remote: int | None = None) -> Any:
    svc = _svc(coord, entry, enabled, remote)
    svc.features = SimpleNamespace(level=lambda name: level if name == "transaction.version" else 0)
    return svc


def test_produce_v12_under_tv2_adds_the_partition() -> None:
    from odradek.server.txn_verification import run_check

    coord = AddingCoordinator(errors.NONE)
    svc = _svc_tv(coord, 2, enabled=False)  # added whether or not verification is enabled
    check = _verify(svc, "tx", "t", 0, _batch(), 12)
    assert check == RemoteCheck(None, 42, 3, True) and coord.asked == []
    got: list[dict[tuple[str, int], int]] = []
    assert isinstance(check, RemoteCheck)
    run_check(svc, check, "tx", [("t", 0)], got.append)
    assert got == [{("t", 0): errors.NONE}] and coord.added == [("tx", 42, 3, [("t", 0)], 2)]
    # once the transaction is open on the partition at this epoch, nothing is asked
    open_entry = SimpleNamespace(current_txn_first_offset=10, epoch=3)
    assert _verify(_svc_tv(coord, 2, open_entry), "tx", "t", 0, _batch(), 12) == (errors.NONE,
                                                                                                      None)


def test_produce_v12_below_tv2_and_v11_under_tv2_only_verify() -> None:
    coord = AddingCoordinator(errors.NONE)
    assert _verify(_svc_tv(coord, 1), "tx", "t", 0, _batch(), 12) == (errors.NONE, None)
    assert _verify(_svc_tv(coord, 2), "tx", "t", 0, _batch(), 11) == (errors.NONE, None)
    assert len(coord.asked) == 2 and coord.added == []


def test_produce_v12_with_a_remote_coordinator_sends_an_add() -> None:
    from odradek.server.txn_verification import run_check

    coord = AddingCoordinator(errors.NONE, owned=False)
    svc = _svc_tv(coord, 2, remote=7)
    sent: list[tuple[str, Any]] = []
    svc.txn.channel = SimpleNamespace(add_partitions=lambda *a: sent.append(("add", a)),
                                      verify=lambda *a: sent.append(("verify", a)))
    check = _verify(svc, "tx", "t", 0, _batch(), 12)
    assert check == RemoteCheck(7, 42, 3, True)
    assert isinstance(check, RemoteCheck)
    run_check(svc, check, "tx", [("t", 0)], lambda codes: None)
    assert [kind for kind, _ in sent] == ["add"] and sent[0][1][:5] == (7, "tx", 42, 3, [("t", 0)])


def test_tv2_request_versions_advertised_by_level() -> None:
    from odradek.server.txn_version import advertised, client_transaction_version

    versions = [(0, 0, 12), (3, 0, 12), (24, 0, 5), (26, 0, 5), (28, 0, 5)]
    assert advertised(versions, 1) == [(0, 0, 11), (3, 0, 12), (24, 0, 4), (26, 0, 4), (28, 0, 4)]
    assert advertised(versions, 0) == advertised(versions, 1)
    assert advertised(versions, 2) == versions
    assert [client_transaction_version(26, v) for v in (3, 4, 5)] == [0, 0, 2]
    assert [client_transaction_version(0, v) for v in (11, 12)] == [0, 2]
