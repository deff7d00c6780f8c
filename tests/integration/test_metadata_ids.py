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
