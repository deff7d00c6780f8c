"""TLS listeners with real clients: mutual TLS (SSL listener, ssl.client.auth=required) and
SASL_SSL with PLAIN, next to a PLAINTEXT listener on the same broker. Each refusal (untrusted
certificate, no certificate, plaintext to the TLS port, TLS garbage, a half-finished handshake,
a wrong password) happens while another client is being served."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .broker import HOST
from .clients import create_topic, unique
from .security import ALICE_PASSWORD, SecureBroker, confluent_sasl, confluent_ssl, make_certs, secure_broker

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("tls")
    certs = make_certs(base / "certs")
    s = secure_broker(base / "broker", certs)
    yield s
    s.broker.stop()


def _produce_consume(conf: dict[str, object], topic: str, n: int = 200, size: int = 1000) -> list[bytes]:
    p = Producer({**conf, "linger.ms": 5})
    values = [f"{i:06d}".encode() + b"x" * size for i in range(n)]
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": unique("g"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == values
    return got


def assert_auth_refused(conf: dict[str, object], message: str) -> None:
    """The client's error callback reports the broker's authentication error (SaslAuthenticate's message)."""
    errors: list[str] = []
    p = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    deadline = time.monotonic() + 15
    while not any(message in e for e in errors) and time.monotonic() < deadline:
        p.poll(0.2)
    assert any(message in e for e in errors), errors


def _api_versions_frame() -> bytes:
    client = b"probe"
    payload = struct.pack(">hhih", 18, 0, 7, len(client)) + client
    return struct.pack(">i", len(payload)) + payload


def _closed_by_peer(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.timeout(90)
def test_mtls_confluent_produce_consume_and_advertised_listener(sb: SecureBroker) -> None:
    topic = unique("tls")
    create_topic(sb.plaintext, topic, 1)
    conf = confluent_ssl(sb)
    md = AdminClient(conf).list_topics(timeout=15)
    # Metadata answers with the endpoint of the listener the client came in on
    assert [(b.host, b.port) for b in md.brokers.values()] == [(HOST, sb.ssl_port)]
    md_plain = AdminClient({"bootstrap.servers": sb.plaintext}).list_topics(timeout=15)
    assert [b.port for b in md_plain.brokers.values()] == [sb.broker.port]
    # 200 KB: the fetch's file regions go through TLS (no sendfile)
    _produce_consume(conf, topic)


@pytest.mark.timeout(90)
def test_mtls_kafka_python_and_aiokafka(sb: SecureBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer

    topic = unique("tls-py")
    create_topic(sb.plaintext, topic, 1)
    ssl_kw = {"security_protocol": "SSL", "ssl_cafile": str(sb.certs.ca), "ssl_certfile": str(sb.certs.client_cert),
              "ssl_keyfile": str(sb.certs.client_key), "ssl_check_hostname": False}
    p = KafkaProducer(bootstrap_servers=sb.ssl, **ssl_kw)
    for i in range(50):
        p.send(topic, f"kp-{i}".encode(), partition=0)
    p.flush(30)
    p.close()

    async def with_aiokafka() -> list[bytes]:
        ctx = create_ssl_context(cafile=str(sb.certs.ca), certfile=str(sb.certs.client_cert),
                                 keyfile=str(sb.certs.client_key))
        ctx.check_hostname = False
        prod = AIOKafkaProducer(bootstrap_servers=sb.ssl, security_protocol="SSL", ssl_context=ctx)
        await prod.start()
        try:
            for i in range(50):
                await prod.send_and_wait(topic, f"aio-{i}".encode(), partition=0)
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(topic, bootstrap_servers=sb.ssl, security_protocol="SSL", ssl_context=ctx,
                                auto_offset_reset="earliest", enable_auto_commit=False)
        await cons.start()
        got: list[bytes] = []
        try:
            while len(got) < 100:
                batch = await asyncio.wait_for(cons.getmany(timeout_ms=1000), 30)
                for msgs in batch.values():
                    got.extend(m.value for m in msgs)
        finally:
            await cons.stop()
        return got

    got_aio = asyncio.run(with_aiokafka())
    c = KafkaConsumer(topic, bootstrap_servers=sb.ssl, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=10000, **ssl_kw)
    got_kp = [m.value for m in c]
    c.close()
    expected = [f"kp-{i}".encode() for i in range(50)] + [f"aio-{i}".encode() for i in range(50)]
    assert got_aio == expected
    assert got_kp == expected


@pytest.mark.timeout(90)
@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_over_mtls_and_sasl_ssl_plain(sb: SecureBroker) -> None:
    assert KCAT is not None
    topic = unique("tls-kcat")
    create_topic(sb.plaintext, topic, 1)
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={sb.certs.ca}",
           "-X", f"ssl.certificate.location={sb.certs.client_cert}", "-X", f"ssl.key.location={sb.certs.client_key}"]
    lines = [f"line-{i}" for i in range(100)]
    subprocess.run([KCAT, "-b", sb.ssl, *tls, "-P", "-t", topic, "-p", "0"], input="\n".join(lines).encode() + b"\n",
                   check=True, timeout=30)
    sasl = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={sb.certs.ca}", "-X", "sasl.mechanisms=PLAIN",
            "-X", "sasl.username=alice", "-X", f"sasl.password={ALICE_PASSWORD}"]
    out = subprocess.run([KCAT, "-b", sb.sasl_ssl, *sasl, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().splitlines() == lines


@pytest.mark.timeout(90)
def test_sasl_ssl_plain_and_wrong_password(sb: SecureBroker) -> None:
    topic = unique("sasl-plain")
    create_topic(sb.plaintext, topic, 1)
    _produce_consume(confluent_sasl(sb, "PLAIN", "alice", ALICE_PASSWORD), topic, n=20)
    assert_auth_refused(confluent_sasl(sb, "PLAIN", "alice", "wrong"), "Invalid username or password")
    assert_auth_refused(confluent_sasl(sb, "PLAIN", "nobody", ALICE_PASSWORD), "Invalid username or password")
    sb.broker.assert_alive()


@pytest.mark.timeout(90)
def test_untrusted_and_missing_client_certificates_refused(sb: SecureBroker, tmp_path: Path) -> None:
    good = AdminClient(confluent_ssl(sb))
    rogue = AdminClient(confluent_ssl(sb, cert=sb.certs.rogue_cert, key=sb.certs.rogue_key))
    with pytest.raises(KafkaException):
        rogue.list_topics(timeout=5)
    expired = AdminClient(confluent_ssl(sb, cert=sb.certs.expired_cert, key=sb.certs.expired_key))
    with pytest.raises(KafkaException):
        expired.list_topics(timeout=5)
    assert "certificate has expired" in sb.broker.log_text()
    # no certificate at all on the mutual-TLS listener
    ctx = ssl.create_default_context(cafile=str(sb.certs.ca))
    with (socket.create_connection((HOST, sb.ssl_port), timeout=5) as raw,
          pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)),
          ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s):
        s.sendall(_api_versions_frame())
        if not s.recv(4):  # TLS 1.3: the refusal arrives after the client's Finished
            raise ConnectionResetError("closed")
    assert good.list_topics(timeout=10).brokers


@pytest.mark.timeout(60)
def test_plaintext_and_garbage_to_tls_port_closed(sb: SecureBroker) -> None:
    for junk in (_api_versions_frame(), b"\x16\x03\x01\x00\x05hello" + b"\x00" * 100, b"GET / HTTP/1.0\r\n\r\n"):
        with socket.create_connection((HOST, sb.ssl_port), timeout=5) as s:
            s.sendall(junk)
            assert _closed_by_peer(s, 5.0), junk
    assert AdminClient(confluent_ssl(sb)).list_topics(timeout=10).brokers


@pytest.mark.timeout(60)
def test_half_finished_handshake_does_not_block_others_and_times_out(sb: SecureBroker) -> None:
    idle = [socket.create_connection((HOST, port), timeout=5) for port in (sb.ssl_port, sb.sasl_ssl_port)]
    hello = socket.create_connection((HOST, sb.ssl_port), timeout=5)
    hello.sendall(b"\x16\x03\x01\x02\x00\x01")  # the first bytes of a ClientHello, never finished
    try:
        t0 = time.monotonic()
        # others are served meanwhile, on both TLS listeners
        assert AdminClient(confluent_ssl(sb)).list_topics(timeout=10).brokers
        assert AdminClient(confluent_sasl(sb, "PLAIN", "alice", ALICE_PASSWORD)).list_topics(timeout=10).brokers
        # odradek.authentication.timeout.ms=1500 closes all three
        for s in (*idle, hello):
            assert _closed_by_peer(s, 10.0)
        assert time.monotonic() - t0 < 10
    finally:
        for s in (*idle, hello):
            s.close()


def _sasl_plain_raw(s: socket.socket, user: bytes, password: bytes) -> int:
    """SaslHandshake v1 + SaslAuthenticate v1 (PLAIN) on ``s``; the session lifetime in ms."""
    def roundtrip(api_key: int, version: int, corr: int, body: bytes) -> bytes:
        client = b"raw"
        payload = struct.pack(">hhih", api_key, version, corr, len(client)) + client + body
        s.sendall(struct.pack(">i", len(payload)) + payload)
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                raise ConnectionResetError("closed")
            head += chunk
        (size,) = struct.unpack(">i", head)
        buf = b""
        while len(buf) < size:
            chunk = s.recv(size - len(buf))
            if not chunk:
                raise ConnectionResetError("closed")
            buf += chunk
        return buf[4:]

    assert struct.unpack_from(">h", roundtrip(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))[0] == 0
    token = b"\x00" + user + b"\x00" + password
    resp = roundtrip(36, 1, 2, struct.pack(">i", len(token)) + token)
    code, mlen = struct.unpack_from(">hh", resp)
    assert code == 0, resp
    pos = 4 + max(mlen, 0)
    (blen,) = struct.unpack_from(">i", resp, pos)
    (lifetime,) = struct.unpack_from(">q", resp, pos + 4 + blen)
    return int(lifetime)


@pytest.mark.timeout(120)
def test_reauthentication_kip368(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    s = secure_broker(tmp_path / "broker", certs, {"listener.name.sasl_ssl.connections.max.reauth.ms": "1500"})
    try:
        topic = unique("reauth")
        create_topic(s.plaintext, topic, 1)
        # librdkafka re-authenticates within the session lifetime: 6 s of produce on one connection
        delivered: list[object] = []
        p = Producer({**confluent_sasl(s, "PLAIN", "alice", ALICE_PASSWORD), "linger.ms": 0})
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            p.produce(topic, b"v", partition=0, on_delivery=lambda err, _m: delivered.append(err))
            p.poll(0.3)
        assert p.flush(20) == 0
        assert delivered and all(e is None for e in delivered), delivered
        assert "SASL session expired" not in s.broker.log_text()
        # a client that does not re-authenticate is disconnected at its first request after expiry
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        with ctx.wrap_socket(socket.create_connection((HOST, s.sasl_ssl_port), timeout=5),
                             server_hostname="127.0.0.1") as conn:
            assert _sasl_plain_raw(conn, b"alice", ALICE_PASSWORD.encode()) == 1500
            conn.sendall(_api_versions_frame())
            assert conn.recv(4)  # within the session: answered
            conn.recv(65536)
            time.sleep(1.8)
            conn.sendall(_api_versions_frame())
            assert _closed_by_peer(conn, 5.0)
        assert "SASL session expired" in s.broker.log_text()
    finally:
        s.broker.stop()


@pytest.mark.timeout(60)
def test_large_request_before_sasl_authentication_refused(sb: SecureBroker) -> None:
    """sasl.server.max.receive.size (512 KiB): an unauthenticated client cannot make the broker read 1 MB."""
    ctx = ssl.create_default_context(cafile=str(sb.certs.ca))
    with ctx.wrap_socket(socket.create_connection((HOST, sb.sasl_ssl_port), timeout=5),
                         server_hostname="127.0.0.1") as s:
        s.sendall(struct.pack(">i", 1 << 20) + b"\x00" * 64)
        assert _closed_by_peer(s, 5.0)
    assert "outside [0, 524288]" in sb.broker.log_text()
    # an authenticated client's large produce is read as usual
    topic = unique("sasl-big")
    create_topic(sb.plaintext, topic, 1)
    p = Producer({**confluent_sasl(sb, "PLAIN", "alice", ALICE_PASSWORD), "linger.ms": 50})
    for _ in range(4):
        p.produce(topic, b"x" * (400 * 1024), partition=0)
    assert p.flush(30) == 0
