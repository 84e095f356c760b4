"""Settings come from TOMBSTONE_* variables; bad values name the variable."""

from __future__ import annotations

import functools
import json
from datetime import timedelta
from pathlib import Path

import pytest

from services.core.config import (
    AuthConfig,
    ClientConfig,
    GrpcServerConfig,
    LogConfig,
    MetricsConfig,
    Principal,
    PulsarConfig,
    PulsarSecurity,
    S3Config,
    TlsServerConfig,
    ZooKeeperConfig,
    describe_env,
    unknown_variables,
)
from services.core.errors import ConfigError


def test_defaults_from_an_empty_environment() -> None:
    """With nothing set, every piece takes its documented default."""
    expected = (
        GrpcServerConfig(port=50051),
        MetricsConfig(port=9101),
        LogConfig(),
        ZooKeeperConfig(),
        PulsarConfig(),
        S3Config(),
    )
    actual = (
        GrpcServerConfig.from_env({}, default_port=50051),
        MetricsConfig.from_env({}, default_port=9101),
        LogConfig.from_env({}),
        ZooKeeperConfig.from_env({}),
        PulsarConfig.from_env({}),
        S3Config.from_env({}),
    )
    assert expected == actual


def test_system_topic_defaults() -> None:
    """The system, retry and dead-letter topics default to the PIP-186 names."""
    base = "persistent://pulsar/system/__ledger_deletion"
    config = PulsarConfig.from_env({})
    assert (base, f"{base}-RETRY", f"{base}-DLQ") == (
        config.topic,
        config.retry_topic,
        config.dlq_topic,
    )


def test_every_server_variable(tmp_path: Path) -> None:
    """Each gRPC, TLS and auth variable lands in its field."""
    cert, key, ca = (tmp_path / name for name in ("cert.pem", "key.pem", "ca.pem"))
    for path in (cert, key, ca):
        path.write_text("x")
    env = {
        "TOMBSTONE_GRPC_HOST": "0.0.0.0",
        "TOMBSTONE_GRPC_PORT": "6000",
        "TOMBSTONE_GRPC_GRACE_PERIOD": "1500ms",
        "TOMBSTONE_GRPC_MAX_MESSAGE_BYTES": "2048",
        "TOMBSTONE_GRPC_TLS_CERT_FILE": str(cert),
        "TOMBSTONE_GRPC_TLS_KEY_FILE": str(key),
        "TOMBSTONE_GRPC_TLS_CLIENT_CA_FILE": str(ca),
        "TOMBSTONE_GRPC_TLS_REQUIRE_CLIENT_CERT": "yes",
        "TOMBSTONE_AUTH_TOKENS": "t1 broker;t2 deleter,admin ops",
    }
    expected = GrpcServerConfig(
        host="0.0.0.0",
        port=6000,
        grace_period=timedelta(milliseconds=1500),
        max_message_bytes=2048,
        tls=TlsServerConfig(cert, key, ca, True),
        auth=AuthConfig(
            enabled=True,
            tokens={
                "t1": Principal("broker", frozenset({"broker"})),
                "t2": Principal("ops", frozenset({"deleter", "admin"})),
            },
        ),
    )
    assert expected == GrpcServerConfig.from_env(env, default_port=1)


