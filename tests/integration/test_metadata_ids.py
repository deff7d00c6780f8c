"""Metadata by topic id (v10+): unknown ids get UNKNOWN_TOPIC_ID, at every version
(found by fuzzing: v10-11 could not encode the answer and left the client waiting)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.metadata.v11.request import MetadataRequestTopic as T11
from kio.schema.metadata.v12.request import MetadataRequestTopic as T12

from odradek.client.wire import WireClient
from odradek.protocol import errors

from .broker import Broker


@pytest.mark.parametrize("version,cls", [(10, T11), (11, T11), (12, T12)])
def test_unknown_topic_id(broker: Broker, version: int, cls: type) -> None:
    with WireClient(broker.bootstrap, timeout=10) as c:
        resp = c.request(3, version, topics=(cls(topic_id=uuid.uuid4(), name=None),),
                         allow_auto_topic_creation=True, include_topic_authorized_operations=False,
                         **({"include_cluster_authorized_operations": False} if version < 11 else {}))
        assert [t.error_code for t in resp.topics] == [errors.UNKNOWN_TOPIC_ID]
        # the same connection keeps working
        again = c.request(3, version, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False,
                          **({"include_cluster_authorized_operations": False} if version < 11 else {}))
        assert again.brokers


def test_a_known_id_with_an_empty_name_is_looked_up_by_id(broker: Broker) -> None:
    """The Java client's describeTopics(TopicCollection.ofTopicIds(...)) sends the id with the name "" (not
    null): the id decides, and the answer carries the topic's id (the client refuses a zero id there)."""
    from .clients import create_topic

    create_topic(broker.bootstrap, "by-id", 2)
    with WireClient(broker.bootstrap, timeout=10) as c:
        listed = c.request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        [tid] = [t.topic_id for t in listed.topics if t.name == "by-id"]
        resp = c.request(3, 12, topics=(T12(topic_id=tid, name=""), T12(topic_id=uuid.uuid4(), name="")),
                         allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        found, unknown = resp.topics
        assert (found.error_code, found.name, found.topic_id, len(found.partitions)) == (errors.NONE, "by-id", tid, 2)
        assert unknown.error_code == errors.UNKNOWN_TOPIC_ID and unknown.topic_id != uuid.UUID(int=0)
