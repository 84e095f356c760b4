"""Settings of calls from one service to another (e.g. the deleter calling the verifier).

Re-exported by `services.core.config`; the variables are `TOMBSTONE_<TARGET>_*`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from services.core._env import Setting, parse_duration, parse_optional_str, parse_str, setting
from services.core.errors import ConfigError


@dataclass(frozen=True)
class ClientConfig:
    """How one service calls another (e.g. the deleter calling the verifier)."""

    address: str
    """`host:port` of the target service."""
    token: str | None = field(default=None, repr=False)
    """Bearer token sent as `authorization` metadata; None sends none."""
    tls_ca_file: Path | None = None
    """CA that signs the server certificate; None dials plaintext."""
    tls_cert_file: Path | None = None
    """Client certificate for mutual TLS."""
    tls_key_file: Path | None = None
    """Private key of `tls_cert_file`."""
    timeout: timedelta = timedelta(seconds=10)
    """Default deadline of one call."""

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] = os.environ, *, target: str, default_address: str
    ) -> ClientConfig:
        """Read `TOMBSTONE_<TARGET>_` + ADDRESS, TOKEN, TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE,
        TIMEOUT."""
        s = client_settings(target, default_address)
        cert, key = s["TLS_CERT_FILE"].read(environ), s["TLS_KEY_FILE"].read(environ)
        if (cert is None) != (key is None):
            raise ConfigError(s["TLS_CERT_FILE"].name, "client cert and key go together")
        ca = s["TLS_CA_FILE"].read(environ)
        return cls(
            address=s["ADDRESS"].read(environ),
            token=s["TOKEN"].read(environ),
            tls_ca_file=Path(ca) if ca else None,
            tls_cert_file=Path(cert) if cert else None,
            tls_key_file=Path(key) if key else None,
            timeout=s["TIMEOUT"].read(environ),
        )


def client_settings(target: str, default_address: str) -> dict[str, Setting[Any]]:
    """Declare (idempotently) the settings of calls to `target`, e.g. `"VERIFIER"`.

    Call it at import time of the calling service's `config.py` so `describe_env()` lists them.
    """
    up = target.upper()
    # The help names the target in lower case whatever case the caller used, so that
    # "VERIFIER" and "verifier" declare the same settings instead of conflicting ones.
    target = target.lower()
    return {
        "ADDRESS": setting(
            f"{up}_ADDRESS", parse_str, default_address, f"{target} host:port.", format="host:port"
        ),
        "TOKEN": setting(
            f"{up}_TOKEN",
            parse_optional_str,
            None,
            f"Token for {target}.",
            secret=True,
            format="token",
        ),
        "TLS_CA_FILE": setting(
            f"{up}_TLS_CA_FILE",
            parse_optional_str,
            None,
            f"CA of {target}'s certificate.",
            format="path",
        ),
        "TLS_CERT_FILE": setting(
            f"{up}_TLS_CERT_FILE",
            parse_optional_str,
            None,
            f"Client cert for {target}.",
            format="path",
        ),
        "TLS_KEY_FILE": setting(
            f"{up}_TLS_KEY_FILE",
            parse_optional_str,
            None,
            f"Client key for {target}.",
            format="path",
        ),
        "TIMEOUT": setting(
            f"{up}_TIMEOUT", parse_duration, timedelta(seconds=10), f"Deadline of {target} calls."
        ),
    }