def test_every_backend_variable() -> None:
    """Each ZooKeeper, Pulsar, S3, metrics and log variable lands in its field."""
    env = {
        "TOMBSTONE_ZOOKEEPER_SERVERS": "zk1:2181,zk2:2181",
        "TOMBSTONE_ZOOKEEPER_CHROOT": "/pulsar",
        "TOMBSTONE_ZOOKEEPER_SESSION_TIMEOUT": "15s",
        "TOMBSTONE_ZOOKEEPER_OPERATION_TIMEOUT": "2",
        "TOMBSTONE_PULSAR_SERVICE_URL": "pulsar+ssl://broker:6651",
        "TOMBSTONE_PULSAR_AUTH_TOKEN": "jwt",
        "TOMBSTONE_PULSAR_TOPIC": "persistent://a/b/c",
        "TOMBSTONE_PULSAR_RETRY_TOPIC": "persistent://a/b/r",
        "TOMBSTONE_PULSAR_DLQ_TOPIC": "persistent://a/b/d",
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": "4",
        "TOMBSTONE_PULSAR_OPERATION_TIMEOUT": "1m",
        "TOMBSTONE_S3_ENDPOINT_URL": "http://127.0.0.1:9000",
        "TOMBSTONE_S3_REGION": "eu-west-1",
        "TOMBSTONE_S3_ACCESS_KEY_ID": "id",
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": "secret",
        "TOMBSTONE_S3_ALLOWED_BUCKETS": "a, b,",
        "TOMBSTONE_METRICS_HOST": "0.0.0.0",
        "TOMBSTONE_METRICS_PORT": "9100",
        "TOMBSTONE_LOG_LEVEL": "DEBUG",
        "TOMBSTONE_LOG_FORMAT": "console",
    }
    expected = (
        ZooKeeperConfig(
            "zk1:2181,zk2:2181", "/pulsar", timedelta(seconds=15), timedelta(seconds=2)
        ),
        PulsarConfig(
            "pulsar+ssl://broker:6651",
            "persistent://a/b/c",
            "persistent://a/b/r",
            "persistent://a/b/d",
            4,
            timedelta(minutes=1),
            PulsarSecurity(auth_plugin="token", token="jwt"),
        ),
        S3Config("http://127.0.0.1:9000", "eu-west-1", "id", "secret", frozenset({"a", "b"})),
        MetricsConfig("0.0.0.0", 9100),
        LogConfig("debug", "console"),
    )
    actual = (
        ZooKeeperConfig.from_env(env),
        PulsarConfig.from_env(env),
        S3Config.from_env(env),
        MetricsConfig.from_env(env, default_port=9101),
        LogConfig.from_env(env),
    )
    assert expected == actual


def test_client_variables() -> None:
    """A caller's settings for a target service use the target's name as a prefix."""
    env = {
        "TOMBSTONE_VERIFIER_ADDRESS": "verifier:7000",
        "TOMBSTONE_VERIFIER_TOKEN": "tok",
        "TOMBSTONE_VERIFIER_TIMEOUT": "3s",
    }
    expected = ClientConfig("verifier:7000", "tok", timeout=timedelta(seconds=3))
    actual = ClientConfig.from_env(env, target="verifier", default_address="x:1")
    assert expected == actual


def test_tokens_file_in_json(tmp_path: Path) -> None:
    """The tokens file may be JSON with subjects and roles."""
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"s3cr3t": {"subject": "broker-1", "roles": ["broker"]}}))
    config = AuthConfig.from_env({"TOMBSTONE_AUTH_TOKENS_FILE": str(path)})
    expected = AuthConfig(True, {"s3cr3t": Principal("broker-1", frozenset({"broker"}))})
    assert expected == config


def test_tokens_file_in_lines(tmp_path: Path) -> None:
    """The tokens file may list `token role[,role]` lines with comments."""
    path = tmp_path / "tokens"
    path.write_text("# broker\nabc broker\n\ndef deleter,admin\n")
    tokens = AuthConfig.from_env({"TOMBSTONE_AUTH_TOKENS_FILE": str(path)}).tokens
    assert {"abc": frozenset({"broker"}), "def": frozenset({"deleter", "admin"})} == {
        token: principal.roles for token, principal in tokens.items()
    }


def test_tokens_are_hidden_from_repr() -> None:
    """Secrets never appear in a config's repr (which may be logged)."""
    config = GrpcServerConfig.from_env({"TOMBSTONE_AUTH_TOKENS": "hush broker"}, default_port=1)
    assert "hush" not in repr(config)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TOMBSTONE_GRPC_PORT", "http"),
        ("TOMBSTONE_GRPC_PORT", "70000"),
        ("TOMBSTONE_GRPC_GRACE_PERIOD", "soon"),
        ("TOMBSTONE_GRPC_MAX_MESSAGE_BYTES", "10"),
        ("TOMBSTONE_GRPC_TLS_REQUIRE_CLIENT_CERT", "maybe"),
        ("TOMBSTONE_GRPC_TLS_CERT_FILE", "/nonexistent/cert.pem"),
        ("TOMBSTONE_AUTH_TOKENS", "lonely"),
        ("TOMBSTONE_AUTH_TOKENS_FILE", "/nonexistent/tokens"),
        ("TOMBSTONE_AUTH_ENABLED", "true"),
    ],
)
def test_bad_server_values_name_the_variable(variable: str, value: str) -> None:
    """A malformed or inconsistent value raises ConfigError naming the variable."""
    env = {variable: value}
    if variable == "TOMBSTONE_GRPC_TLS_CERT_FILE":
        env["TOMBSTONE_GRPC_TLS_KEY_FILE"] = "/nonexistent/key.pem"
    with pytest.raises(ConfigError) as caught:
        GrpcServerConfig.from_env(env, default_port=1)
    assert variable == caught.value.variable


