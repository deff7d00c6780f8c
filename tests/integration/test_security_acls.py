"""SASL/SCRAM users made with AlterUserScramCredentials and ACLs made with CreateAcls, enforced on
real clients: confluent-kafka, kafka-python, aiokafka and kcat over SASL_SSL with SCRAM-SHA-256/512,
and confluent-kafka over mutual TLS with the certificate's mapped principal. Each denial is the
error Kafka gives, and an ACL change applies to the next request."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from .clients import unique
from .security import ADMIN_PASSWORD, SecureBroker, confluent_sasl, confluent_ssl, make_certs, secure_broker
from .test_security_tls import assert_auth_refused

KCAT = shutil.which("kcat")
ALICE_SCRAM = "alice-scram-pw"
BOB_SCRAM = "bob-scram-pw"
ORDERS = "acl-orders"
SECRET = "acl-secret"


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("acl")
    certs = make_certs(base / "certs")
    s = secure_broker(base / "broker", certs, {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        # the mutual-TLS client's certificate (CN=alice,OU=tests,O=Odradek) maps to User:alice
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        "auto.create.topics.enable": "false",
    })
    admin = AdminClient(confluent_sasl(s, "PLAIN", "admin", ADMIN_PASSWORD))
    for f in admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     ALICE_SCRAM.encode()),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     BOB_SCRAM.encode()),
    ]).values():
        f.result(15)
    for f in admin.create_topics([NewTopic(ORDERS, 1, 1), NewTopic(SECRET, 1, 1)]).values():
        f.result(15)
    bindings = [
        AclBinding(ResourceType.TOPIC, "acl-ord", ResourcePatternType.PREFIXED, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, ORDERS, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "g-alice", ResourcePatternType.PREFIXED, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(bindings).values():
        f.result(15)
    yield s
    s.broker.stop()


def admin_client(sb: SecureBroker) -> AdminClient:
    return AdminClient(confluent_sasl(sb, "PLAIN", "admin", ADMIN_PASSWORD))


def alice(sb: SecureBroker, mechanism: str = "SCRAM-SHA-256") -> dict[str, object]:
    return confluent_sasl(sb, mechanism, "alice", ALICE_SCRAM)


def _delivery_errors(conf: dict[str, object], topic: str, n: int = 5) -> list[KafkaError | None]:
    out: list[KafkaError | None] = []
    p = Producer({**conf, "linger.ms": 0, "message.timeout.ms": 10000})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0, on_delivery=lambda err, _m: out.append(err))
    p.flush(20)
    return out


def _consume(conf: dict[str, object], topic: str, group: str, n: int) -> tuple[list[bytes], list[KafkaError]]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    errs: list[KafkaError] = []
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    while len(got) < n and not errs and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() != KafkaError._PARTITION_EOF:
                errs.append(m.error())
            continue
        got.append(m.value())
    if got:
        c.commit(asynchronous=False)
    c.close()
    return got, errs


@pytest.mark.timeout(120)
def test_scram_credentials_described(sb: SecureBroker) -> None:
    admin = admin_client(sb)
    desc = admin.describe_user_scram_credentials(["alice", "bob"])
    alice_d = desc["alice"].result(10)
    bob_d = desc["bob"].result(10)
    assert [(i.mechanism, i.iterations) for i in alice_d.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 4096)]
    assert [(i.mechanism, i.iterations) for i in bob_d.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    with pytest.raises(KafkaException, match="nonexistent"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)


@pytest.mark.timeout(120)
def test_confluent_scram_allowed_and_denied(sb: SecureBroker) -> None:
    conf = alice(sb)
    assert _delivery_errors(conf, ORDERS) == [None] * 5
    # Metadata hides the topic alice may not DESCRIBE
    topics = AdminClient(conf).list_topics(timeout=10).topics
    assert ORDERS in topics and SECRET not in topics
    errs = _delivery_errors(conf, SECRET, 1)
    assert errs and errs[0] is not None and errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errs
    got, cerrs = _consume(conf, ORDERS, unique("g-alice"), 5)
    assert not cerrs and len(got) >= 5
    got, cerrs = _consume(conf, ORDERS, unique("g-other"), 1)
    assert not got and cerrs and cerrs[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, cerrs
    # only ALTER on the cluster may create ACLs
    alice_admin = AdminClient(conf)
    fut = alice_admin.create_acls([AclBinding(ResourceType.TOPIC, SECRET, ResourcePatternType.LITERAL,
                                                    "User:alice", "*", AclOperation.READ,
                                                    AclPermissionType.ALLOW)])
    with pytest.raises(KafkaException) as e:
        next(iter(fut.values())).result(10)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert_auth_refused(confluent_sasl(sb, "SCRAM-SHA-256", "alice", "wrong"), "invalid credentials")
    assert_auth_refused(confluent_sasl(sb, "SCRAM-SHA-512", "alice", ALICE_SCRAM), "Authentication failed")


@pytest.mark.timeout(120)
def test_kafka_python_scram_512_acl_change_applies(sb: SecureBroker) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    topic = unique("acl-bob")
    admin = admin_client(sb)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    kw = {"bootstrap_servers": sb.sasl_ssl, "security_protocol": "SASL_SSL", "ssl_cafile": str(sb.certs.ca),
          "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob", "sasl_plain_password": BOB_SCRAM,
          "ssl_check_hostname": False}
    p = KafkaProducer(**kw, max_block_ms=5000)
    with pytest.raises(TopicAuthorizationFailedError):
        p.send(topic, b"denied").get(10)
    acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(10)
    described = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None,
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert [(b.principal, b.operation) for b in described] == [("User:bob", AclOperation.ALL)]
    p2 = KafkaProducer(**kw)
    assert p2.send(topic, b"allowed", partition=0).get(15).offset == 0
    p2.close()
    p.close()
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                  "User:bob", None, AclOperation.ANY,
                                                  AclPermissionType.ANY)])
    assert len(next(iter(deleted.values())).result(10)) == 1
    assert _delivery_errors(confluent_sasl(sb, "SCRAM-SHA-512", "bob", BOB_SCRAM), topic, 1)[0].code() == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.timeout(120)
def test_aiokafka_scram_consumes(sb: SecureBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        ctx = create_ssl_context(cafile=str(sb.certs.ca))
        ctx.check_hostname = False
        kw = {"bootstrap_servers": sb.sasl_ssl, "security_protocol": "SASL_SSL", "ssl_context": ctx,
              "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice", "sasl_plain_password": ALICE_SCRAM}
        prod = AIOKafkaProducer(**kw)
        await prod.start()
        try:
            await prod.send_and_wait(ORDERS, b"from-aiokafka", partition=0)
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(ORDERS, group_id=unique("g-alice-aio"), auto_offset_reset="earliest", **kw)
        await cons.start()
        got: list[bytes] = []
        try:
            while b"from-aiokafka" not in got:
                batch = await asyncio.wait_for(cons.getmany(timeout_ms=1000), 20)
                got += [m.value for ms in batch.values() for m in ms]
        finally:
            await cons.stop()
        return got

    assert b"from-aiokafka" in asyncio.run(run())


@pytest.mark.timeout(120)
@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_scram_and_mtls_principal(sb: SecureBroker) -> None:
    assert KCAT is not None
    sasl = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={sb.certs.ca}",
            "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", f"sasl.password={ALICE_SCRAM}"]
    out = subprocess.run([KCAT, "-b", sb.sasl_ssl, *sasl, "-P", "-t", ORDERS, "-p", "0"], input=b"from-kcat\n",
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    # the mutual-TLS client is User:alice through ssl.principal.mapping.rules
    conf = confluent_ssl(sb)
    assert _delivery_errors(conf, ORDERS, 1) == [None]
    errs = _delivery_errors(conf, SECRET, 1)
    assert errs[0] is not None and errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    c = Consumer({**conf, "group.id": unique("g-alice-tls"), "enable.auto.commit": False})
    c.assign([TopicPartition(ORDERS, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while b"from-kcat" not in values and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value())
    c.close()
    assert b"from-kcat" in values


def _odradek(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode() + out.stdout.decode()
    return out.stdout.decode()


@pytest.mark.timeout(180)
def test_cli_acls_and_scram_users_with_command_config(sb: SecureBroker, tmp_path: Path) -> None:
    cfg = tmp_path / "admin.properties"
    cfg.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_PASSWORD}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={sb.certs.ca}\n"
    )
    common = ["--bootstrap-server", sb.sasl_ssl, "--command-config", str(cfg)]
    assert ORDERS in _odradek("topics", *common, "--list").split()
    out = _odradek("configs", *common, "--entity-type", "users", "--entity-name", "carol", "--alter",
                   "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-pw]")
    assert "Completed updating config for user carol." in out
    out = _odradek("configs", *common, "--entity-type", "users", "--entity-name", "carol", "--describe")
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192" in out
    carol = confluent_sasl(sb, "SCRAM-SHA-256", "carol", "carol-pw")
    carol_admin = AdminClient(carol)
    assert ORDERS not in carol_admin.list_topics(timeout=10).topics
    out = _odradek("acls", *common, "--add", "--allow-principal", "User:carol", "--consumer", "--topic", ORDERS,
                   "--group", "g-carol")
    assert "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)" in out
    listed = _odradek("acls", *common, "--list", "--topic", ORDERS)
    assert f"ResourcePattern(resourceType=TOPIC, name={ORDERS}, patternType=LITERAL)" in listed
    assert "principal=User:carol" in listed and "operation=DESCRIBE" in listed
    assert ORDERS in carol_admin.list_topics(timeout=10).topics  # DESCRIBE now allowed
    got, errs = _consume(carol, ORDERS, "g-carol", 1)
    assert got and not errs
    out = _odradek("acls", *common, "--remove", "--allow-principal", "User:carol", "--topic", ORDERS, "--force")
    assert out.count("Removed ACL") == 2
    assert ORDERS not in carol_admin.list_topics(timeout=10).topics


@pytest.mark.timeout(120)
def test_authorized_operations_kip430(sb: SecureBroker) -> None:
    from confluent_kafka import TopicCollection

    alice_admin = AdminClient(alice(sb))
    desc = alice_admin.describe_topics(TopicCollection([ORDERS]), include_authorized_operations=True)[ORDERS]
    ops = set(desc.result(15).authorized_operations)
    assert ops == {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}, ops
    cluster_ops = alice_admin.describe_cluster(include_authorized_operations=True).result(15).authorized_operations
    assert not cluster_ops  # alice has no ACL on the cluster
    admin = admin_client(sb)
    super_ops = set(admin.describe_cluster(include_authorized_operations=True).result(15).authorized_operations)
    assert {AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION} <= super_ops


@pytest.mark.timeout(120)
def test_transactional_id_acls(sb: SecureBroker) -> None:
    tid = unique("alice-tx")
    conf = {**alice(sb), "transactional.id": tid, "transaction.timeout.ms": 10000}
    p = Producer(conf)
    with pytest.raises(KafkaException) as e:
        p.init_transactions(10)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    admin = admin_client(sb)
    acl = AclBinding(ResourceType.TRANSACTIONAL_ID, "alice-tx", ResourcePatternType.PREFIXED, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(10)
    p2 = Producer(conf)
    p2.init_transactions(20)
    p2.begin_transaction()
    p2.produce(ORDERS, b"in-a-transaction", partition=0)
    p2.commit_transaction(20)


@pytest.mark.timeout(60)
def test_write_txn_markers_need_cluster_action_with_an_authorizer(sb: SecureBroker) -> None:
    """With an authorizer, even an ABORT marker (which any listener may carry: kafka-transactions.sh
    abort) needs CLUSTER_ACTION: User:ANONYMOUS on the PLAINTEXT listener holds no ACL and is refused."""
    from kio.schema.write_txn_markers.v1 import request as wtm

    from odradek.client.wire import WireClient

    codes = []
    for commit in (False, True):
        marker = wtm.WritableTxnMarker(producer_id=0, producer_epoch=0, transaction_result=commit,
                                       coordinator_epoch=0,
                                       topics=(wtm.WritableTxnMarkerTopic(name=ORDERS, partition_indexes=(0,)),))
        with WireClient(sb.plaintext) as w:
            resp = w.request(27, 1, markers=(marker,))
        codes += [int(p.error_code) for m in resp.markers for t in m.topics for p in t.partitions]
    assert codes == [31, 31]  # CLUSTER_AUTHORIZATION_FAILED
