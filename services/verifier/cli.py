"""`tombstone verifier ...`: run the verifier service."""

from __future__ import annotations

import asyncio

import click

from services.core.config import describe_env


@click.group()
def verifier() -> None:
    """The verifier: decides DELETE, SKIP or RETRY for each pending deletion."""


@verifier.command()
def serve() -> None:
    """Serve the Verifier gRPC API (configured by TOMBSTONE_* variables)."""
    from services.core.peer_settings import refuse_on_config_error
    from services.verifier.__main__ import main

    refuse_on_config_error("verifier", lambda: asyncio.run(main()))


@verifier.command("env")
def env() -> None:
    """List the TOMBSTONE_VERIFIER_* variables and what they mean."""
    for name, text in describe_env().items():
        if name.startswith("TOMBSTONE_VERIFIER_"):
            click.echo(f"{name}\t{text}")
