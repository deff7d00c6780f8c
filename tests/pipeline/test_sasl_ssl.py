"""The pipeline over SASL_SSL (issue 15): the Spark source and sink take Spark's Kafka options for
security (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.*``); they are given only the SASL_SSL listener's address (the broker's
metadata answers with that listener's endpoints), so nothing can go around TLS and SASL.

- The ODS job (``odradek pipeline run``) reads CDC events from the SASL_SSL listener as a SCRAM
  user; its ``[broker] options`` carry those settings; the ODS equals the truth.
- The sink writes a DataFrame to the SASL_SSL listener (PLAIN) and the batch source reads it back;
  a wrong password fails the read (no metadata: librdkafka's transport failure).
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from integration.security import ADMIN_PASSWORD, SecureBroker, confluent_sasl, make_certs, secure_broker

from .test_ods import (
    CUSTOMER_COLUMNS,
    CdcStream,
    config_text,
    customer_row,
    normalise,
    pipeline_cmd,
    query,
    truth,
)

SCRAM_USER, SCRAM_PASSWORD = "etl", "etl-secret"


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("pipeline-sasl")
    s = secure_broker(base / "broker", make_certs(base / "certs"))
    admin = AdminClient(confluent_sasl(s, "PLAIN", "admin", ADMIN_PASSWORD))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), SCRAM_PASSWORD.encode())])[
        SCRAM_USER].result(15)
    for t in ("sec.customers", "sec.orders", "sec.sink"):
        admin.create_topics([NewTopic(t, 2, 1)])[t].result(15)
    yield s
    s.broker.stop()


def _java_security(sb: SecureBroker, mechanism: str, module: str, user: str, password: str) -> dict[str, str]:
    """What a Spark Kafka-source user passes (Java client names, without the ``kafka.`` prefix)."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(sb.certs.ca)}


def test_ods_job_reads_from_a_sasl_ssl_listener(sb: SecureBroker, tmp_path: Path) -> None:
    rnd = random.Random(15)
    stream = CdcStream("customers", "id", rnd)
    make = customer_row(rnd)
    events = [stream.change(make, 30) for _ in range(120)]
    p = Producer(confluent_sasl(sb, "PLAIN", "admin", ADMIN_PASSWORD))
    for k, v in events:
        p.produce("sec.customers", key=k, value=v)
    assert p.flush(30) == 0
    opts = _java_security(sb, "SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule",
                          SCRAM_USER, SCRAM_PASSWORD)
    toml_opts = ", ".join(f"\"{k}\" = '{v}'" for k, v in opts.items())  # literal strings: the JAAS has quotes
    text = config_text(sb.sasl_ssl, "sec.customers", "sec.orders", 1000).replace(
        f'bootstrap_servers = "{sb.sasl_ssl}"', f'bootstrap_servers = "{sb.sasl_ssl}"\noptions = {{ {toml_opts} }}')
    assert "ScramLoginModule" in text
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(text)
    out = subprocess.run(pipeline_cmd("run", "--config", str(cfg), "--available-now"), capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-5000:]
    want = {k: normalise(v, CUSTOMER_COLUMNS) for k, v in truth(events, "id", CUSTOMER_COLUMNS).items()}
    rows = query(cfg, "SELECT * FROM ods.customers ORDER BY id")
    assert {int(r["id"]): normalise(r, CUSTOMER_COLUMNS) for r in rows} == want
    assert want  # the stream had live rows


def _options(reader: Any, sb: SecureBroker, password: str) -> Any:
    opts = _java_security(sb, "PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule", "admin", password)
    reader = reader.option("kafka.bootstrap.servers", sb.sasl_ssl)
    for k, v in opts.items():
        reader = reader.option(f"kafka.{k}", v)
    return reader


def test_sink_and_source_over_sasl_ssl(spark: Any, sb: SecureBroker) -> None:
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    _options(df.write.format("odradek"), sb, ADMIN_PASSWORD).option("topic", "sec.sink").mode("append").save()
    back = (_options(spark.read.format("odradek"), sb, ADMIN_PASSWORD).option("subscribe", "sec.sink")
            .option("startingOffsets", "earliest").option("endingOffsets", "latest").load().collect())
    assert sorted((bytes(r["key"]), bytes(r["value"])) for r in back) == sorted(rows)
    # librdkafka reports the refused SASL login of a metadata request as a transport failure, once the
    # metadata request's timeout (kafkaConsumer.pollTimeoutMs, default 120 s) has passed: 10 s here
    t0 = time.monotonic()
    with pytest.raises(Exception, match="Failed to get metadata"):
        (_options(spark.read.format("odradek"), sb, "wrong").option("subscribe", "sec.sink")
         .option("startingOffsets", "earliest").option("endingOffsets", "latest")
         .option("kafkaConsumer.pollTimeoutMs", "10000").load().collect())
    assert time.monotonic() - t0 < 100  # the timeout given was the one waited for
