"""The secured-Pulsar settings: what each combination means for the client and the admin
calls, and every refused combination naming the setting to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.core.config import PulsarConfig
from services.core.errors import ConfigError
from services.core.pulsar_security import OAuth2Credentials, PulsarSecurity
from services.systopic._client_options import client_options

TLS = "pulsar+ssl://broker:6651"
HTTPS = "https://broker:8443"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        "ca": tmp_path / "ca.pem",
        "cert": tmp_path / "client.pem",
        "key": tmp_path / "client.key",
        "token": tmp_path / "token",
        "credentials": tmp_path / "credentials.json",
    }
    for path in made.values():
        path.write_text("x")
    made["token"].write_text("file-token\n")
    made["credentials"].write_text(json.dumps({"client_id": "id", "client_secret": "s"}))
    return made


def _env(url: str = TLS, admin: str = HTTPS, **settings: str) -> dict[str, str]:
    env = {"TOMBSTONE_PULSAR_SERVICE_URL": url, "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": admin}
    env.update({f"TOMBSTONE_PULSAR_{name}": value for name, value in settings.items()})
    return env


def test_nothing_set_is_plain_and_unauthenticated() -> None:
    security = PulsarConfig.from_env({}).security
    assert (security, security.token_supplier()) == (PulsarSecurity(), None)


def test_tls_trust_and_hostname_verification_on_by_default(files: dict[str, Path]) -> None:
    config = PulsarConfig.from_env(_env(TLS_TRUST_CERTS_FILE_PATH=str(files["ca"])))
    options = client_options(config)
    assert (
        config.security.trust_certs,
        config.security.hostname_verification,
        options["tls_trust_certs_file_path"],
        options["tls_validate_hostname"],
        options["authentication"],
    ) == (files["ca"], True, str(files["ca"]), True, None)


def test_hostname_verification_can_be_turned_off() -> None:
    config = PulsarConfig.from_env(_env(TLS_ENABLE_HOSTNAME_VERIFICATION="false"))
    assert (
        config.security.hostname_verification,
        client_options(config)["tls_validate_hostname"],
    ) == (
        False,
        False,
    )


def test_a_token_alone_means_token_authentication() -> None:
    security = PulsarConfig.from_env(_env(AUTH_TOKEN="jwt")).security
    supplier = security.token_supplier()
    assert (security.auth_plugin, supplier() if supplier else None) == ("token", "jwt")


def test_a_token_file_is_read_at_each_use(files: dict[str, Path]) -> None:
    security = PulsarConfig.from_env(_env(AUTH_TOKEN_FILE=f"file://{files['token']}")).security
    supplier = security.token_supplier()
    assert supplier is not None
    first = supplier()
    files["token"].write_text("rotated")
    assert (security.auth_plugin, first, supplier()) == ("token", "file-token", "rotated")


def test_oauth2_reads_the_credentials_file(files: dict[str, Path]) -> None:
    security = PulsarConfig.from_env(
        _env(
            AUTH_PLUGIN="oauth2",
            OAUTH2_ISSUER_URL="https://issuer.example/",
            OAUTH2_PRIVATE_KEY=str(files["credentials"]),
            OAUTH2_AUDIENCE="urn:pulsar",
            OAUTH2_SCOPE="admin",
        )
    ).security
    expected = OAuth2Credentials(
        "https://issuer.example", files["credentials"], "id", "s", "urn:pulsar", "admin"
    )
    assert (security.oauth2, json.loads(expected.auth_params())) == (
        expected,
        {
            "issuer_url": "https://issuer.example",
            "private_key": str(files["credentials"]),
            "audience": "urn:pulsar",
            "scope": "admin",
        },
    )


def test_client_certificate_for_mutual_tls(files: dict[str, Path]) -> None:
    config = PulsarConfig.from_env(
        _env(
            AUTH_PLUGIN="tls",
            TLS_CERTIFICATE_FILE_PATH=str(files["cert"]),
            TLS_KEY_FILE_PATH=str(files["key"]),
        )
    )
    options = client_options(config)
    assert (options["tls_certificate_file_path"], options["tls_private_key_file_path"]) == (
        str(files["cert"]),
        str(files["key"]),
    )


REFUSED = [
    (
        "TLS_TRUST_CERTS_FILE_PATH",
        {"URL": "pulsar://b:6650", "ADMIN": "http://b:8080", "TLS_TRUST_CERTS_FILE_PATH": "{ca}"},
    ),
    (
        "TLS_ENABLE_HOSTNAME_VERIFICATION",
        {
            "URL": "pulsar://b:6650",
            "ADMIN": "http://b:8080",
            "TLS_ENABLE_HOSTNAME_VERIFICATION": "true",
        },
    ),
    ("TLS_TRUST_CERTS_FILE_PATH", {"TLS_TRUST_CERTS_FILE_PATH": "/nonexistent/ca.pem"}),
    ("TLS_KEY_FILE_PATH", {"TLS_CERTIFICATE_FILE_PATH": "{cert}"}),
    ("TLS_CERTIFICATE_FILE_PATH", {"TLS_KEY_FILE_PATH": "{key}"}),
    ("AUTH_PLUGIN", {"AUTH_PLUGIN": "kerberos"}),
    ("AUTH_TOKEN", {"AUTH_PLUGIN": "token"}),
    ("AUTH_TOKEN_FILE", {"AUTH_TOKEN": "jwt", "AUTH_TOKEN_FILE": "{token}"}),
    ("AUTH_TOKEN", {"AUTH_PLUGIN": "oauth2", "AUTH_TOKEN": "jwt"}),
    ("OAUTH2_ISSUER_URL", {"AUTH_PLUGIN": "oauth2", "OAUTH2_PRIVATE_KEY": "{credentials}"}),
    (
        "OAUTH2_ISSUER_URL",
        {
            "AUTH_PLUGIN": "oauth2",
            "OAUTH2_ISSUER_URL": "issuer",
            "OAUTH2_PRIVATE_KEY": "{credentials}",
        },
    ),
    ("OAUTH2_PRIVATE_KEY", {"AUTH_PLUGIN": "oauth2", "OAUTH2_ISSUER_URL": "https://i"}),
    (
        "OAUTH2_PRIVATE_KEY",
        {"AUTH_PLUGIN": "oauth2", "OAUTH2_ISSUER_URL": "https://i", "OAUTH2_PRIVATE_KEY": "{ca}"},
    ),
    ("OAUTH2_ISSUER_URL", {"OAUTH2_ISSUER_URL": "https://i"}),
    ("TLS_CERTIFICATE_FILE_PATH", {"AUTH_PLUGIN": "tls"}),
    (
        "AUTH_PLUGIN",
        {
            "URL": "pulsar://b:6650",
            "AUTH_PLUGIN": "tls",
            "TLS_CERTIFICATE_FILE_PATH": "{cert}",
            "TLS_KEY_FILE_PATH": "{key}",
        },
    ),
]


@pytest.mark.parametrize(("named", "settings"), REFUSED)
def test_refused_combinations_name_the_setting(
    files: dict[str, Path], named: str, settings: dict[str, str]
) -> None:
    values = {name: value.format(**files) for name, value in settings.items()}
    env = _env(values.pop("URL", TLS), values.pop("ADMIN", HTTPS), **values)
    with pytest.raises(ConfigError) as refused:
        PulsarConfig.from_env(env)
    assert refused.value.args[0].startswith(f"TOMBSTONE_PULSAR_{named}")


def test_a_refused_token_is_never_shown() -> None:
    with pytest.raises(ConfigError) as refused:
        PulsarConfig.from_env(_env(AUTH_PLUGIN="oauth2", AUTH_TOKEN="s3cr3t-token"))
    assert "s3cr3t" not in str(refused.value)