@pytest.mark.parametrize(
    ("factory", "variable", "value"),
    [
        (ZooKeeperConfig.from_env, "TOMBSTONE_ZOOKEEPER_CHROOT", "pulsar/"),
        (ZooKeeperConfig.from_env, "TOMBSTONE_ZOOKEEPER_SESSION_TIMEOUT", "-1"),
        (PulsarConfig.from_env, "TOMBSTONE_PULSAR_SERVICE_URL", "http://broker"),
        (PulsarConfig.from_env, "TOMBSTONE_PULSAR_TOPIC_PARTITIONS", "-2"),
        (LogConfig.from_env, "TOMBSTONE_LOG_LEVEL", "loud"),
        (
            functools.partial(MetricsConfig.from_env, default_port=9101),
            "TOMBSTONE_METRICS_PORT",
            "-1",
        ),
    ],
)
def test_bad_backend_values_name_the_variable(factory, variable: str, value: str) -> None:
    """Each backend piece reports the variable it could not use."""
    with pytest.raises(ConfigError) as caught:
        factory({variable: value})
    assert variable == caught.value.variable


def test_s3_secret_without_key_id_names_the_missing_variable() -> None:
    """Credentials go in pairs: a secret alone names the missing key id."""
    with pytest.raises(ConfigError) as caught:
        S3Config.from_env({"TOMBSTONE_S3_SECRET_ACCESS_KEY": "only-the-secret"})
    assert caught.value.variable == "TOMBSTONE_S3_ACCESS_KEY_ID"


def test_secret_values_are_not_echoed_in_errors() -> None:
    """An unparsable token table does not print the token in the error."""
    with pytest.raises(ConfigError) as caught:
        AuthConfig.from_env({"TOMBSTONE_AUTH_TOKENS": "topsecret a b c"})
    assert "topsecret" not in str(caught.value)


def test_describe_env_lists_every_variable_read() -> None:
    """The registry holds every variable used above, all with the TOMBSTONE_ prefix."""
    names = set(describe_env())
    expected = {
        "TOMBSTONE_GRPC_PORT",
        "TOMBSTONE_AUTH_TOKENS_FILE",
        "TOMBSTONE_ZOOKEEPER_SERVERS",
        "TOMBSTONE_PULSAR_DLQ_TOPIC",
        "TOMBSTONE_S3_ALLOWED_BUCKETS",
        "TOMBSTONE_VERIFIER_ADDRESS",
    }
    assert (set(), True) == (
        expected - names,
        all(name.startswith("TOMBSTONE_") for name in names),
    )


def test_unknown_variables_are_reported() -> None:
    """A misspelt TOMBSTONE_ variable is flagged; other variables are ignored."""
    env = {"TOMBSTONE_GRPC_PORT": "1", "TOMBSTONE_GRPC_PROT": "1", "HOME": "/root"}
    assert unknown_variables(env) == ["TOMBSTONE_GRPC_PROT"]


def test_metrics_on_by_default_at_the_service_port_and_off_at_zero() -> None:
    """`/metrics` is served at the service's own port unless the variable says, 0 is off."""
    expected = (9103, 0, 9200)
    actual = tuple(
        MetricsConfig.from_env(env, default_port=9103).port
        for env in ({}, {"TOMBSTONE_METRICS_PORT": "0"}, {"TOMBSTONE_METRICS_PORT": "9200"})
    )
    assert expected == actual
