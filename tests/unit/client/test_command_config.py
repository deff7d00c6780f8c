"""--command-config: a Java client's security properties as librdkafka settings."""

from __future__ import annotations

from pathlib import Path

from odradek.client.command_config import admin_config, librdkafka_settings, read_properties


def test_java_client_properties_translated(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text(
        "# admin\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
        'password="p=w;d";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\nssl.keystore.type=PEM\n"
        "ssl.keystore.location=/etc/client.pem\nssl.endpoint.identification.algorithm=\n"
    )
    conf = admin_config("h:9094", str(f))
    assert conf == {
        "bootstrap.servers": "h:9094", "log_level": "4", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin", "sasl.password": "p=w;d", "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/client.pem", "ssl.key.location": "/etc/client.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert read_properties(f)["sasl.mechanism"] == "SCRAM-SHA-512"
    assert librdkafka_settings({"ssl.ca.location": "/x"}) == {"ssl.ca.location": "/x"}  # librdkafka names pass
    assert admin_config("h:1", None) == {"bootstrap.servers": "h:1", "log_level": "4"}
