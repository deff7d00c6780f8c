"""The web console (odradek.console) driven in a real headless Chromium (Debian's ``chromium``, through
Playwright) against a real broker process holding data produced by confluent-kafka.

The broker has an authorizer (``super.users=User:admin``), a SASL_PLAINTEXT listener with PLAIN users
(admin, alice) and a SCRAM-SHA-256 user (carol); the console's users log in with HTTP Basic as those
users. Each page is checked for the values the admin client reports; records are browsed by offset
and by timestamp (hostile values shown as text, never run); a topic is created and a config changed
from the UI and verified with the admin client; a group's offsets are reset from the UI (and refused
while another group is active); alice, without CREATE, is shown Kafka's TOPIC_AUTHORIZATION_FAILED.
Screenshots of each page go to /tmp/console_shots/.

Fails (does not skip) when chromium or Playwright is missing: it is what the console is tested with.
"""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from .broker import HOST, Broker, free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
SHOTS = Path("/tmp/console_shots")
ADMIN_PW, ALICE_PW, CAROL_PW = "admin-secret", "alice-secret", "carol-scram-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_PW}" user_admin="{ADMIN_PW}" user_alice="{ALICE_PW}";')
TOPIC = "console-events"
XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@dataclass
class Setup:
    broker: Broker
    sasl: str
    http: str
    t0_ms: int  # before the second half of the records
    committed: dict[int, int]
    admin: AdminClient


def sasl_conf(s: Setup | str, user: str, password: str) -> dict[str, Any]:
    bootstrap = s if isinstance(s, str) else s.sasl
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    port, sasl_port = free_port(), free_port()
    b = Broker(tmp_path_factory.mktemp("console"), {
        "listeners": f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
    }, port=port, name="console")
    b.start()
    sasl = f"{HOST}:{sasl_port}"
    admin = AdminClient(sasl_conf(sasl, "admin", ADMIN_PW))
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), CAROL_PW.encode())]).values():
        f.result(15)
    for f in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        f.result(15)
    # alice may read and describe the console-* topics and groups, and nothing else (no CREATE, no ALTER_CONFIGS)
    for f in admin.create_acls([
        AclBinding(ResourceType.TOPIC, "console-", ResourcePatternType.PREFIXED, "User:alice", "*", op,
                   AclPermissionType.ALLOW) for op in (AclOperation.READ, AclOperation.DESCRIBE,
                                                       AclOperation.DESCRIBE_CONFIGS)
    ] + [AclBinding(ResourceType.GROUP, "console-", ResourcePatternType.PREFIXED, "User:alice", "*",
                    AclOperation.DESCRIBE, AclPermissionType.ALLOW)]).values():
        f.result(15)
    p = Producer(sasl_conf(sasl, "admin", ADMIN_PW))
    for i in range(10):
        p.produce(TOPIC, key=f"k{i}".encode(), value=XSS.encode() if i == 2 else f"value-{i}".encode(),
                  partition=i % 2, headers=[("trace", f"t{i}".encode()), ("bin", b"\x00\xff")])
    p.produce(TOPIC, key=None, value=b"\x00\x01\xfe\xff", partition=0)
    p.flush(15)
    time.sleep(0.05)
    t0_ms = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(10, 20):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"value-{i}".encode(), partition=i % 2)
    p.flush(15)
    # console-g: reads 7 records of partition 0 and 3 of partition 1, commits, leaves (Empty)
    c = Consumer({**sasl_conf(sasl, "admin", ADMIN_PW), "group.id": "console-g", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    c.commit(offsets=[TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 3)], asynchronous=False)
    c.close()
    yield Setup(b, sasl, f"http://{HOST}:{b.http_port}", t0_ms, {0: 7, 1: 3}, admin)
    b.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/setup.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install -e '.[test]'")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def page_as(browser: Any, base: str, user: str | None, password: str | None = None) -> Any:
    kw = {"http_credentials": {"username": user, "password": password}} if user else {}
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, **kw)
    page = ctx.new_page()
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError(f"a dialog opened: {d.message}")))
    if user:  # /login asks for the credentials (401 with a Basic challenge); the browser keeps them
        page.goto(f"{base}/login")
    return page


