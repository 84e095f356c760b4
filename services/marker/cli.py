"""`tombstone marker serve` and `tombstone mark` (one MarkLedgers call, for operators)."""

from __future__ import annotations

import asyncio
import dataclasses
import sys

import click

from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig
from services.core.env_cli import env_command
from services.core.errors import TombstoneError
from services.core.json_output import message_json
from services.core.version import version_option
from services.marker.config import DEFAULT_ADDRESS
from services.marker.owners import resolve_owner
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

_COMPONENTS = {
    "ml": _pd.MANAGED_LEDGER,
    "cursor": _pd.MANAGED_CURSOR,
    "schema": _pd.SCHEMA_STORAGE,
    "compacted": _pd.COMPACTED_LEDGER,
    "bucket": _pd.DELAYED_INDEX_BUCKET,
}
_MODES = {"marker": _mk.MARKER_WRITES, "caller": _mk.CALLER_WRITES}
_SOURCES = {"operator": _pd.OPERATOR, "broker": _pd.BROKER, "reconciler": _pd.RECONCILER}


@click.group()
@version_option("tombstone marker")
def marker() -> None:
    """The marker service (phase 1: record intents, then unlink)."""


@marker.command()
@click.option(
    "--follow",
    is_flag=True,
    help="Also run the follower (as TOMBSTONE_MARKER_FOLLOW=true): OBSERVED PDLIs for every "
    "unlink an unmodified broker makes.",
)
def serve(follow: bool) -> None:
    """Serve the Marker gRPC API (settings from TOMBSTONE_* variables)."""
    import os

    from services.core.service_main import run_service
    from services.marker.__main__ import main

    if follow:
        os.environ["TOMBSTONE_MARKER_FOLLOW"] = "true"
    run_service("marker", main)


@click.command()
@click.argument("ledger_ids", nargs=-1, type=int, required=True)
@click.option(
    "--component",
    type=click.Choice(sorted(_COMPONENTS)),
    default="ml",
    show_default=True,
    help="Owner of the ledgers: a managed ledger's list, a cursor, or a schema.",
)
@click.option("--topic", "topic_name", default="", help="Topic: persistent://tenant/ns/topic.")
@click.option("--ml", "ml_name", default="", help="Managed-ledger name (tenant/ns/persistent/x).")
@click.option(
    "--cursor",
    "cursor_name",
    default="",
    help="Cursor name (cursor, bucket; compacted: __compaction).",
)
@click.option("--schema-id", default="", help="Schema id tenant/ns/topic (SCHEMA_STORAGE).")
@click.option(
    "--mode",
    type=click.Choice(sorted(_MODES)),
    default="marker",
    show_default=True,
    help="Who unlinks the ledgers from the owner znode: the marker, or the caller afterwards.",
)
@click.option(
    "--expected-version",
    type=int,
    default=None,
    help="Owner znode version (integer); fail unless the owner is at it.",
)
@click.option(
    "--new-cursor-ledger-id",
    type=int,
    default=None,
    help="Cursor's ledger id afterwards (MANAGED_CURSOR).",
)
@click.option(
    "--source",
    type=click.Choice(sorted(_SOURCES)),
    default="operator",
    show_default=True,
    help="Who asks for the deletion (recorded in every PDLI).",
)
@click.option("--address", default=None, help="Marker host:port (TOMBSTONE_MARKER_ADDRESS).")
@click.option("--json", "as_json", is_flag=True, help="Print the response as JSON.")
def mark(
    ledger_ids: tuple[int, ...],
    component: str,
    topic_name: str,
    ml_name: str,
    cursor_name: str,
    schema_id: str,
    mode: str,
    expected_version: int | None,
    new_cursor_ledger_id: int | None,
    source: str,
    address: str | None,
    as_json: bool,
) -> None:
    """Mark LEDGER_IDS of one owner for deletion and print the result."""
    request = _mk.MarkLedgersRequest(
        component=_COMPONENTS[component],
        topic_name=topic_name,
        managed_ledger_name=ml_name,
        cursor_name=cursor_name,
        schema_id=schema_id,
        ledger_ids=ledger_ids,
        write_mode=_MODES[mode],
        source=_SOURCES[source],
    )
    if expected_version is not None:
        request.expected_version = expected_version
    if new_cursor_ledger_id is not None:
        request.new_cursor_ledger_id = new_cursor_ledger_id
    config = ClientConfig.from_env(target="MARKER", default_address=DEFAULT_ADDRESS)
    if address:
        config = dataclasses.replace(config, address=address)
    try:
        # The names are checked here as the marker will check them (canonical Pulsar names
        # only), so a typo or an alias is refused before anything is sent.
        resolve_owner(
            request.component,
            topic_name=topic_name,
            ml_name=ml_name,
            cursor_name=cursor_name,
            schema_id=schema_id,
        )
        response = asyncio.run(_call(config, request))
    except TombstoneError as exc:
        click.echo(f"error ({exc.grpc_code.name}): {exc}", err=True)
        sys.exit(1)
    click.echo(message_json(response) if as_json else describe(response))


async def _call(config: ClientConfig, request: _mk.MarkLedgersRequest) -> _mk.MarkLedgersResponse:
    channel = open_channel(config)
    try:
        with rpc_errors("marker"):
            response: _mk.MarkLedgersResponse = await _mk_grpc.MarkerStub(channel).MarkLedgers(
                request
            )
        return response
    finally:
        await channel.close()


def describe(response: _mk.MarkLedgersResponse) -> str:
    """A short human-readable summary."""
    lines = [
        f"request {response.request_id}: {len(response.marked)} marked, "
        f"{len(response.not_marked)} not marked, {response.pdlis_sent} PDLIs sent",
        f"version {response.read_version} -> {response.new_version} "
        f"(fence token {response.fence_token}, written: {'yes' if response.written else 'no'})",
    ]
    for m in response.marked:
        tiers = ", ".join(_pd.LedgerType.Name(t) for t in m.tiers)
        lines.append(f"  marked {m.ledger_id} [{tiers}]")
    for n in response.not_marked:
        lines.append(
            f"  not marked {n.ledger_id}: {_mk.NotMarkedReason.Name(n.reason)} {n.message}"
        )
    return "\n".join(lines)


marker.add_command(env_command("marker"))
