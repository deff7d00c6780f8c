"""KIP-584 and client quotas in cluster mode: the controller creates Kafka's /feature znode, UpdateFeatures is
answered by the controller only (NOT_CONTROLLER elsewhere), every broker's ApiVersions follows
the znode, a broker that cannot support the finalized levels refuses to start, and quotas altered on
one broker are applied by the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.broker import Broker, BrokerError
from kafka.admin import KafkaAdminClient
from waiting import wait_until

from odradek.client.wire import WireClient

from .cluster import FAST, Cluster
from .zk import Ensemble

NOT_CONTROLLER = 41


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 2).start()
    yield c
    c.stop()


def finalized(b: Broker) -> tuple[dict[str, int], int]:
    with WireClient(b.bootstrap, timeout=15) as w:
        r = w.request(18, 3, client_software_name="t", client_software_version="1")
    return {f.name: int(f.max_version_level) for f in r.finalized_features}, int(r.finalized_features_epoch)


def update_at(b: Broker, level: int) -> int:
    from kio.schema.update_features.v1.request import FeatureUpdateKey
    from kio.static.primitive import i8, i16

    with WireClient(b.bootstrap, timeout=15) as w:
        r = w.request(57, 1, feature_updates=(FeatureUpdateKey(feature="group.version", max_version_level=i16(level),
                                                                upgrade_type=i8(2)),), validate_only=False)
    assert [int(x.error_code) for x in r.results] == [int(r.error_code)]
    return int(r.error_code)


def test_feature_znode_update_and_broker_caches(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    wait_until(lambda: c.zk_json("/feature") is not None, 30, "/feature created by the controller")
    assert c.zk_json("/feature") == {"version": 1, "status": 1, "features": {
        "group.version": {"min_version_level": 1, "max_version_level": 1},
        "share.version": {"min_version_level": 1, "max_version_level": 1},
        "transaction.version": {"min_version_level": 1, "max_version_level": 1}}}
    for b in c.brokers.values():
        wait_until(lambda b=b: finalized(b) == ({"group.version": 1, "share.version": 1, "transaction.version": 1}, 0),
                   20, "epoch 0")
    controller = c.controller()
    assert controller is not None
    other = next(i for i in c.brokers if i != controller)
    assert update_at(c.brokers[other], 0) == NOT_CONTROLLER
    a = KafkaAdminClient(bootstrap_servers=c.brokers[other].bootstrap, request_timeout_ms=15000)
    try:
        assert a.update_features({"group.version": ("SAFE_DOWNGRADE", 0)}) == {"group.version": "OK"}
    finally:
        a.close()
    assert c.zk_json("/feature")["features"] == {
        "share.version": {"min_version_level": 1, "max_version_level": 1},
        "transaction.version": {"min_version_level": 1, "max_version_level": 1}}
    for b in c.brokers.values():
        wait_until(lambda b=b: finalized(b) == ({"share.version": 1, "transaction.version": 1}, 1), 20,
                   "the update on every broker",
                   detail=lambda b=b: finalized(b))
    # a level this broker cannot serve is finalized (by a newer controller, say): a new broker refuses to start
    c.zkc.set("/feature", json.dumps({"version": 1, "status": 1, "features": {
        "group.version": {"min_version_level": 1, "max_version_level": 7}}}).encode())
    late = Broker(tmp_path / "b9", {**FAST, "broker.id": "9", "zookeeper.connect": c.connect}, name="broker9")
    with pytest.raises(BrokerError, match="exited"):
        late.start(timeout=60)
    assert "group.version=7 is finalized but this broker supports 0-1" in late.log_text()


def test_client_quotas_reach_every_broker(cluster: Cluster) -> None:
    """AlterClientQuotas on one broker writes Kafka's /config/clients znode and a /config/changes
    notice; the other broker applies it (its DescribeClientQuotas answers from what it applied)."""
    from kio.schema.alter_client_quotas.v1 import request as a
    from kio.schema.describe_client_quotas.v1 import request as d
    from kio.static.primitive import f64, i8

    c = cluster
    first, second = (c.brokers[i] for i in sorted(c.brokers))
    with WireClient(first.bootstrap, timeout=15) as w:
        r = w.request(49, 1, validate_only=False, entries=(a.EntryData(
            entity=(a.EntityData(entity_type="client-id", entity_name="etl/1"),),
            ops=(a.OpData(key="producer_byte_rate", value=f64(4096.0), remove=False),)),))
    assert int(r.entries[0].error_code) == 0
    assert c.zk_json("/config/clients/etl%2F1") == {"version": 1, "config": {"producer_byte_rate": "4096"}}
    notices = c.zk_children("/config/changes")
    assert any(c.zk_json(f"/config/changes/{n}") == {"version": 2, "entity_path": "clients/etl%2F1"} for n in notices)

    def seen_by_second() -> list[tuple[str | None, float]]:
        with WireClient(second.bootstrap, timeout=15) as w2:
            r2 = w2.request(48, 1, strict=True, components=(
                d.ComponentData(entity_type="client-id", match_type=i8(0), match="etl/1"),))
        return [(e.entity[0].entity_name, float(e.values[0].value)) for e in r2.entries or ()]

    wait_until(lambda: seen_by_second() == [("etl/1", 4096.0)], 20, "the quota on the second broker",
               detail=seen_by_second)
