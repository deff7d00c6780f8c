"""A CreateTopics whose metadata cannot be written must leave no phantom topic behind (issue 12, item 9).

The embedded broker keeps its metadata in ``<log.dir>/odradek-metadata.json`` (a snapshot, written through
``odradek-metadata.tmp`` then renamed) and ``odradek-metadata.journal`` (each change appended). With the
journal moved aside and a directory put at its path and at the temporary snapshot's, every write fails
(whatever the user's privileges, root included) until they are removed. The CreateTopics made during the
fault must fail with an error; once the fault is cleared, the same CreateTopics must succeed (not answer
TOPIC_ALREADY_EXISTS for a topic Metadata does not know), and the topic must survive a restart.
"""

from __future__ import annotations

import os

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from integration.broker import Broker
from integration.clients import unique, wait_for_topic


def _create(admin: AdminClient, topic: str) -> None:
    fs = admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)],
                             operation_timeout=5, request_timeout=8)
    fs[topic].result(timeout=15)


def test_failed_metadata_write_leaves_no_phantom_topic(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = unique("before")
    _create(admin, before)
    wait_for_topic(broker.bootstrap, before, 2)

    blockers = [broker.logdir / "odradek-metadata.tmp", broker.logdir / "odradek-metadata.journal"]
    aside = broker.logdir / "journal-aside"
    topic = unique("phantom")
    os.replace(blockers[1], aside)
    for b in blockers:
        b.mkdir()
    try:
        try:
            _create(admin, topic)
        except KafkaException as e:
            failed = e.args[0]
        else:
            raise AssertionError("CreateTopics succeeded although the metadata could not be written")
        # retriable: nothing was applied, the same request may be tried again
        assert failed.code() == KafkaError.REQUEST_TIMED_OUT, failed
        assert "could not be written" in failed.str(), failed
    finally:
        for b in blockers:
            b.rmdir()
        os.replace(aside, blockers[1])
    broker.assert_alive()
    assert topic not in admin.list_topics(timeout=5).topics

    _create(admin, topic)  # before the fix: TOPIC_ALREADY_EXISTS, though Metadata never showed the topic
    wait_for_topic(broker.bootstrap, topic, 2)

    broker.restart()
    wait_for_topic(broker.bootstrap, before, 2)
    wait_for_topic(broker.bootstrap, topic, 2)
