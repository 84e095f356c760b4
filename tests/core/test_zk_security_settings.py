"""Parsing of the `TOMBSTONE_ZOOKEEPER_*` security settings: every bad value names its
variable, and the password never appears in a message or a repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.zk_tls import make_tls_files
from services.core.config import ZooKeeperConfig
from services.core.errors import ConfigError
from services.core.zk_security import ZooKeeperRefused, ZooKeeperSecurity, ZooKeeperTls

USER = "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER"
PASSWORD = "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD"
PASSWORD_FILE = "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD_FILE"


def _refused(environ: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        ZooKeeperSecurity.from_env(environ)
    return err.value


def test_unset_means_no_authentication() -> None:
    """Without settings there is no identity, world reads and no TLS."""
    assert ZooKeeperSecurity.from_env({}) == ZooKeeperSecurity()
    assert ZooKeeperConfig.from_env({}).security.authenticated is False


def test_user_and_inline_password() -> None:
    """User and password are read; the password is hidden from repr."""
    security = ZooKeeperSecurity.from_env({USER: "tombstone", PASSWORD: "s3cret"})
    assert (security.digest_user, security.digest_password) == ("tombstone", "s3cret")
    assert "s3cret" not in repr(security)


def test_password_file_drops_the_trailing_newline(tmp_path: Path) -> None:
    """A mounted secret's file gives the password without its final newline."""
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    security = ZooKeeperSecurity.from_env({USER: "t", PASSWORD_FILE: str(secret)})
    assert security.digest_password == "from-file"


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({USER: "tombstone"}, PASSWORD),
        ({PASSWORD: "x"}, USER),
        ({USER: "a:b", PASSWORD: "x"}, USER),
        ({USER: "t", PASSWORD: "x", PASSWORD_FILE: "/etc/hostname"}, PASSWORD_FILE),
        ({USER: "t", PASSWORD_FILE: "/nonexistent/password"}, PASSWORD_FILE),
        ({"TOMBSTONE_ZOOKEEPER_ACL_READ": "everyone"}, "TOMBSTONE_ZOOKEEPER_ACL_READ"),
        ({"TOMBSTONE_ZOOKEEPER_SASL": "maybe"}, "TOMBSTONE_ZOOKEEPER_SASL"),
        ({"TOMBSTONE_ZOOKEEPER_TLS_CA_FILE": "/etc/hostname"}, "TOMBSTONE_ZOOKEEPER_TLS_CA_FILE"),
        (
            {"TOMBSTONE_ZOOKEEPER_TLS": "true", "TOMBSTONE_ZOOKEEPER_TLS_CA_FILE": "/nope"},
            "TOMBSTONE_ZOOKEEPER_TLS_CA_FILE",
        ),
        (
            {
                "TOMBSTONE_ZOOKEEPER_TLS": "true",
                "TOMBSTONE_ZOOKEEPER_TLS_CERT_FILE": "/etc/hostname",
            },
            "TOMBSTONE_ZOOKEEPER_TLS_KEY_FILE",
        ),
    ],
)
def test_bad_values_name_their_variable(environ: dict[str, str], named: str) -> None:
    """Each inconsistent or malformed value is refused naming the variable to fix."""
    assert _refused(environ).variable == named


def test_empty_password_file_is_refused(tmp_path: Path) -> None:
    """An empty secret file is a mistake, not an empty password."""
    secret = tmp_path / "password"
    secret.write_text("\n")
    assert _refused({USER: "t", PASSWORD_FILE: str(secret)}).variable == PASSWORD_FILE


def test_tls_settings(tmp_path: Path) -> None:
    """TLS on with a CA file and hostname verification off."""
    ca = make_tls_files(tmp_path).ca
    environ = {
        "TOMBSTONE_ZOOKEEPER_TLS": "true",
        "TOMBSTONE_ZOOKEEPER_TLS_CA_FILE": str(ca),
        "TOMBSTONE_ZOOKEEPER_TLS_VERIFY_HOSTNAME": "false",
    }
    expected = ZooKeeperTls(ca_file=str(ca), verify_hostname=False)
    assert ZooKeeperSecurity.from_env(environ).tls == expected


def test_sasl_is_parsed_then_refused_naming_the_setting() -> None:
    """SASL parses (a well-formed wish) but cannot be honoured: `check` refuses it."""
    security = ZooKeeperSecurity.from_env({"TOMBSTONE_ZOOKEEPER_SASL": "true"})
    with pytest.raises(ZooKeeperRefused, match="TOMBSTONE_ZOOKEEPER_SASL=true"):
        security.check()


def test_a_ca_file_that_is_not_pem_is_named(tmp_path: Path) -> None:
    """A CA file that does not load is refused at start-up, naming the variable."""
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate")
    environ = {"TOMBSTONE_ZOOKEEPER_TLS": "true", "TOMBSTONE_ZOOKEEPER_TLS_CA_FILE": str(ca)}
    assert _refused(environ).variable == "TOMBSTONE_ZOOKEEPER_TLS_CA_FILE"