def cells(page: Any, table: str) -> list[list[str]]:
    return [[c.strip() for c in r] for r in page.eval_on_selector_all(
        f"#{table} tbody tr", "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText))")]


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def admin(setup: Setup) -> AdminClient:
    return setup.admin


def test_brokers_and_topics_pages(setup: Setup, browser: Any) -> None:
    page = page_as(browser, setup.http, "admin", ADMIN_PW)
    page.goto(setup.http + "/")
    md = admin(setup).list_topics(timeout=15)
    assert page.inner_text("#principal") == "User:admin"
    assert page.inner_text("#cluster-id") == md.cluster_id
    assert page.inner_text("#controller") == str(md.controller_id)
    rows = cells(page, "brokers")
    assert [(int(r[0]), r[1], r[4]) for r in rows] == [(b.id, b.host, "controller") for b in md.brokers.values()]
    assert page.inner_text("#under-replicated") == "0"
    shot(page, "01-brokers")

    page.goto(setup.http + "/topics")
    topics = {r[0]: r for r in cells(page, "topics")}
    assert topics[TOPIC][1:4] == ["2", "1", "0"]
    assert topics[TOPIC][4].endswith("B") and topics[TOPIC][4] != "0 B"
    shot(page, "02-topics")

    page.goto(setup.http + "/topic?name=" + urllib.parse.quote(TOPIC))
    parts = cells(page, "partitions")
    assert [(r[0], r[1], r[2], r[3], r[5], r[6]) for r in parts] == [
        ("0", "0", "0", "0", "0", "11"), ("1", "0", "0", "0", "0", "10")]
    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    described = admin(setup).describe_configs([res])[res].result(15)
    configs = {r[0]: r[1] for r in cells(page, "configs")}
    assert configs["retention.ms"] == described["retention.ms"].value
    assert configs["cleanup.policy"] == "delete"
    shot(page, "03-topic")


def test_records_by_offset_and_timestamp(setup: Setup, browser: Any) -> None:
    page = page_as(browser, setup.http, "admin", ADMIN_PW)
    page.goto(setup.http + f"/records?topic={TOPIC}&partition=0")
    rows = cells(page, "records")
    assert [r[0] for r in rows] == [str(i) for i in range(11)]
    assert [(r[2], r[3]) for r in rows[:2]] == [("k0", "value-0"), ("k2", XSS)]  # shown, not run
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#records img, #records script").count() == 0
    assert rows[0][4].split() == ["trace:", "t0", "bin:", "AP8="]  # a binary header value as base64
    assert rows[5][2] == "null" and rows[5][3] == base64.b64encode(b"\x00\x01\xfe\xff").decode()
    assert page.inner_text("#bounds").startswith("Offsets 0 to 11")
    shot(page, "04-records")

    page.fill("#browse input[name=offset]", "8")
    page.fill("#browse input[name=limit]", "2")
    page.click("#browse button")
    page.wait_for_url(re.compile(r".*offset=8.*"))
    assert [(r[0], r[2]) for r in cells(page, "records")] == [("8", "k14"), ("9", "k16")]

    page.goto(setup.http + f"/records?topic={TOPIC}&partition=1&timestamp={setup.t0_ms}")
    rows = cells(page, "records")
    assert [(r[0], r[2]) for r in rows] == [(str(5 + i), f"k{11 + 2 * i}") for i in range(5)]
    shot(page, "05-records-by-time")


