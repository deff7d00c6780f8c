"""http.auth.token on a real broker process without any Kafka security (PLAINTEXT, no SASL users),
over HTTP with http.client: nobody is served without the token, neither the console nor (with
http.metrics.auth.required) /metrics; the token works as a Bearer header and through the login form's
HttpOnly, SameSite=Strict session cookie; a guesser is delayed and then refused per address while
another address still logs in; DescribeConfigs and the broker's log never show the token."""

from __future__ import annotations

import http.client
import re
import time

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from integration.broker import HOST, BrokerFactory

TOKEN = "tok-9f2c41d7e8a35b60c1d2e3f4"


def _http(port: int, method: str, path: str, headers: dict[str, str] | None = None, body: str = "",
          source: str = HOST) -> tuple[int, dict[str, str], bytes]:
    c = http.client.HTTPConnection(HOST, port, timeout=15, source_address=(source, 0))
    try:
        hs = {"Host": f"{HOST}:{port}", **(headers or {})}
        if body:
            hs["Content-Type"] = "application/x-www-form-urlencoded"
        c.request(method, path, body=body.encode() if body else None, headers=hs)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def test_token_login_without_sasl_users(make_broker: BrokerFactory) -> None:
    b = make_broker({"http.auth.token": TOKEN, "http.metrics.auth.required": "true",
                     "auto.create.topics.enable": "false"})
    port = b.http_port
    own = f"http://{HOST}:{port}"
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    # nothing without the token: a page answers with the login form, /metrics with a challenge
    status, headers, body = _http(port, "GET", "/topics")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer") and b'action="/login"' in body
    assert _http(port, "GET", "/metrics")[0] == 401
    assert _http(port, "GET", "/login")[0] == 200

    # the Bearer token: pages, /metrics, and an action (no CSRF token: a browser never sends this header)
    status, _, body = _http(port, "GET", "/topics", bearer)
    assert status == 200 and b'id="principal">User:ANONYMOUS<' in body
    status, _, body = _http(port, "GET", "/metrics", bearer)
    assert status == 200 and b"kafka_server_" in body
    assert _http(port, "POST", "/actions/create-topic", bearer, "name=by-bearer&partitions=1")[0] == 200

    # the login form: a session cookie the browser keeps from scripts and other sites
    assert _http(port, "POST", "/login", {}, f"secret={TOKEN}")[0] == 403  # no Origin: refused
    status, headers, _ = _http(port, "POST", "/login", {"Origin": own}, f"secret={TOKEN}")
    assert status == 303 and headers["location"] == "/"
    attrs = [a.strip() for a in headers["set-cookie"].split(";")]
    assert "HttpOnly" in attrs and "SameSite=Strict" in attrs
    jar = {"Cookie": attrs[0]}
    status, _, page = _http(port, "GET", "/topics", jar)
    assert status == 200 and b'id="logout"' in page
    m = re.search(rb'name="csrf" value="([0-9a-f]+)"', page)
    assert m is not None
    form = f"name=by-session&partitions=1&csrf={m.group(1).decode()}"
    assert _http(port, "POST", "/actions/create-topic", {**jar, "Origin": "http://evil.example"}, form)[0] == 403
    assert _http(port, "POST", "/actions/create-topic", {**jar, "Origin": own}, form)[0] == 200
    assert _http(port, "GET", "/metrics", jar)[0] == 200
    status, headers, _ = _http(port, "POST", "/logout", {**jar, "Origin": own})
    assert status == 303 and "Max-Age=0" in headers["set-cookie"]
    assert _http(port, "GET", "/topics", jar)[0] == 401

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topics = admin.list_topics(timeout=15).topics
    assert "by-bearer" in topics and "by-session" in topics

    # DescribeConfigs hides the token, the log never shows it
    res = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([res])[res].result(timeout=15)
    entry = entries["http.auth.token"]
    assert entry.is_sensitive and entry.value is None
    assert entries["http.metrics.auth.required"].value == "true"
    broker_lines = [ln for ln in b.log_text().splitlines() if not ln.startswith("===== start")]  # the harness's command
    assert broker_lines and not [ln for ln in broker_lines if TOKEN in ln]
    b.assert_alive()


def test_guessing_is_delayed_then_refused_per_address(make_broker: BrokerFactory) -> None:
    b = make_broker({"http.auth.token": TOKEN})
    port = b.http_port
    t0 = time.monotonic()
    assert _http(port, "GET", "/", {"Authorization": "Bearer guess-0"})[0] == 401
    assert time.monotonic() - t0 >= 0.09  # connection.failed.authentication.delay.ms (100)
    for i in range(1, 5):
        assert _http(port, "GET", "/", {"Authorization": f"Bearer guess-{i}"})[0] == 401
    for i in range(5, 10):
        assert _http(port, "POST", "/login", {"Origin": f"http://{HOST}:{port}"}, f"secret=guess-{i}")[0] == 401
    # ten failures within a minute: 127.0.0.1 is refused before its guess is even compared
    status, headers, _ = _http(port, "GET", "/", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 429 and 0 < int(headers["retry-after"]) <= 60
    # another address is not held up by the guesser
    assert _http(port, "GET", "/", {"Authorization": f"Bearer {TOKEN}"}, source="127.0.0.2")[0] == 200
    b.assert_alive()
