"""``/metrics`` on http.listeners, scraped from a real broker process after a known workload driven
by real clients (confluent-kafka): every metric docs/metrics.md lists is checked against what the
workload did. Hostile HTTP input leaves the broker serving both listeners."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .broker import Broker, BrokerFactory
from .clients import assert_served, create_topic, unique
from .test_client_quotas import alter

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(b: Broker) -> Samples:
    with urllib.request.urlopen(f"http://{b.host}:{b.http_port}/metrics", timeout=15) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=")
        text = r.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: Samples, name: str, **labels: str) -> float:
    return m[(name, tuple(sorted(labels.items())))]


def total(m: Samples, name: str, **labels: str) -> float:
    """Sum over the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in m.items() if n == name and want <= set(lab))


def _produce(b: Broker, topic: str, n: int, size: int, client_id: str = "metrics-test", key: bytes | None = b"k",
             partitions: int = 3) -> list[str]:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": client_id, "linger.ms": 5, "acks": "all",
                  "retries": 0, "enable.idempotence": False})
    for i in range(n):
        p.produce(topic, value=b"v" * size, key=key, partition=i % partitions,
                  on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        p.poll(0)
    assert p.flush(30) == 0
    return errors


def _consume_and_commit(b: Broker, topic: str, group: str, n: int) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    c.commit(asynchronous=False)
    c.close()
    return got


def test_scrape_after_a_known_workload(broker: Broker) -> None:
    b = broker
    topic = unique("metrics")
    n, size = 300, 1000
    create_topic(b.bootstrap, topic, 3)
    before = scrape(b)
    assert value(before, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert _produce(b, topic, n, size) == []
    group = unique("g")
    assert _consume_and_commit(b, topic, group, n) == n
    extra = 30  # produced after the commit: the group's lag
    assert _produce(b, topic, extra, size) == []
    m = scrape(b)

    # BrokerTopicMetrics: per topic and all topics
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n + extra
    log_bytes = total(m, "kafka_log_log_size", topic=topic)
    assert log_bytes > (n + extra) * size
    assert value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == log_bytes
    assert value(m, "kafka_server_brokertopicmetrics_bytesin_total") >= log_bytes
    bytes_out = value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    assert n * size < bytes_out <= log_bytes
    produces = value(m, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic)
    assert 3 <= produces <= n + extra
    assert value(m, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    assert value(m, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) >= 3
    assert value(m, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic=topic) == 0
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total") >= n + extra

    # RequestMetrics: counts per request and version, and each phase's count and percentiles
    produce_requests = total(m, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce_requests >= produces / 3
    assert total(m, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") >= 1
    assert total(m, "kafka_network_requestmetrics_requests_total", request="OffsetCommit") >= 1
    assert total(m, "kafka_network_requestmetrics_requests_total", request="JoinGroup") >= 1
    assert total(m, "kafka_network_requestmetrics_requests_total", request="Metadata") >= 1
    for phase in ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems",
                  "totaltimems"):
        name = f"kafka_network_requestmetrics_{phase}"
        assert value(m, name + "_count", request="Produce") == produce_requests, phase
        quantiles = [value(m, name, request="Produce", quantile=q)
                     for q in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")]
        assert quantiles == sorted(quantiles), (phase, quantiles)
    p99_total = value(m, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
    p99_local = value(m, "kafka_network_requestmetrics_localtimems", request="Produce", quantile="0.99")
    assert 0 < p99_local <= p99_total * 1.25 + 0.01  # buckets are 25 % wide
    assert p99_total < 10_000

    # ReplicaManager (one broker: leads all it hosts, nothing under-replicated)
    hosted = value(m, "kafka_server_replicamanager_partitioncount")
    assert hosted >= 3
    assert value(m, "kafka_server_replicamanager_leadercount") == hosted
    assert value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(m, "kafka_server_replicamanager_offlinereplicacount") == 0
    assert value(m, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert value(m, "kafka_server_replicamanager_isrexpands_total") == 0
    # KafkaController
    assert value(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(m, "kafka_controller_kafkacontroller_globaltopiccount") >= 2  # the topic, __consumer_offsets
    assert value(m, "kafka_controller_kafkacontroller_globalpartitioncount") >= 4
    # Log
    assert total(m, "kafka_log_log_logendoffset", topic=topic) == n + extra
    assert total(m, "kafka_log_log_logstartoffset", topic=topic) == 0
    assert total(m, "kafka_log_log_numlogsegments", topic=topic) == 3
    # consumer group: committed n, then `extra` more were produced
    assert total(m, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic) == n
    assert total(m, "kafka_consumergroup_lag", consumergroup=group, topic=topic) == extra
    # SocketServer
    assert value(m, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                 networkProcessor="0") >= 0
    idle = value(m, "kafka_network_socketserver_networkprocessoravgidle_percent")
    assert 0.0 <= idle <= 1.0


def test_failed_produce_and_throttle_time(broker: Broker) -> None:
    b = broker
    compacted = unique("compacted")
    create_topic(b.bootstrap, compacted, 1, {"cleanup.policy": "compact"})
    # a compacted topic refuses records without a key (INVALID_RECORD): a failed produce request
    errors = _produce(b, compacted, 1, 10, key=None, partitions=1)
    assert len(errors) == 1, errors
    m = scrape(b)
    assert value(m, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=compacted) == 1
    assert value(m, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=compacted) == 1
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=compacted) == 0

    # a client held to 100 KB/s that sends 1 MB is throttled: its average throttle time shows
    topic = unique("throttled")
    create_topic(b.bootstrap, topic, 1)
    assert alter(b, [([("client-id", "slow-metrics")], [("producer_byte_rate", 100_000.0, False)])]) == [(0, None)]
    assert _produce(b, topic, 100, 10_000, client_id="slow-metrics", partitions=1) == []
    m = scrape(b)
    throttle = value(m, "kafka_server_quota_throttle_time", resource="Produce", user="", clientId="slow-metrics")
    assert throttle > 0
    assert ("kafka_server_quota_throttle_time",
            (("clientId", "metrics-test"), ("resource", "Produce"), ("user", ""))) not in m  # no quota: no sensor


def test_errors_per_sec_counts_the_error_codes_of_responses(broker: Broker) -> None:
    """kafka_network_requestmetrics_errors_total (Kafka's ErrorsPerSec): each error code a response carries,
    NONE included, per request; a Fetch is one request whoever sends it."""
    from confluent_kafka.admin import AdminClient

    b = broker
    name = "kafka_network_requestmetrics_errors_total"
    before = scrape(b)

    def delta(m: Samples, request: str, error: str) -> float:
        key = (name, (("error", error), ("request", request)))
        return m.get(key, 0.0) - before.get(key, 0.0)

    topic = unique("errors")
    create_topic(b.bootstrap, topic, 2)
    assert _produce(b, topic, 20, 100, partitions=2) == []
    assert _consume_and_commit(b, topic, unique("g"), 20) == 20
    compacted = unique("errors-compacted")
    create_topic(b.bootstrap, compacted, 1, {"cleanup.policy": "compact"})
    assert len(_produce(b, compacted, 1, 10, key=None, partitions=1)) == 1  # INVALID_RECORD
    # a topic the Metadata request may not create: UNKNOWN_TOPIC_OR_PARTITION whatever the timing (with
    # auto-creation librdkafka sends two requests, one of which waits for the new topic's leader and
    # answers without error: which of them list_topics returns depends on their order)
    missing = unique("missing")
    md = AdminClient({"bootstrap.servers": b.bootstrap, "allow.auto.create.topics": False}).list_topics(
        missing, timeout=10)
    seen = md.topics[missing].error
    assert seen is not None and seen.code() == 3  # librdkafka's UNKNOWN_TOPIC_OR_PART
    m = scrape(b)
    assert delta(m, "Produce", "NONE") >= 2  # one per partition in each answered request
    assert delta(m, "Produce", "INVALID_RECORD") == 1
    assert delta(m, "Fetch", "NONE") > 0
    assert delta(m, "Metadata", "UNKNOWN_TOPIC_OR_PARTITION") >= 1  # the code the client saw, under Kafka's name
    assert delta(m, "CreateTopics", "NONE") >= 2
    assert delta(m, "OffsetCommit", "NONE") >= 2  # the consumer's commit: one per partition
    assert not any(n == name and dict(lab)["request"] in ("FetchConsumer", "FetchFollower") for n, lab in m)


def _raw(b: Broker, data: bytes, read: bool = True) -> bytes:
    with socket.create_connection((b.host, b.http_port), timeout=15) as s:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_hostile_http_input(make_broker: BrokerFactory) -> None:
    b = make_broker()
    # headers past 8 KiB: 431 without reading them all
    assert _raw(b, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431")
    # garbage request line, bad version, bad header line, oversized and chunked bodies
    assert _raw(b, b"\x00\x01\x02garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _raw(b, b"GET /metrics HTTP/9.9\r\n\r\n").startswith(b"HTTP/1.1 505")
    assert _raw(b, b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _raw(b, b"POST /metrics HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n").startswith(b"HTTP/1.1 4")
    assert _raw(b, b"POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").startswith(b"HTTP/1.1 411")
    own = b"Host: 127.0.0.1\r\n"
    assert _raw(b, b"GET /nothing HTTP/1.1\r\n" + own + b"Connection: close\r\n\r\n").startswith(b"HTTP/1.1 404")
    assert _raw(b, b"DELETE /metrics HTTP/1.1\r\n" + own + b"Connection: close\r\n\r\n").startswith(
        b"HTTP/1.1 405")
    assert _raw(b, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 400")  # no Host
    # many idle connections and half-sent requests (slowloris): refused past the limit, never blocking
    held = []
    for _ in range(100):
        s = socket.create_connection((b.host, b.http_port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        held.append(s)
    try:
        assert_served(b.bootstrap)  # the Kafka listener is unaffected
    finally:
        for s in held:
            s.close()
    # the held connections' slots are freed as the broker sees them close
    deadline = time.monotonic() + 10
    while True:
        try:
            scrape(b)
            break
        except (urllib.error.URLError, ConnectionError):
            assert time.monotonic() < deadline, "/metrics not served again after the connections closed"
            time.sleep(0.2)
    # keep-alive: two requests on one connection; then the endpoint and the broker still serve
    with socket.create_connection((b.host, b.http_port), timeout=15) as s:
        for _ in range(2):
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(1)
                assert chunk, f"connection closed after {head!r}"
                head += chunk
            assert head.startswith(b"HTTP/1.1 200"), head
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            body = b""
            while len(body) < length:
                chunk = s.recv(length - len(body))
                assert chunk
                body += chunk
            assert b"kafka_server_replicamanager_partitioncount" in body
    assert scrape(b)
    assert_served(b.bootstrap)
    assert b.running


def test_http_listeners_empty_disables_the_endpoint(make_broker: BrokerFactory) -> None:
    b = make_broker(http_listeners="")
    assert_served(b.bootstrap)
    try:
        urllib.request.urlopen(f"http://{b.host}:{b.http_port}/metrics", timeout=5)
        raise AssertionError("nothing should listen on the http port")
    except urllib.error.URLError:
        pass
