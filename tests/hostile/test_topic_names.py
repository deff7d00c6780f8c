"""Topic names become directory names: a name that is not exactly ``[a-zA-Z0-9._-]{1,249}`` is refused, and a
log directory the broker cannot parse does not stop it from starting.

Python's ``re.match`` with ``$`` accepts a final newline, so ``"evil\\n"`` once passed the name check: the
broker created the directory ``evil\\n-0`` and could not start again after a clean stop.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from integration import wire
from integration.broker import Broker, BrokerFactory

# names Kafka's Topic.validate refuses that a prefix match accepted
TRAILING = ["evil\n", "ok\n", "a" * 249 + "\n"]


def _metadata_v4(conn: wire.Conn, names: list[str], allow_auto: bool = True) -> list[tuple[int, str]]:
    """Metadata v4 for ``names`` -> [(error_code, name)]."""
    body = wire.Writer().array(names, lambda w, n: w.string(n)).bool(allow_auto).done()
    r = conn.request(wire.METADATA, 4, body)
    r.int32()  # throttle
    r.array(lambda rr: (rr.int32(), rr.string(), rr.int32(), rr.string()))
    r.string()  # cluster id
    r.int32()  # controller
    out = []
    for _ in range(r.int32()):
        code, name = r.int16(), r.string()
        r.int8()  # is_internal
        r.array(lambda rr: (rr.int16(), rr.int32(), rr.int32(), rr.array(lambda x: x.int32()),
                            rr.array(lambda x: x.int32())))
        assert name is not None
        out.append((code, name))
    return out


@pytest.mark.timeout(120)
def test_trailing_newline_names_are_refused_and_the_broker_restarts(broker: Broker) -> None:
    with wire.Conn(broker.bootstrap) as c:
        res = wire.create_topics(c, [(n, 1, {}) for n in TRAILING], version=4)
        assert sorted((n, e) for n, e, _ in res) == sorted((n, wire.INVALID_TOPIC_EXCEPTION) for n in TRAILING)
        # Metadata with auto-creation on (the broker default) must not create them either
        got = _metadata_v4(c, ["evil2\n"])
        assert got == [(wire.INVALID_TOPIC_EXCEPTION, "evil2\n")]
    assert not [p.name for p in broker.logdir.iterdir() if "\n" in p.name]
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert not [t for t in md.topics if "\n" in t]
    broker.restart()
    broker.assert_alive()


@pytest.mark.timeout(120)
def test_unparseable_log_directories_are_logged_and_skipped(make_broker: BrokerFactory) -> None:
    b = make_broker()
    with wire.Conn(b.bootstrap) as c:
        assert wire.create_topics(c, [("kept", 1, {})])[0][1] == wire.NONE
    b.stop()
    junk = ["evil\n-0", "no_partition_number", "x-1a", "-3", "bad name-0", "x-٣"]
    for name in junk:
        (b.logdir / name).mkdir()
        (b.logdir / name / "00000000000000000000.log").write_bytes(b"")
    b.start()
    with wire.Conn(b.bootstrap) as c:
        assert _metadata_v4(c, ["kept"], allow_auto=False) == [(wire.NONE, "kept")]
    log = b.log_text()
    for name in junk:
        assert repr(name) in log or name in log, f"{name!r} not named in the broker's log"
    # the junk is left where it is (an operator's files are never deleted) and not served as topics
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
    assert set(md.topics) & {"evil\n", "no_partition_number", "x", "", "bad name"} == set()
