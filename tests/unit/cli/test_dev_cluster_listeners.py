"""``odradek dev-cluster --internal-base-port``: separate EXTERNAL (clients) and INTERNAL (brokers) listeners."""

from __future__ import annotations

from pathlib import Path

from odradek.cli.dev_cluster_cmd import broker_overrides
from odradek.config import BrokerConfig
from odradek.server.cluster_access import cluster_listeners


def test_one_listener_by_default() -> None:
    ov = broker_overrides(1, 19092, Path("/d"), "zk:2181/x", 3, {})
    assert ov["listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert "inter.broker.listener.name" not in ov
    assert cluster_listeners(BrokerConfig(ov)) == {"PLAINTEXT"}


def test_internal_listener_is_the_inter_broker_one() -> None:
    ov = broker_overrides(2, 19093, Path("/d"), "zk:2181/x", 3, {}, internal_port=29093)
    assert ov["listeners"] == "EXTERNAL://127.0.0.1:19093,INTERNAL://127.0.0.1:29093"
    assert ov["inter.broker.listener.name"] == "INTERNAL"
    assert ov["listener.security.protocol.map"] == "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT"
    assert cluster_listeners(BrokerConfig(ov)) == {"INTERNAL"}
