"""Attacks on the TLS listeners (issue 33): renegotiation, client certificate chains that do not
verify, handshakes that never finish, and an expired server certificate at start-up.

A real broker process with PLAINTEXT, SSL (mutual TLS, ssl.client.auth=required) and SASL_SSL
listeners (integration.security, odradek.authentication.timeout.ms=1500); each refusal happens
while a good client is served.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import selectors
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka.admin import AdminClient
from integration.broker import HOST, free_port
from integration.security import SecureBroker, confluent_ssl, make_certs, secure_broker

OPENSSL = shutil.which("openssl")


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("tls-attacks")
    s = secure_broker(base / "broker", make_certs(base / "certs"))
    yield s
    s.broker.stop()


def served(sb: SecureBroker) -> bool:
    return bool(AdminClient(confluent_ssl(sb)).list_topics(timeout=15).brokers)


@pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command line tool")
@pytest.mark.timeout(90)
def test_client_initiated_renegotiation_is_refused(sb: SecureBroker) -> None:
    """openssl s_client over TLS 1.2 asks to renegotiate ("R"): the broker refuses (OpenSSL's
    no_renegotiation), the connection is closed with a log line, and others are served. A regression
    test: OpenSSL 3 refuses client renegotiation by default and odradek never allows it."""
    assert OPENSSL is not None
    before = sb.broker.log_text().count("TLS failure")
    p = subprocess.Popen(
        [OPENSSL, "s_client", "-connect", sb.ssl, "-tls1_2", "-cert", str(sb.certs.client_cert),
         "-key", str(sb.certs.client_key), "-CAfile", str(sb.certs.ca)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    assert p.stdin is not None and p.stdout is not None
    try:
        out = b""
        deadline = time.monotonic() + 30
        os.set_blocking(p.stdout.fileno(), False)
        while b"Verify return code: 0" not in out or b"\n---\n" not in out.split(b"Verify return code")[-1]:
            assert time.monotonic() < deadline, out[-2000:]
            chunk = p.stdout.read()
            if chunk:
                out += chunk
            elif p.poll() is not None:
                raise AssertionError(f"s_client ended before the handshake: {out[-2000:]!r}")
            time.sleep(0.1)
        p.stdin.write(b"R\n")
        p.stdin.flush()
        p.wait(timeout=20)
        os.set_blocking(p.stdout.fileno(), True)
        out += p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    text = out.decode(errors="replace")
    assert "RENEGOTIATING" in text and "no renegotiation" in text, text[-1500:]
    deadline = time.monotonic() + 10
    while sb.broker.log_text().count("TLS failure") == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sb.broker.log_text().count("TLS failure") > before
    assert served(sb)
    sb.broker.assert_alive()


@pytest.mark.timeout(90)
def test_client_chain_that_does_not_verify_is_refused(sb: SecureBroker, tmp_path: Path) -> None:
    """A client certificate issued by an intermediate CA under a root the broker trusts (added to
    its truststore file, which the broker reloads): with the intermediate in the chain it verifies
    and is served; the leaf alone, or the same names under an untrusted root's intermediate, does
    not verify and the handshake is refused. A regression test."""
    root = trustme.CA(organization_name="Odradek Second CA")
    inter = root.create_child_ca()
    leaf = inter.issue_cert("alice@example.com", common_name="alice")
    full, only_leaf, key = tmp_path / "full.pem", tmp_path / "leaf.pem", tmp_path / "leaf.key"
    full.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems[:2]))
    only_leaf.write_bytes(leaf.cert_chain_pems[0].bytes())
    leaf.private_key_pem.write_to_path(str(key))
    rogue_leaf = trustme.CA(organization_name="Odradek Second CA").create_child_ca().issue_cert(
        "alice@example.com", common_name="alice")
    rogue_full, rogue_key = tmp_path / "rogue-full.pem", tmp_path / "rogue.key"
    rogue_full.write_bytes(b"".join(b.bytes() for b in rogue_leaf.cert_chain_pems))
    rogue_leaf.private_key_pem.write_to_path(str(rogue_key))

    def handshake(cert: Path, k: Path) -> bool:
        ctx = ssl.create_default_context(cafile=str(sb.certs.ca))
        ctx.load_cert_chain(str(cert), str(k))
        try:
            with socket.create_connection((HOST, sb.ssl_port), timeout=10) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"\x00\x00\x00\x0f\x00\x12\x00\x00\x00\x00\x00\x07\x00\x05probe")  # ApiVersions v0
                return len(s.recv(4)) == 4  # TLS 1.3: a refusal arrives after the client's Finished
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return False

    assert not handshake(full, key), "a chain to a root the broker does not trust yet was accepted"
    with open(sb.certs.ca, "ab") as f:  # the broker reloads its truststore when the file changes
        f.write(root.cert_pem.bytes())
    deadline = time.monotonic() + 15
    while not handshake(full, key):
        assert time.monotonic() < deadline, "the full chain to the trusted root was refused"
        time.sleep(0.5)
    assert not handshake(only_leaf, key), "a leaf without its intermediate was accepted"
    assert not handshake(rogue_full, rogue_key), "a chain to an untrusted root was accepted"
    assert "unable to get local issuer certificate" in sb.broker.log_text()
    assert served(sb)


@pytest.mark.timeout(120)
def test_many_handshakes_that_never_finish_are_closed_and_starve_no_one(sb: SecureBroker) -> None:
    """300 connections to the TLS listeners: a third send nothing, a third the first bytes of a
    ClientHello, a third trickle a ClientHello a byte at a time. A good client is served meanwhile,
    and every one of them is closed within the handshake timeout (1.5 s) plus slack. A regression
    test: odradek.authentication.timeout.ms bounded handshakes already."""
    hello = _client_hello()
    socks: list[socket.socket] = []
    sel = selectors.DefaultSelector()
    try:
        t0 = time.monotonic()
        for i in range(300):
            port = sb.ssl_port if i % 2 == 0 else sb.sasl_ssl_port
            s = socket.create_connection((HOST, port), timeout=5)
            if i % 3 == 1:
                s.sendall(hello[:40])
            elif i % 3 == 2:
                s.sendall(hello[:1])
            socks.append(s)
        assert served(sb), "a good client was starved"
        open_ = {s.fileno(): s for s in socks}
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        sent = 1
        deadline = time.monotonic() + 20
        while open_ and time.monotonic() < deadline:
            for key, _ in sel.select(0.25):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if not data:
                    sel.unregister(s)
                    open_.pop(s.fileno(), None)
            if sent < len(hello):  # the trickle: one more byte every quarter second
                for i, s in enumerate(socks):
                    if i % 3 == 2 and s.fileno() in open_:
                        with contextlib.suppress(OSError):
                            s.send(hello[sent:sent + 1])
                sent += 1
        assert not open_, f"{len(open_)} unfinished handshakes still open after {time.monotonic() - t0:.1f} s"
        assert time.monotonic() - t0 < 20
    finally:
        sel.close()
        for s in socks:
            s.close()
    assert served(sb)
    sb.broker.assert_alive()


def _client_hello() -> bytes:
    """A real TLS ClientHello, taken from an SSLObject that is never given an answer."""
    ctx = ssl.create_default_context()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="broker")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


@pytest.mark.timeout(90)
def test_an_expired_server_certificate_stops_start_up_with_one_line(tmp_path: Path) -> None:
    """The broker refuses to start on a key store whose certificate expired: exit code 2 and one
    error line naming the setting, the file and the expiry date; no traceback, no listener."""
    ca = trustme.CA()
    now = datetime.datetime.now(datetime.UTC)
    cert = ca.issue_cert("127.0.0.1", common_name="broker0", not_before=now - datetime.timedelta(days=30),
                         not_after=now - datetime.timedelta(days=1))
    keystore = tmp_path / "expired-server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    port, ssl_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "odradek", "broker",
           "--override", f"listeners=PLAINTEXT://{HOST}:{port},SSL://{HOST}:{ssl_port}",
           "--override", f"log.dirs={tmp_path / 'data'}",
           "--override", "http.listeners=",
           "--override", "ssl.keystore.type=PEM", "--override", f"ssl.keystore.location={keystore}"]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         cwd=tmp_path, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        pytest.fail(f"the broker started on an expired certificate: {out.decode(errors='replace')[-1500:]}")
    text = out.decode(errors="replace")
    assert p.returncode == 2, text
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if "ERROR" in line]
    assert len(errors) == 1, text
    assert str(keystore) in errors[0] and "ssl.keystore.location" in errors[0], errors[0]
    assert "expired on " + cert_not_after(keystore) in errors[0], errors[0]


def cert_not_after(path: Path) -> str:
    import _ssl

    return str(_ssl._test_decode_cert(str(path))["notAfter"])  # type: ignore[attr-defined]
