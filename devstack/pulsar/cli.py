"""`tombstone devstack broker`: run the devstack Pulsar broker in the foreground."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click

from .broker import BrokerConfig
from .security import BrokerSecurity, SecureFiles
from .server import serve


@click.command("broker")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--advertised-host",
    default=None,
    help="Host named in lookup answers (default: --host, or the address the client reached).",
)
@click.option("--port", default=6650, show_default=True, help="Binary protocol port (0: any).")
@click.option("--admin-port", default=8080, show_default=True, help="Admin HTTP port (0: any).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep topics and cursors here across restarts (in memory when omitted).",
)
@click.option("--auto-create-namespaces", is_flag=True, help="Accept topics in any namespace.")
@click.option("--namespace", "namespaces", multiple=True, help="Extra namespace (tenant/ns).")
@click.option("--keepalive", default=30.0, show_default=True, help="Seconds between broker PINGs.")
@click.option(
    "--secure-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Serve TLS (pulsar+ssl, https) and require authentication (token, OAuth2, TLS), with "
    "a test CA, keys, a token and OAuth2 credentials made in this directory if absent.",
)
@click.option(
    "--issuer-port",
    default=0,
    show_default=True,
    help="Port of the OAuth2 issuer run with --secure-dir (0: any).",
)
@click.option(
    "--issuer-token-lifetime",
    default=3600.0,
    show_default=True,
    help="Seconds an access token from the issuer lives.",
)
def broker(
    host: str,
    advertised_host: str | None,
    port: int,
    admin_port: int,
    data_dir: Path | None,
    auto_create_namespaces: bool,
    namespaces: tuple[str, ...],
    keepalive: float,
    secure_dir: Path | None,
    issuer_port: int,
    issuer_token_lifetime: float,
) -> None:
    """Run a Pulsar-compatible broker for the local stack and the tests."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    config = BrokerConfig(
        host=host,
        advertised_host=advertised_host,
        port=port,
        admin_port=admin_port,
        data_dir=data_dir,
        namespaces=(*BrokerConfig().namespaces, *namespaces),
        auto_create_namespaces=auto_create_namespaces,
        keepalive_seconds=keepalive,
        security=_security(secure_dir, issuer_token_lifetime),
        issuer_port=issuer_port,
    )
    asyncio.run(serve(config))


def _security(directory: Path | None, token_lifetime: float) -> BrokerSecurity | None:
    if directory is None:
        return None
    files = SecureFiles.create(directory)
    return BrokerSecurity.from_files(files, token_lifetime=token_lifetime)