def test_groups_lag_and_reset(setup: Setup, browser: Any) -> None:
    page = page_as(browser, setup.http, "admin", ADMIN_PW)
    live = Consumer({**sasl_conf(setup, "admin", ADMIN_PW), "group.id": "console-live",
                     "auto.offset.reset": "earliest", "session.timeout.ms": 30000})
    live.subscribe([TOPIC])
    deadline = time.time() + 30
    got = 0
    while got < 21 and time.time() < deadline:
        m = live.poll(0.5)
        got += m is not None and m.error() is None
    live.commit(asynchronous=False)
    try:
        page.goto(setup.http + "/groups")
        groups = {r[0]: r[1] for r in cells(page, "groups")}
        assert groups["console-g"] == "Empty" and groups["console-live"] == "Stable"
        shot(page, "06-groups")

        page.goto(setup.http + "/group?id=console-live")
        assert page.inner_text("#group-state") == "Stable"
        members = cells(page, "members")
        assert len(members) == 1 and members[0][1] == "rdkafka"
        assert page.inner_text("#total-lag") == "0"
        page.select_option("#reset-offsets select[name=to]", "earliest")
        page.click("#reset-offsets button")
        assert "can only be reset if the group 'console-live' is inactive, but the current state is Stable" \
            in page.inner_text("#result")
        shot(page, "07-reset-refused-active")
    finally:
        live.close()

    page.goto(setup.http + "/group?id=console-g")
    assert page.inner_text("#group-state") == "Empty"
    lag = cells(page, "lag")
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in lag] == [
        (TOPIC, "0", "7", "11", "4"), (TOPIC, "1", "3", "10", "7")]
    assert page.inner_text("#total-lag") == "11"
    shot(page, "08-group-lag")
    page.fill("#reset-offsets input[name=partition]", "1")
    page.select_option("#reset-offsets select[name=to]", "offset")
    page.fill("#reset-offsets input[name=offset]", "5")
    page.click("#reset-offsets button")
    assert page.inner_text("#result") == f"Reset {TOPIC}-1 to 5."
    got_offsets = admin(setup).list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("console-g")])["console-g"].result(15)
    assert {tp.partition: tp.offset for tp in got_offsets.topic_partitions} == {0: 7, 1: 5}
    page.goto(setup.http + "/group?id=console-g")
    page.select_option("#reset-offsets select[name=to]", "latest")
    page.click("#reset-offsets button")
    assert page.inner_text("#result") == f"Reset {TOPIC}-0 to 11, {TOPIC}-1 to 10."


def test_create_topic_and_change_config_from_the_ui(setup: Setup, browser: Any) -> None:
    page = page_as(browser, setup.http, "admin", ADMIN_PW)
    page.goto(setup.http + "/topics")
    page.fill("#create-topic input[name=name]", "console-created")
    page.fill("#create-topic input[name=partitions]", "3")
    page.fill("#create-topic input[name=configs]", "cleanup.policy=compact")
    page.click("#create-topic button")
    assert page.inner_text("#result") == "Created topic console-created."
    shot(page, "09-topic-created")
    md = admin(setup).list_topics(timeout=15)
    assert len(md.topics["console-created"].partitions) == 3
    res = ConfigResource(ConfigResource.Type.TOPIC, "console-created")
    assert admin(setup).describe_configs([res])[res].result(15)["cleanup.policy"].value == "compact"

    page.goto(setup.http + "/topic?name=console-created")
    page.fill("#alter-config input[name=config]", "retention.ms")
    page.fill("#alter-config input[name=value]", "123456")
    page.click("#alter-config button")
    assert page.inner_text("#result") == "Set retention.ms=123456 on topic console-created."
    assert admin(setup).describe_configs([res])[res].result(15)["retention.ms"].value == "123456"
    page.click("#back")
    assert {r[0]: r[1] for r in cells(page, "configs")}["retention.ms"] == "123456"
    # a bad value is Kafka's INVALID_CONFIG
    page.fill("#alter-config input[name=config]", "retention.ms")
    page.fill("#alter-config input[name=value]", "soon")
    page.click("#alter-config button")
    assert page.inner_text("#result").startswith("INVALID_CONFIG")


