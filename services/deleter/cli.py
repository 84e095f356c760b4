"""`tombstone deleter serve|status|dlq list|dlq replay`."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
from google.protobuf.message import Message

from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig
from services.core.enums import enum_name
from services.core.env_cli import env_command
from services.core.errors import TombstoneError
from services.core.json_output import message_json
from services.core.version import version_option
from services.deleter.config import DEFAULT_ADDRESS
from tombstone.v1 import deleter_pb2 as _dl
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

M = TypeVar("M", bound=Message)


@click.group()
@version_option("tombstone deleter")
def deleter() -> None:
    """The deleter pool (phase 2: verify, delete, acknowledge, retry or dead-letter)."""


@deleter.command()
def serve() -> None:
    """Run a deleter (settings from TOMBSTONE_* variables)."""
    from services.core.service_main import run_service
    from services.deleter.__main__ import main

    run_service("deleter", main)


_address = click.option(
    "--address", default=None, help="Deleter host:port (TOMBSTONE_DELETER_ADDRESS)."
)
_json = click.option("--json", "as_json", is_flag=True, help="Print the response as JSON.")


@deleter.command()
@_address
@_json
def status(address: str | None, as_json: bool) -> None:
    """Estimated in-flight deletions, oldest pending age and dead letters by reason."""
    response = _run(address, lambda stub: stub.GetStatus(_dl.GetStatusRequest()))
    _print(response, as_json, describe_status)


@deleter.group()
def dlq() -> None:
    """The dead-letter topic."""


@dlq.command("list")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=100,
    show_default=True,
    help="Most dead letters listed (1-10000).",
)
@click.option(
    "--reason", "reason_code", default="", help="Only this reason code, e.g. retries_exhausted."
)
@_address
@_json
def list_dead_letters(limit: int, reason_code: str, address: str | None, as_json: bool) -> None:
    """List dead letters, oldest first."""
    request = _dl.ListDeadLettersRequest(limit=limit, reason_code=reason_code)
    response = _run(address, lambda stub: stub.ListDeadLetters(request))
    _print(response, as_json, describe_dead_letters)


@dlq.command("replay")
@click.argument("message_ids", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Replay every dead letter (of --reason).")
@click.option(
    "--reason", "reason_code", default="", help="Only this reason code, e.g. retries_exhausted."
)
@_address
@_json
def replay(
    message_ids: tuple[str, ...], every: bool, reason_code: str, address: str | None, as_json: bool
) -> None:
    """Send dead letters back to the system topic with a fresh retry budget."""
    if every == bool(message_ids):
        raise click.UsageError("name MESSAGE_IDS or pass --all (not both)")
    request = _dl.ReplayDeadLettersRequest(
        message_ids=message_ids, all=every, reason_code=reason_code
    )
    response = _run(address, lambda stub: stub.ReplayDeadLetters(request))
    _print(response, as_json, describe_replay)


def _run(address: str | None, call: Callable[[_dl_grpc.DeleterAdminStub], Awaitable[M]]) -> M:
    config = ClientConfig.from_env(target="DELETER", default_address=DEFAULT_ADDRESS)
    if address:
        config = dataclasses.replace(config, address=address)

    async def go() -> M:
        channel = open_channel(config)
        try:
            with rpc_errors("deleter"):
                return await call(_dl_grpc.DeleterAdminStub(channel))
        finally:
            await channel.close()

    try:
        return asyncio.run(go())
    except TombstoneError as exc:
        click.echo(f"error ({exc.grpc_code.name}): {exc}", err=True)
        sys.exit(1)


def _print(response: M, as_json: bool, describe: Callable[[M], str]) -> None:
    click.echo(message_json(response) if as_json else describe(response))


def describe_status(s: _dl.GetStatusResponse) -> str:
    lines = [
        f"estimated in-flight deletions: {s.estimated_in_flight} "
        f"(system topic {s.system_topic_backlog}, retry topic {s.retry_topic_backlog})",
        f"in process here: {s.in_process} ({s.holding} waiting for their time), "
        f"oldest pending: {s.oldest_pending_age_ms / 1000:.1f}s",
        f"dead letters: {s.dead_letter_backlog}",
    ]
    lines += [f"  {code}: {count}" for code, count in sorted(s.dead_letters_by_reason.items())]
    if s.HasField("preview"):
        lines += describe_preview(s.preview)
    return "\n".join(lines)


def describe_preview(p: _dl.PreviewStatus) -> list[str]:
    """A preview's verdicts; the backlogs above are those of its subscription."""
    lines = [
        f"PREVIEW: nothing is deleted; subscription {p.subscription}, verdicts since "
        f"{_utc(p.since_ms)}",
        f"would delete: {sum(p.would_delete.values())}",
    ]
    for tier, count in sorted(p.would_delete.items()):
        size = p.would_delete_bytes.get(tier)
        lines.append(f"  {tier}: {count}" + (f" ({size} bytes known)" if size else ""))
    lines.append(f"settled without a delete: {sum(p.settled.values())}")
    lines += [f"  {reason}: {count}" for reason, count in sorted(p.settled.items())]
    lines.append(f"would dead-letter: {sum(p.would_dead_letter.values())}")
    lines += [f"  {code}: {count}" for code, count in sorted(p.would_dead_letter.items())]
    lines.append(f"deferred to decide again (retries): {p.retries}")
    lines.append(f"the deleters' subscription holds {p.deleter_backlog} (system + retry topic)")
    return lines


def _utc(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def describe_dead_letters(r: _dl.ListDeadLettersResponse) -> str:
    lines = []
    for d in r.dead_letters:
        what = (
            f"ledger {d.pdli.ledger_id} {enum_name(_pd.LedgerType.Name, d.pdli.ledger_type)}"
            if d.HasField("pdli")
            else f"{len(d.raw)} undecodable bytes"
        )
        lines.append(
            f"{d.message_id}  {d.reason_code}  {what}  retries={d.retry_count}  {d.reason}"
        )
    lines.append(
        f"{len(r.dead_letters)} dead letters" + (" (more not shown)" if r.truncated else "")
    )
    return "\n".join(lines)


def describe_replay(r: _dl.ReplayDeadLettersResponse) -> str:
    text = f"replayed {r.replayed}"
    if r.not_found:
        text += f"; not found: {', '.join(r.not_found)}"
    return text


deleter.add_command(env_command("deleter"))
