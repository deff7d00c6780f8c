import json

import pytest

from odradek.protocol import interbroker as ib

STATE = {
    "topic": "t", "partition": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7, "isr": [1, 2],
    "zk_version": 4, "replicas": [1, 2, 3], "adding_replicas": [], "removing_replicas": [], "is_new": False,
}


def test_round_trip() -> None:
    body = {"controller_id": 1, "controller_epoch": 3, "broker_epoch": 99, "partitions": [STATE],
            "live_leaders": [{"id": 1, "host": "h", "port": 9092, "rack": None}], "topic_ids": {"t": "AAAAAAAAAAAAAAAAAAAAAQ"}}
    assert ib.decode(ib.LEADER_AND_ISR, 0, ib.encode(ib.LEADER_AND_ISR, body)) == body


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[]", b'{"broker_id": 1}', b'{"broker_id": "1", "broker_epoch": 2}', b'{"broker_id": true, "broker_epoch": 2}'],
)
def test_malformed_bodies_rejected(raw: bytes) -> None:
    with pytest.raises(ib.InterBrokerDecodeError):
        ib.decode(ib.CONTROLLED_SHUTDOWN, 0, raw)


def test_nested_type_errors_and_versions() -> None:
    bad = dict(STATE, isr=[1, "2"])
    body = {"controller_id": 1, "controller_epoch": 3, "broker_epoch": 9, "partitions": [bad], "live_leaders": [], "topic_ids": {}}
    with pytest.raises(ib.InterBrokerDecodeError):
        ib.encode(ib.LEADER_AND_ISR, body)
    with pytest.raises(ib.InterBrokerDecodeError):
        ib.decode(ib.CONTROLLED_SHUTDOWN, 1, b'{"broker_id": 1, "broker_epoch": 2}')
    assert ib.decode_response(b'{"error_code": 0}') == {"error_code": 0}
    with pytest.raises(ib.InterBrokerDecodeError):
        ib.decode_response(b'{"x": 0}')


def test_an_illegal_topic_name_is_refused() -> None:
    for name in ("../../etc", "a/b", "", ".."):
        body = {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1,
                "partitions": [{"topic": name, "partition": 0, "leader_epoch": 0, "delete": True}]}
        with pytest.raises(ib.InterBrokerDecodeError):
            ib.decode(ib.STOP_REPLICA, ib.VERSION, json.dumps(body).encode())
