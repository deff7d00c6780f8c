"""The controller-to-broker channel of cluster mode, defined here (Kafka 4's schemas no
longer carry the ZooKeeper-era LeaderAndIsr / StopReplica / UpdateMetadata /
ControlledShutdown, and kio cannot decode them).

Framing is Kafka's: a request header v1 (int16 api key, int16 version, int32 correlation
id, nullable string client id) and a response header v0 (int32 correlation id). The API
keys are the ones Kafka used for these requests. The body is one UTF-8 JSON object whose
fields are checked against the schemas below (version 0)::

    LeaderAndIsr (4)      {controller_id, controller_epoch, broker_epoch, partitions: [PartitionState],
                           live_leaders: [Node]}
        response          {error_code, partitions: [{topic, partition, error_code}]}
    StopReplica (5)       {controller_id, controller_epoch, broker_epoch,
                           partitions: [{topic, partition, leader_epoch, delete}]}
        response          {error_code, partitions: [{topic, partition, error_code}]}
    UpdateMetadata (6)    {controller_id, controller_epoch, broker_epoch, partitions: [PartitionState],
                           live_brokers: [Node], topic_ids: {topic: base64 id}, full: bool}
                          (full: every partition with a leader state is listed; a cached topic
                          named neither there nor, with its id, in topic_ids is gone)
        response          {error_code}
    ControlledShutdown (7) {broker_id, broker_epoch}
        response          {error_code, remaining_partitions: [{topic, partition}]}

    PartitionState = {topic, partition, controller_epoch, leader, leader_epoch, isr: [int],
                      zk_version, replicas: [int], adding_replicas: [int], removing_replicas: [int],
                      is_new}
    Node = {id, host, port, rack}

Every request carries the controller epoch and the receiver's broker epoch (its
/brokers/ids znode czxid) so a stale controller, or a request meant for an earlier
incarnation of the broker, is rejected (STALE_CONTROLLER_EPOCH / STALE_BROKER_EPOCH).
"""

from __future__ import annotations

import json
from typing import Any

from odradek.names import is_legal_topic_name

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
VERSION = 0



class InterBrokerDecodeError(ValueError):
    pass


_INT = int
_LIST = list
_PARTITION_STATE = {
    "topic": str, "partition": _INT, "controller_epoch": _INT, "leader": _INT, "leader_epoch": _INT,
    "isr": _LIST, "zk_version": _INT, "replicas": _LIST, "adding_replicas": _LIST,
    "removing_replicas": _LIST, "is_new": bool,
}
_NODE = {"id": _INT, "host": str, "port": _INT}

SCHEMAS: dict[int, dict[str, Any]] = {
    LEADER_AND_ISR: {"controller_id": _INT, "controller_epoch": _INT, "broker_epoch": _INT,
                     "partitions": [_PARTITION_STATE], "live_leaders": [_NODE], "topic_ids": dict},
    STOP_REPLICA: {"controller_id": _INT, "controller_epoch": _INT, "broker_epoch": _INT,
                   "partitions": [{"topic": str, "partition": _INT, "leader_epoch": _INT, "delete": bool}]},
    UPDATE_METADATA: {"controller_id": _INT, "controller_epoch": _INT, "broker_epoch": _INT,
                      "partitions": [_PARTITION_STATE], "live_brokers": [_NODE], "topic_ids": dict,
                      "full": bool},
    CONTROLLED_SHUTDOWN: {"broker_id": _INT, "broker_epoch": _INT},
}


def _check(value: Any, schema: Any, where: str) -> None:
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise InterBrokerDecodeError(f"{where}: expected an object")
        for k, sub in schema.items():
            if k not in value:
                raise InterBrokerDecodeError(f"{where}: missing field {k}")
            _check(value[k], sub, f"{where}.{k}")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise InterBrokerDecodeError(f"{where}: expected an array")
        for i, item in enumerate(value):
            _check(item, schema[0], f"{where}[{i}]")
    elif schema is bool:
        if not isinstance(value, bool):
            raise InterBrokerDecodeError(f"{where}: expected a boolean")
    elif schema is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InterBrokerDecodeError(f"{where}: expected an integer")
    elif schema is list:
        if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
            raise InterBrokerDecodeError(f"{where}: expected an array of integers")
    elif not isinstance(value, schema):
        raise InterBrokerDecodeError(f"{where}: expected {schema.__name__}")


def encode(api_key: int, body: dict[str, Any]) -> bytes:
    _check(body, SCHEMAS[api_key], f"api {api_key}")
    return json.dumps(body, separators=(",", ":")).encode()


def decode(api_key: int, version: int, data: bytes | memoryview) -> dict[str, Any]:
    """Decode and check a request body; topic names must be legal (they become directory names)."""
    if version != VERSION:
        raise InterBrokerDecodeError(f"unsupported version {version} of inter-broker api {api_key}")
    try:
        body: dict[str, Any] = json.loads(bytes(data))  # a JSON object: _check() below rejects others
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the parser's stack
        raise InterBrokerDecodeError(f"api {api_key}: body is not JSON: {type(e).__name__}: {e}") from None
    schema = SCHEMAS[api_key]
    _check(body, schema, f"api {api_key}")
    for ps in body["partitions"] if "partitions" in schema else ():  # a field the schema lacks is unchecked
        topic = ps["topic"]
        if not is_legal_topic_name(topic):
            raise InterBrokerDecodeError(f"api {api_key}: illegal topic name {topic!r}")
    return body


def encode_response(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def decode_response(data: bytes | memoryview) -> dict[str, Any]:
    try:
        body = json.loads(bytes(data))
    except (ValueError, RecursionError) as e:
        raise InterBrokerDecodeError(f"response is not JSON: {type(e).__name__}: {e}") from None
    if not isinstance(body, dict) or not isinstance(body.get("error_code"), int):
        raise InterBrokerDecodeError("response has no error_code")
    return body