def test_denied_actions_show_kafkas_error(setup: Setup, browser: Any) -> None:
    alice = page_as(browser, setup.http, "alice", ALICE_PW)
    alice.goto(setup.http + "/topics")
    assert alice.inner_text("#principal") == "User:alice"
    names = [r[0] for r in cells(alice, "topics")]
    assert TOPIC in names and "__consumer_offsets" not in names  # Metadata shows only what alice may DESCRIBE
    alice.fill("#create-topic input[name=name]", "console-alice")
    alice.click("#create-topic button")
    assert alice.inner_text("#result") == "TOPIC_AUTHORIZATION_FAILED: Authorization failed."
    shot(alice, "10-create-denied")
    assert "console-alice" not in admin(setup).list_topics(timeout=15).topics
    alice.goto(setup.http + f"/topic?name={TOPIC}")
    alice.fill("#alter-config input[name=config]", "retention.ms")
    alice.fill("#alter-config input[name=value]", "1")
    alice.click("#alter-config button")
    assert alice.inner_text("#result").startswith("TOPIC_AUTHORIZATION_FAILED")
    alice.goto(setup.http + "/group?id=console-g")
    alice.click("#reset-offsets button")
    assert "GROUP_AUTHORIZATION_FAILED" in alice.inner_text("#result")

    # carol logs in with her SCRAM-SHA-256 password; she has no ACLs: sees no topics, may not browse
    carol = page_as(browser, setup.http, "carol", CAROL_PW)
    carol.goto(setup.http + "/topics")
    assert carol.inner_text("#principal") == "User:carol" and cells(carol, "topics") == []
    carol.goto(setup.http + f"/records?topic={TOPIC}&partition=0")
    assert carol.inner_text("#error").startswith("TOPIC_AUTHORIZATION_FAILED")
    shot(carol, "11-browse-denied")

    # the broker has security: the console wants a login (Chromium gives up on the Basic challenge)
    anonymous = page_as(browser, setup.http, None)
    with pytest.raises(Exception, match="ERR_INVALID_AUTH_CREDENTIALS"):
        anonymous.goto(setup.http + "/topics")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(setup.http + "/topics", timeout=15)
    assert e.value.code == 401
    wrong = browser.new_context(http_credentials={"username": "alice", "password": "not-her-password"}).new_page()
    assert wrong.goto(setup.http + "/login").status == 401  # never anonymous with a wrong password
    bad = urllib.request.Request(setup.http + "/topics", headers={
        "Authorization": "Basic " + base64.b64encode(b"alice:wrong").decode()})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad, timeout=15)
    assert e.value.code == 401 and e.value.headers["WWW-Authenticate"].startswith("Basic")


def test_live_charts(setup: Setup, browser: Any) -> None:
    page = page_as(browser, setup.http, "admin", ADMIN_PW)
    page.goto(setup.http + "/charts")
    p = Producer(sasl_conf(setup, "admin", ADMIN_PW))
    deadline = time.time() + 6
    while time.time() < deadline:
        for _ in range(50):
            p.produce(TOPIC, value=b"x" * 100)
        p.flush(5)
        time.sleep(0.2)
    page.wait_for_function("parseInt(document.body.getAttribute('data-samples') || '0') >= 4", timeout=20000)
    points = page.get_attribute("#throughput polyline", "points") or ""
    assert len(points.split()) >= 3
    ys = [float(pt.split(",")[1]) for pt in points.split()]
    assert min(ys) < 170  # some sample above zero bytes/s
    assert "messages in" in page.inner_text("#chart-status")
    shot(page, "12-charts")


def test_csrf_and_methods(setup: Setup) -> None:
    auth = {"Authorization": "Basic " + base64.b64encode(f"admin:{ADMIN_PW}".encode()).decode(),
            "Content-Type": "application/x-www-form-urlencoded"}

    def post(body: str, **headers: str) -> int:
        req = urllib.request.Request(setup.http + "/actions/create-topic", body.encode(), {**auth, **headers})
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    assert post("name=console-csrf&partitions=1") == 403  # no token
    html = urllib.request.urlopen(urllib.request.Request(setup.http + "/topics", headers=auth), timeout=15).read()
    token = re.search(rb'name="csrf" value="([0-9a-f]+)"', html).group(1).decode()  # type: ignore[union-attr]
    assert post(f"name=console-csrf&partitions=1&csrf={token}", Origin="http://evil.example") == 403
    assert "console-csrf" not in admin(setup).list_topics(timeout=15).topics
    assert post(f"name=console-csrf&partitions=1&csrf={token}", Origin=setup.http) == 200
    req = urllib.request.Request(setup.http + "/actions/create-topic", headers=auth)  # GET: not an action
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=15)
    assert e.value.code == 404
