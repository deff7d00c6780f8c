"""odradek.protocol.api_keys: the API keys are Kafka 4.4's, and every handler declares its key by name."""

from __future__ import annotations

import asyncio

from odradek.protocol.api_keys import ApiKey, api_name
from odradek.purgatory import DelayedResponse
from odradek.server.handlers import NO_RESPONSE, RawResponse, ResultKind, kind_of, registry


def test_names_and_numbers_match_kafka() -> None:
    # a sample across the range, read from Kafka 4.4's request schemas
    assert ApiKey.PRODUCE == 0 and api_name(0) == "Produce"
    assert ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75 and api_name(75) == "DescribeTopicPartitions"
    assert ApiKey.LIST_CONFIG_RESOURCES == 74 and api_name(74) == "ListConfigResources"  # KIP-1142's name
    assert ApiKey.DELETE_SHARE_GROUP_OFFSETS == 92
    assert api_name(9999) == "9999"
    assert sorted(k.value for k in ApiKey) == list(range(len(ApiKey)))  # no gaps, no duplicates


def test_every_handler_declares_an_api_key() -> None:
    for key, handler in registry.items():
        assert isinstance(handler.api_key, ApiKey) and handler.api_key == key
        assert isinstance(handler.module.API_KEY, ApiKey), handler.module.__name__
        # the module is named after the API (snake case of Kafka's name)
        assert handler.module.__name__.rsplit(".", 1)[-1].replace("_", "") == api_name(key).lower()


def test_kind_of_each_result() -> None:
    loop = asyncio.new_event_loop()
    try:
        fut: asyncio.Future[object] = loop.create_future()
        assert kind_of(fut) is ResultKind.FUTURE
    finally:
        loop.close()
    assert kind_of(NO_RESPONSE) is ResultKind.NONE
    assert kind_of(RawResponse([b"x"], 1)) is ResultKind.RAW
    assert kind_of(b"body") is ResultKind.ENTITY
    assert kind_of(DelayedResponse.__new__(DelayedResponse)) is ResultKind.DELAYED
