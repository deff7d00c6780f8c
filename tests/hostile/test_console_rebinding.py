"""The HTTP console against a web page on another site (DNS rebinding, cross-site forms) and against
anonymous users of a broker that has security configured, on a real broker process.

A rebinding page is played by raw HTTP with the headers a browser sends for it: once the page's own
name (``rebind.evil.example``) resolves to 127.0.0.1 the browser sends ``Host`` and ``Origin`` naming
that page, and to the browser every answer is same-origin (readable, token included)."""

from __future__ import annotations

import base64
import http.client
import re
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient
from integration.broker import HOST, Broker, BrokerFactory, free_port

from .conftest import BROKER_MEMORY_LIMIT

EVIL = "rebind.evil.example"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-pw" user_admin="admin-pw";')


def _http(port: int, method: str, path: str, headers: dict[str, str], body: str = "") -> tuple[int, bytes]:
    c = http.client.HTTPConnection(HOST, port, timeout=15)
    try:
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            c.putheader(k, v)
        if body:
            c.putheader("Content-Type", "application/x-www-form-urlencoded")
        c.putheader("Content-Length", str(len(body.encode())))
        c.endheaders(body.encode() if body else None)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _token(page: bytes) -> str:
    m = re.search(rb'name="csrf" value="([0-9a-f]+)"', page)
    assert m is not None, page[:300]
    return m.group(1).decode()


def test_rebinding_page_can_neither_read_nor_act(make_broker: BrokerFactory) -> None:
    b = make_broker({"auto.create.topics.enable": "false"})
    port = b.http_port
    rebound = {"Host": f"{EVIL}:{port}", "Origin": f"http://{EVIL}:{port}", "Sec-Fetch-Site": "same-origin"}
    for path in ("/topics", "/api/stats", "/metrics", "/records?topic=x&partition=0"):
        status, body = _http(port, "GET", path, rebound)
        assert status == 421, (path, status, body[:200])
    # even with a token taken from a page served under a good Host, the rebound POST is refused
    status, page = _http(port, "GET", "/topics", {"Host": f"{HOST}:{port}"})
    assert status == 200
    form = f"name=rebound-topic&partitions=1&csrf={_token(page)}"
    status, _ = _http(port, "POST", "/actions/create-topic", rebound, form)
    assert status == 421
    assert _http(port, "GET", "/metrics", {})[0] == 400  # no Host at all
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert "rebound-topic" not in admin.list_topics(timeout=15).topics
    # the console and /metrics still answer to the names of the broker
    for host in (f"{HOST}:{port}", f"localhost:{port}"):
        assert _http(port, "GET", "/metrics", {"Host": host})[0] == 200
    assert "refused an HTTP request" in b.log_text() and EVIL in b.log_text()
    b.assert_alive()


def test_an_action_says_where_it_comes_from(make_broker: BrokerFactory) -> None:
    """A form posted by a client that sends neither Origin nor Referer, or from another site, is
    refused even with the right token; the same form from the console's own page is served."""
    b = make_broker({"auto.create.topics.enable": "false"})
    port = b.http_port
    own = {"Host": f"{HOST}:{port}"}
    status, page = _http(port, "GET", "/topics", own)
    assert status == 200
    token = _token(page)
    assert _http(port, "POST", "/actions/create-topic", own, f"name=csrf-bare&partitions=1&csrf={token}")[0] == 403
    cross = {**own, "Referer": "http://evil.example/page", "Sec-Fetch-Site": "cross-site"}
    assert _http(port, "POST", "/actions/create-topic", cross, f"name=csrf-cross&partitions=1&csrf={token}")[0] == 403
    same = {**own, "Origin": f"http://{HOST}:{port}", "Sec-Fetch-Site": "same-origin"}
    assert _http(port, "POST", "/actions/create-topic", same, f"name=csrf-ok&partitions=1&csrf={token}")[0] == 200
    topics = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=15).topics
    assert "csrf-ok" in topics and "csrf-bare" not in topics and "csrf-cross" not in topics


def test_console_needs_a_login_when_the_broker_has_security(tmp_path: Path) -> None:
    port, sasl_port = free_port(), free_port()
    b = Broker(tmp_path, {
        "listeners": f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",  # even so: the console asks who you are
    }, port=port, name="secure", memory_limit=BROKER_MEMORY_LIMIT)
    b.start()
    try:
        _login_checks(b.http_port)
    finally:
        b.stop()


def _login_checks(hp: int) -> None:
    own = {"Host": f"{HOST}:{hp}"}
    for path in ("/", "/topics", "/api/stats", "/static/console.js"):
        status, _ = _http(hp, "GET", path, own)
        assert status == 401, (path, status)
    login = {**own, "Authorization": "Basic " + base64.b64encode(b"admin:admin-pw").decode()}
    status, page = _http(hp, "GET", "/topics", login)
    assert status == 200 and b"User:admin" in page
    wrong = {**own, "Authorization": "Basic " + base64.b64encode(b"admin:nope").decode()}
    t0 = time.monotonic()
    assert _http(hp, "GET", "/topics", wrong)[0] == 401
    assert time.monotonic() - t0 >= 0.05  # the failed-authentication delay
    assert _http(hp, "GET", "/metrics", own)[0] == 200  # the scrape endpoint stays open (Host-checked)
