"""``--command-config FILE`` on the tools that go past confluent-kafka's AdminClient: transactions
(its WireClient requests and the hand-written DescribeTransactions), reassign (AdminClient plus the
controller connection for ListPartitionReassignments) and elect-leaders (``--admin.config``, also
spelled ``--command-config``, with Java client names) and perf (``--command-config``, alias
``--producer.config`` / ``--consumer.config``). Each runs against the SASL_SSL listener
only, with SCRAM-SHA-512 credentials from the file; a wrong password makes each fail."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from .security import ADMIN_PASSWORD, SecureBroker, confluent_sasl, make_certs, secure_broker

TOPIC = "cc-tools"
TID = "cc-tools-txn"
PASSWORD = "erin-secret"


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("cctools")
    s = secure_broker(base / "broker", make_certs(base / "certs"))
    conf = confluent_sasl(s, "PLAIN", "admin", ADMIN_PASSWORD)
    admin = AdminClient(conf)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())])["erin"].result(15)
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
    # an open transaction, for `transactions list / describe`; it must stay open for the whole module, which took
    # more than the client's default transaction.timeout.ms (60 s) on a loaded CI machine (the coordinator then
    # aborted it and fenced the producer, and the teardown's abort failed)
    p = Producer({**conf, "transactional.id": TID, "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, b"v", partition=0)
    p.flush(15)
    yield s
    p.abort_transaction(30)
    s.broker.stop()


def _props(sb: SecureBroker, path: Path, password: str = PASSWORD) -> Path:
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="erin" password="{password}";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={sb.certs.ca}\n")
    return path


def _odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=90)


def test_transactions_with_command_config(sb: SecureBroker, tmp_path: Path) -> None:
    props = _props(sb, tmp_path / "c.properties")
    base = ["transactions", "--bootstrap-server", sb.sasl_ssl, "--command-config", str(props),
            "--command-timeout", "15"]
    r = _odradek(*base, "list")
    assert r.returncode == 0, r.stderr
    assert any(line.startswith(f"{TID}\t") and line.endswith("\tOngoing") for line in r.stdout.splitlines()), r.stdout
    r = _odradek(*base, "describe", "--transactional-id", TID)
    assert r.returncode == 0, r.stderr
    assert f"\t{TID}\t" in r.stdout and "Ongoing" in r.stdout and f"{TOPIC}-0" in r.stdout
    r = _odradek(*base, "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 2, (r.stdout, r.stderr)
    bad = _props(sb, tmp_path / "bad.properties", "wrong")
    r = _odradek("transactions", "--bootstrap-server", sb.sasl_ssl, "--command-config", str(bad),
                 "--command-timeout", "10", "describe", "--transactional-id", TID)
    assert r.returncode == 1 and "Error: SaslAuthenticate refused (error 58)" in r.stderr, r.stderr


def test_reassign_list_with_command_config(sb: SecureBroker, tmp_path: Path) -> None:
    props = _props(sb, tmp_path / "c.properties")
    r = _odradek("reassign", "--bootstrap-server", sb.sasl_ssl, "--command-config", str(props), "--list",
                 "--command-timeout", "15")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "No partition reassignments found."
    bad = _props(sb, tmp_path / "bad.properties", "wrong")
    r = _odradek("reassign", "--bootstrap-server", sb.sasl_ssl, "--command-config", str(bad), "--list",
                 "--command-timeout", "10")
    assert r.returncode == 1 and any(line.startswith("Error:") for line in r.stderr.splitlines()), r.stderr[-2000:]


@pytest.mark.parametrize("option", ["--admin.config", "--command-config"])
def test_elect_leaders_with_command_config(sb: SecureBroker, tmp_path: Path, option: str) -> None:
    props = _props(sb, tmp_path / "c.properties")
    r = _odradek("elect-leaders", "--bootstrap-server", sb.sasl_ssl, option, str(props), "--election-type",
                 "preferred", "--topic", TOPIC, "--command-timeout", "15")
    assert r.returncode == 0, r.stderr
    assert f"Valid replica already elected for partitions {TOPIC}-0, {TOPIC}-1" in r.stdout
    bad = _props(sb, tmp_path / "bad.properties", "wrong")
    r = _odradek("elect-leaders", "--bootstrap-server", sb.sasl_ssl, option, str(bad), "--election-type",
                 "preferred", "--topic", TOPIC, "--command-timeout", "10")
    assert r.returncode == 1 and any(line.startswith("Error:") for line in r.stderr.splitlines()), r.stderr[-2000:]


def test_perf_with_command_config(sb: SecureBroker, tmp_path: Path) -> None:
    import json

    props = _props(sb, tmp_path / "c.properties")
    r = _odradek("perf", "produce", "--bootstrap-server", sb.sasl_ssl, "--producer.config", str(props),
                 "--topic", "cc-perf", "--num-records", "500", "--record-size", "100", "--json", "--timeout", "60")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["records"] == 500
    r = _odradek("perf", "consume", "--bootstrap-server", sb.sasl_ssl, "--command-config", str(props),
                 "--topic", "cc-perf", "--num-records", "500", "--json", "--timeout", "60")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["records"] == 500
