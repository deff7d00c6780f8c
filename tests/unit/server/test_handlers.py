from odradek.protocol.codec import request_class, response_class
from odradek.server.handlers import registry


def test_every_advertised_version_decodes_with_kio() -> None:
    for key, h in registry.items():
        assert h.min_version <= h.max_version, key
        for v in range(h.min_version, h.max_version + 1):
            assert request_class(key, v) is not None, (key, v)
            assert response_class(key, v) is not None, (key, v)


def test_the_clients_versions_are_covered() -> None:
    # the highest versions librdkafka 2.16, kafka-python 3.0 and aiokafka 0.14 send
    needs = {18: 4, 3: 13, 0: 10, 1: 16, 2: 7, 10: 6, 11: 7, 14: 5, 12: 4, 9: 9, 8: 9, 13: 5, 22: 4, 15: 5, 16: 5, 19: 4, 32: 1}
    for key, v in needs.items():
        h = registry[key]
        assert h.min_version <= min(v, h.max_version), key
    for key, lo in {3: 0, 0: 3, 1: 4, 2: 1}.items():  # aiokafka's oldest
        assert registry[key].min_version <= lo


def test_schema_warm_up_covers_the_client_versions() -> None:
    from odradek.protocol import codec
    from odradek.server.handlers import CLIENT_VERSIONS, schema_warm_up_steps

    steps = schema_warm_up_steps()
    assert len(steps) == sum(len(v) for v in CLIENT_VERSIONS.values())  # every one is a served version
    for step in steps:
        step()
    assert codec.request_class(1, 16) is not None  # Fetch v16, as librdkafka 2.16 sends it


def test_broker_process_loads_kio_without_hypothesis() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from odradek.cli.broker_cmd import import_kio\n"
        "import_kio()\n"
        "assert 'hypothesis' not in sys.modules, 'kio pulled in hypothesis'\n"
        "from odradek.protocol import codec\n"
        "codec.load(3, 12)\n"
        "import hypothesis.strategies\n"  # still importable afterwards
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_odradek_command_loads_kio_without_hypothesis() -> None:
    """The ``odradek`` command's own imports (every subcommand module) do not pull hypothesis in
    through kio before the broker's guard runs (a features_cmd import did: ~2.5 s of each start)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from odradek.cli import main\n"
        "try:\n"
        "    main.main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'kio.static.primitive' in sys.modules, 'no subcommand imports kio any more'\n"
        "assert 'hypothesis' not in sys.modules, 'kio pulled in hypothesis'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_metadata_partition_entities_follow_leader_isr_and_liveness() -> None:
    """The per-partition entity cache of the Metadata handler never answers with stale state."""
    import uuid

    from odradek.controller.topics import PartitionMeta, TopicMeta
    from odradek.protocol import codec
    from odradek.server.handlers import metadata

    codec.load(3, 12)
    m = codec.response_module(3, 12)
    meta = TopicMeta("t", uuid.uuid4(), [PartitionMeta(0, [1, 2], 1, 5, [1, 2])])
    first = metadata._topic_response(m, meta, 12, {1, 2}).partitions[0]
    assert (first.leader_id, first.leader_epoch, first.isr_nodes) == (1, 5, (1, 2))
    assert metadata._topic_response(m, meta, 12, {1, 2}).partitions[0] is first  # cached
    meta.partitions[0].isr.remove(2)  # mutated in place, as the ISR updates do
    meta.partitions[0].leader_epoch = 6
    p = metadata._topic_response(m, meta, 12, {1, 2}).partitions[0]
    assert (p.leader_epoch, p.isr_nodes) == (6, (1,))
    p = metadata._topic_response(m, meta, 12, {2}).partitions[0]  # the leader is not live
    assert (p.leader_id, p.error_code, p.offline_replicas) == (-1, 5, (1,))


def test_metadata_response_encoding_memo_follows_the_content() -> None:
    """An equal MetadataResponse is sent as the remembered bytes; any change is encoded afresh."""
    import uuid

    from odradek.controller.topics import PartitionMeta, TopicMeta
    from odradek.protocol import codec
    from odradek.server.handlers import metadata

    codec.load(3, 12)
    m = codec.response_module(3, 12)
    meta = TopicMeta("t", uuid.uuid4(), [PartitionMeta(i, [1], 1, 0, [1]) for i in range(3)])

    def body(throttle: int = 0) -> bytes:
        topic = metadata._topic_response(m, meta, 12, {1})
        return codec.encode(codec.make(m.MetadataResponse, throttle_time=throttle, brokers=(), cluster_id="c",
                                       controller_id=1, topics=(topic,)))

    first = body()
    assert body() is first  # remembered
    meta.partitions[2].leader_epoch = 7
    changed = body()
    assert changed != first
    assert body(throttle=50) not in (first, changed)
    codec._MEMO.clear()
    assert body() == changed  # what a fresh encoding gives
