"""`tombstone verifier ...`: run the verifier service."""

from __future__ import annotations

import asyncio

import click

from services.core.env_cli import env_command
from services.core.version import version_option


@click.group()
@version_option("tombstone verifier")
def verifier() -> None:
    """The verifier: decides DELETE, SKIP or RETRY for each pending deletion."""


@verifier.command()
def serve() -> None:
    """Serve the Verifier gRPC API (configured by TOMBSTONE_* variables)."""
    from services.core.service_main import run_service
    from services.verifier.__main__ import main

    run_service("verifier", lambda: asyncio.run(main()))


verifier.add_command(env_command("verifier"))
