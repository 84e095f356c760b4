"""A server bound beyond loopback needs authentication, or an explicit
`TOMBSTONE_AUTH_ENABLED=false` that is then warned about at start and exported as
`tombstone_auth_disabled_exposed`."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from devstack.fake_verifier import METHOD_ROLES, add_fake_verifier
from services.core.config import AuthConfig, GrpcServerConfig, is_loopback
from services.core.errors import ConfigError, ExposedWithoutAuth
from services.core.grpc_server import ServiceRunner

LOOPBACK = ["127.0.0.1", "127.1.2.3", "127.255.255.254", "::1", "[::1]", "localhost", "LocalHost"]
EXPOSED = [
    "0.0.0.0",
    "::",
    "[::]",
    "10.0.0.5",
    "192.168.1.10",
    "128.0.0.1",
    "::2",
    "fe80::1",
    # Mapped and scoped forms of loopback are outside the short list that counts as loopback.
    "::ffff:127.0.0.1",
    "::1%lo",
    "tombstone.example.com",
    "my-host",
    "",
    "127.0.0.1:50051",
    "not an address",
]
TOKENS = {"TOMBSTONE_AUTH_TOKENS": "s3cr3t broker"}


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_hosts(host: str) -> None:
    """127.0.0.0/8, ::1 (with or without brackets) and localhost are loopback."""
    assert is_loopback(host) is True


@pytest.mark.parametrize("host", EXPOSED)
def test_every_other_host_counts_as_exposed(host: str) -> None:
    """Wildcards, other addresses, names and anything unparsable are not: nothing is
    resolved."""
    assert is_loopback(host) is False


def load(host: str, **env: str) -> GrpcServerConfig:
    return GrpcServerConfig.from_env({"TOMBSTONE_GRPC_HOST": host, **env}, default_port=1)


@pytest.mark.parametrize("tokens", [{}, TOKENS], ids=["no tokens", "tokens"])
@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_starts_with_or_without_tokens_and_is_not_flagged(
    host: str, tokens: dict[str, str]
) -> None:
    config = load(host, **tokens)
    assert (config.auth.enabled, config.unauthenticated_exposure) == (bool(tokens), False)


@pytest.mark.parametrize("env", [TOKENS, {**TOKENS, "TOMBSTONE_AUTH_ENABLED": "true"}])
def test_exposed_with_tokens_starts_and_is_not_flagged(env: dict[str, str]) -> None:
    config = load("0.0.0.0", **env)
    assert (config.auth.enabled, config.unauthenticated_exposure) == (True, False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "my-host"])
def test_exposed_without_tokens_and_auth_unset_is_refused(host: str) -> None:
    """The refusal names TOMBSTONE_AUTH_ENABLED and the three ways out."""
    with pytest.raises(ExposedWithoutAuth) as refused:
        load(host)
    error = refused.value
    expected = (
        "TOMBSTONE_AUTH_ENABLED",
        f"the gRPC server would listen on {host} (TOMBSTONE_GRPC_HOST), which is not "
        "loopback, with no authentication; set TOMBSTONE_AUTH_TOKENS or "
        "TOMBSTONE_AUTH_TOKENS_FILE, bind 127.0.0.1, or set TOMBSTONE_AUTH_ENABLED=false "
        "explicitly",
        True,
    )
    assert expected == (error.variable, error.problem, isinstance(error, ConfigError))


@pytest.mark.parametrize("tokens", [{}, TOKENS], ids=["no tokens", "tokens"])
@pytest.mark.parametrize("value", ["false", "no", "0", "off"])
def test_exposed_with_auth_explicitly_off_starts_and_is_flagged(
    value: str, tokens: dict[str, str]
) -> None:
    """An explicit false is the operator's choice: allowed, flagged (tokens or not, since
    they are then ignored)."""
    config = load("0.0.0.0", TOMBSTONE_AUTH_ENABLED=value, **tokens)
    assert (config.auth.enabled, config.auth.explicit, config.unauthenticated_exposure) == (
        False,
        True,
        True,
    )


def test_loopback_with_auth_explicitly_off_is_not_flagged() -> None:
    config = load("127.0.0.1", TOMBSTONE_AUTH_ENABLED="false")
    assert config.unauthenticated_exposure is False


def tls_files(tmp_path: Path) -> dict[str, str]:
    """TLS settings whose files exist (they are not read when the configuration is built)."""
    paths = {name: tmp_path / f"{name}.pem" for name in ("cert", "key", "ca")}
    for path in paths.values():
        path.write_text("x")
    return {
        "TOMBSTONE_GRPC_TLS_CERT_FILE": str(paths["cert"]),
        "TOMBSTONE_GRPC_TLS_KEY_FILE": str(paths["key"]),
        "TOMBSTONE_GRPC_TLS_CLIENT_CA_FILE": str(paths["ca"]),
    }


@pytest.mark.parametrize("auth", [{}, {"TOMBSTONE_AUTH_ENABLED": "false"}], ids=["unset", "off"])
def test_required_client_certificates_count_as_authentication(
    tmp_path: Path, auth: dict[str, str]
) -> None:
    """Mutual TLS authenticates every caller: an exposed server needs no token table then,
    and is not flagged."""
    env = {**tls_files(tmp_path), "TOMBSTONE_GRPC_TLS_REQUIRE_CLIENT_CERT": "true", **auth}
    config = load("0.0.0.0", **env)
    assert (config.authenticates, config.unauthenticated_exposure) == (True, False)


def test_tls_without_required_client_certificates_is_not_authentication(tmp_path: Path) -> None:
    """Server-only TLS encrypts but lets anyone call."""
    with pytest.raises(ExposedWithoutAuth):
        load("0.0.0.0", **tls_files(tmp_path))


def test_a_configuration_built_in_code_follows_the_same_rule() -> None:
    """No path around the check: building the dataclass directly is refused the same way,
    and an explicit off is accepted."""
    with pytest.raises(ExposedWithoutAuth):
        GrpcServerConfig(host="0.0.0.0")
    config = GrpcServerConfig(host="0.0.0.0", auth=AuthConfig(explicit=True))
    assert config.unauthenticated_exposure is True


def gauge(runner: ServiceRunner) -> float:
    [sample] = [
        s
        for m in runner.metrics.registry.collect()
        if m.name == "tombstone_auth_disabled_exposed"
        for s in m.samples
    ]
    return sample.value


async def start(config: GrpcServerConfig) -> tuple[ServiceRunner, list[MutableMapping[str, Any]]]:
    runner = ServiceRunner(
        name="fake", grpc=config, method_roles=METHOD_ROLES, handle_signals=False
    )
    add_fake_verifier(runner)
    with capture_logs() as logs:
        await runner.start()
    return runner, logs


async def test_explicitly_off_on_an_exposed_address_warns_at_start_and_sets_the_gauge() -> None:
    config = GrpcServerConfig(host="0.0.0.0", port=0, auth=AuthConfig(explicit=True))
    runner, logs = await start(config)
    try:
        warnings = [log for log in logs if log["event"] == "auth_disabled_on_exposed_address"]
        expected = [
            {
                "event": "auth_disabled_on_exposed_address",
                "log_level": "warning",
                "service": "fake",
                "host": "0.0.0.0",
                "port": runner.port,
            }
        ]
        assert (warnings, gauge(runner)) == (expected, 1.0)
    finally:
        await runner.shutdown()


async def test_loopback_without_auth_neither_warns_nor_sets_the_gauge() -> None:
    runner, logs = await start(GrpcServerConfig(port=0))
    try:
        events = [log["event"] for log in logs]
        assert ("auth_disabled_on_exposed_address" in events, gauge(runner)) == (False, 0.0)
    finally:
        await runner.shutdown()
