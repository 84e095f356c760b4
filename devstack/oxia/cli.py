"""`tombstone devstack oxia`: run the devstack Oxia server in the foreground."""

from __future__ import annotations

import asyncio
import signal

import click

from .server import DEFAULT_NAMESPACE, MAX_VERSION_ID, OxiaServer


@click.command("oxia")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--advertised-host",
    default=None,
    help="Host named as the shards' leader in assignments (default: --host).",
)
@click.option("--port", default=6648, show_default=True, help="gRPC port (0: any).")
@click.option(
    "--shards",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Shard count of each namespace.",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    help=f"A namespace served, with shards of its own; repeat for several "
    f"[default: {DEFAULT_NAMESPACE}].",
)
@click.option(
    "--first-version-id",
    default=0,
    show_default=True,
    type=click.IntRange(min=0, max=MAX_VERSION_ID),
    help="Version id of each shard's first put (a high one stands for a busy server's).",
)
def oxia(
    host: str,
    advertised_host: str | None,
    port: int,
    shards: int,
    namespaces: tuple[str, ...],
    first_version_id: int,
) -> None:
    """Run an in-memory Oxia server (its namespaces, every shard led here) until Ctrl-C or
    SIGTERM (exit 0)."""
    if len(set(namespaces)) != len(namespaces):
        raise click.BadParameter("a namespace is named twice", param_hint="--namespace")
    server = OxiaServer(
        host=host,
        port=port,
        shards=shards,
        namespaces=namespaces or (DEFAULT_NAMESPACE,),
        advertised_host=advertised_host,
        first_version_id=first_version_id,
    )
    try:
        asyncio.run(serve(server))
    except OSError as exc:
        raise click.ClickException(f"Oxia did not start: {exc}") from None
    click.echo("Oxia stopped")


async def serve(server: OxiaServer) -> None:
    """Serve until SIGTERM or SIGINT; print one readiness line with the bound address."""
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    names = server.service.namespaces
    # One namespace keeps the line it always had; several are named, each with its shards.
    listed = "" if len(names) == 1 else f" namespaces={','.join(names)}"
    click.echo(f"READY address={server.address} shards={len(server.service.shards)}{listed}")
    try:
        await stop.wait()
    finally:
        await server.stop()
