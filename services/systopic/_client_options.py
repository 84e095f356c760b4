"""The `pulsar.Client` arguments of a `PulsarConfig`: TLS trust, hostname verification, the
client certificate and the authentication plugin (`services.core.pulsar_security`)."""

from __future__ import annotations

from typing import Any

import pulsar

from services.core.config import PulsarConfig
from services.core.pulsar_security import PulsarSecurity


def authentication(security: PulsarSecurity) -> pulsar.Authentication | None:
    if security.auth_plugin == "token":
        supplier = security.token_supplier()
        assert supplier is not None
        # A callable: the client asks again on each (re)connection, so a rotated token file
        # is picked up without a restart.
        return pulsar.AuthenticationToken(supplier)
    if security.auth_plugin == "oauth2":
        assert security.oauth2 is not None
        return pulsar.AuthenticationOauth2(security.oauth2.auth_params())
    if security.auth_plugin == "tls":
        assert security.client_cert is not None
        assert security.client_key is not None
        return pulsar.AuthenticationTLS(str(security.client_cert), str(security.client_key))
    return None


def client_options(config: PulsarConfig) -> dict[str, Any]:
    """Keyword arguments of `pulsar.Client` (and `pulsar.asyncio.Client`) besides the URL."""
    security = config.security
    options: dict[str, Any] = {
        "authentication": authentication(security),
        "operation_timeout_seconds": max(1, int(config.operation_timeout.total_seconds())),
        "logger": pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    }
    if config.service_url.startswith("pulsar+ssl://"):
        options["tls_validate_hostname"] = security.hostname_verification
        options["tls_allow_insecure_connection"] = False
        if security.trust_certs is not None:
            options["tls_trust_certs_file_path"] = str(security.trust_certs)
        if security.client_cert is not None and security.client_key is not None:
            options["tls_certificate_file_path"] = str(security.client_cert)
            options["tls_private_key_file_path"] = str(security.client_key)
    return options


def refusal_hint(config: PulsarConfig) -> str:
    """Appended to the client's connection failures when it authenticates: a broker refusing
    the credential closes the connection, which the client reports as a timeout."""
    plugin = config.security.auth_plugin
    if plugin == "none":
        return ""
    return (
        f" (with TOMBSTONE_PULSAR_AUTH_PLUGIN={plugin}, a refused credential looks the same: "
        "check the broker's log and the credential's settings)"
    )
