"""odradek.security.zk_client: JAAS files, KAFKA_OPTS system properties, Kafka's default znode ACLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.config import ConfigError
from odradek.controller.zk_data import CREATOR_ALL, WORLD_ALL, WORLD_READ, default_acls, sensitive_path
from odradek.security.zk_client import parse_jaas_file, system_properties, zk_client_security

JAAS = """
/* brokers' logins */
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="a;b}" // a comment
    user_admin="a;b}";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="zk-secret";
};
Other { org.apache.zookeeper.server.auth.DigestLoginModule required username="x" password="y"; };
"""


def test_parse_jaas_file_sections() -> None:
    sections = parse_jaas_file(JAAS)
    assert list(sections) == ["KafkaServer", "Client", "Other"]
    assert sections["KafkaServer"][0].options["password"] == "a;b}"
    client = sections["Client"][0]
    assert client.login_module == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert client.flag == "required"
    assert client.options == {"username": "kafka", "password": "zk-secret"}


@pytest.mark.parametrize("bad", ["Client {", "Client { };", "Client { org.x.Module required username=; };", "junk"])
def test_parse_jaas_file_refuses_garbage(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_jaas_file(bad)


def test_kafka_opts_system_properties() -> None:
    env = {"KAFKA_OPTS": "-Xmx1G -Djava.security.auth.login.config='/etc/kafka/jaas file.conf' -Dzookeeper.sasl.clientconfig=Other"}
    assert system_properties(env) == {"java.security.auth.login.config": "/etc/kafka/jaas file.conf",
                                      "zookeeper.sasl.clientconfig": "Other"}
    assert system_properties({}) == {}


def test_login_from_settings_or_kafka_opts(tmp_path: Path) -> None:
    f = tmp_path / "jaas.conf"
    f.write_text(JAAS)
    s = zk_client_security({"java.security.auth.login.config": str(f)}, {})
    assert s.sasl_options() == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "zk-secret"}
    assert not s.set_acl
    env = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={f} -Dzookeeper.sasl.clientconfig=Other"}
    s = zk_client_security({}, env, set_acl=True)
    assert (s.username, s.password, s.set_acl) == ("x", "y", True)
    # a broker setting wins over KAFKA_OPTS; zookeeper.sasl.client=false turns SASL off
    assert zk_client_security({"zookeeper.sasl.clientconfig": "Client"}, env).username == "kafka"
    assert zk_client_security({"zookeeper.sasl.client": "false"}, env).sasl_options() is None
    # no Client section: no SASL
    assert zk_client_security({"zookeeper.sasl.clientconfig": "Missing"}, env).sasl is False
    assert zk_client_security({}, {}).sasl is False


def test_login_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true"):
        zk_client_security({}, {}, set_acl=True)
    with pytest.raises(ConfigError, match="cannot read"):
        zk_client_security({"java.security.auth.login.config": str(tmp_path / "absent")}, {})
    krb = tmp_path / "krb.conf"
    krb.write_text('Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };')
    with pytest.raises(ConfigError, match="Krb5LoginModule is not implemented"):
        zk_client_security({"java.security.auth.login.config": str(krb)}, {})
    nopw = tmp_path / "nopw.conf"
    nopw.write_text('Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="k"; };')
    with pytest.raises(ConfigError, match="needs username and password"):
        zk_client_security({"java.security.auth.login.config": str(nopw)}, {})


def test_default_acls_are_kafkas() -> None:
    assert default_acls("/brokers/topics/t", False) == (WORLD_ALL,)
    assert default_acls("/brokers/topics/t", True) == (CREATOR_ALL, WORLD_READ)
    assert default_acls("/kafka-acl/Topic/t", True) == (CREATOR_ALL, WORLD_READ)
    for p in ("/config/users", "/config/users/alice", "/config/brokers/1", "/delegation_token/tokens/x"):
        assert sensitive_path(p)
        assert default_acls(p, True) == (CREATOR_ALL,)
    assert not sensitive_path("/config/usersx")
    assert not sensitive_path("/config/topics/t")
    assert default_acls("/consumers", True) == (WORLD_ALL,)
