"""The web console of a broker in a three-broker ZooKeeper cluster: the brokers page lists every
registered broker and the controller elected in ZooKeeper, a topic created from a non-controller
broker's console gets replicas on several brokers, a config changed there reaches the store, and the
topic page shows the leaders and ISRs the controller wrote (each checked against ZooKeeper and the
admin client)."""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from waiting import wait_until

from .cluster import Cluster
from .zk import Ensemble


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return str(r.read().decode())


def rows(page: str, table: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body is not None, page
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
            for r in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)]


def test_console_on_a_cluster(cluster: Cluster) -> None:
    controller = cluster.controller()
    assert controller is not None
    other = next(b for i, b in cluster.brokers.items() if i != controller)
    base = f"http://{other.host}:{other.http_port}"
    wait_until(lambda: len(rows(get(base + "/"), "brokers")) == 3, 30, "every broker on the brokers page")
    page = get(base + "/")
    assert re.search(r'id="controller">(\d+)<', page).group(1) == str(controller)  # type: ignore[union-attr]
    assert [(r[0], r[4]) for r in rows(page, "brokers")] == [
        (str(i), "controller" if i == controller else "") for i in sorted(cluster.brokers)]

    same_origin = {"Origin": base}  # a form of the console's own page (a cross-site one is refused)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', get(base + "/topics")).group(1)  # type: ignore[union-attr]
    form = urllib.parse.urlencode({"name": "console-cl", "partitions": "3", "replication_factor": "2",
                                   "configs": "min.insync.replicas=2", "csrf": token}).encode()
    post = urllib.request.Request(base + "/actions/create-topic", form, same_origin)
    with urllib.request.urlopen(post, timeout=60) as r:
        assert "Created topic console-cl." in r.read().decode()
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=15)
    parts = md.topics["console-cl"].partitions
    assert len(parts) == 3 and all(len(p.replicas) == 2 for p in parts.values())
    assert len({r for p in parts.values() for r in p.replicas}) == 3  # spread over the brokers

    form = urllib.parse.urlencode({"topic": "console-cl", "config": "retention.ms", "value": "4242",
                                   "csrf": token}).encode()
    post = urllib.request.Request(base + "/actions/alter-config", form, same_origin)
    with urllib.request.urlopen(post, timeout=60) as r:
        assert "Set retention.ms=4242 on topic console-cl." in r.read().decode()
    assert cluster.zk_json("/config/topics/console-cl")["config"]["retention.ms"] == "4242"
    res = ConfigResource(ConfigResource.Type.TOPIC, "console-cl")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_until(lambda: admin.describe_configs([res])[res].result(15)["retention.ms"].value == "4242", 30,
               "the config on every broker")

    def partitions_match() -> bool:
        shown = {int(r[0]): (int(r[1]), r[2], r[3]) for r in rows(get(base + "/topic?name=console-cl"), "partitions")}
        want = {}
        for p in range(3):
            st = cluster.state("console-cl", p)
            want[p] = (st["leader"], ",".join(str(x) for x in parts[p].replicas), ",".join(str(x) for x in st["isr"]))
        return shown == want

    wait_until(partitions_match, 30, "the topic page shows the leaders and ISRs in ZooKeeper")
