"""`tombstone setup [--check]`: the system topics, the deleters' subscriptions and the policies
that keep intents, through Pulsar's admin API (`services.systopic.setup`).

Exit codes: 0 everything is (now) in place; 1 `--check` found something missing; 2 a topic
exists in a form setup never changes (another partition count), or the broker refused a call
(no permission, topic-level policies disabled); 3 the admin API cannot be reached.
"""

from __future__ import annotations

import asyncio
import sys
from typing import NoReturn

import aiohttp
import click

from services.core.errors import ConfigError, TombstoneError, Unavailable
from services.systopic.admin_auth import secured_admin
from services.systopic.setup import INFINITE, Outcome, SetupPlan, Step, TopicSetup

EXIT_MISSING = 1
EXIT_REFUSED = 2
EXIT_UNAVAILABLE = 3


def _retention_value(ctx: click.Context, param: click.Parameter, value: int) -> int:
    if value < INFINITE:
        raise click.BadParameter("must be -1 (infinite), 0 (none) or a positive number")
    return value


@click.command("setup")
@click.option(
    "--check",
    is_flag=True,
    help="Only verify and report each item; exit 1 with one line per missing item.",
)
@click.option(
    "--retention-minutes",
    type=int,
    default=INFINITE,
    show_default=True,
    callback=_retention_value,
    help="Topic-level retention time in minutes (-1: infinite).",
)
@click.option(
    "--retention-size-mb",
    type=int,
    default=INFINITE,
    show_default=True,
    callback=_retention_value,
    help="Topic-level retention size in MB (-1: infinite).",
)
def setup(check: bool, retention_minutes: int, retention_size_mb: int) -> None:
    """Create the system, retry and dead-letter topics (TOMBSTONE_PULSAR_TOPIC_PARTITIONS
    partitions each), the deleters' subscriptions at the earliest position, a retention
    policy and an inactive-topic policy that never deletes them. With
    TOMBSTONE_DELETER_MODE=preview, also the preview subscription (earliest position); with
    the mode back to delete, its removal. Idempotent; run it before the first marker or
    follower starts. Uses TOMBSTONE_DELETER_PULSAR_ADMIN_URL and TOMBSTONE_PULSAR_AUTH_TOKEN."""
    if retention_minutes == 0 and retention_size_mb == 0:
        raise click.BadParameter(
            "a retention of 0 minutes and 0 MB keeps nothing", param_hint="--retention-*"
        )
    try:
        plan = SetupPlan.from_env(
            retention_minutes=retention_minutes, retention_size_mb=retention_size_mb
        )
    except ConfigError as exc:
        _fail(EXIT_REFUSED, f"tombstone setup: {exc}")
    try:
        steps = asyncio.run(_run(plan, check=check))
    except Unavailable as exc:
        _fail(EXIT_UNAVAILABLE, f"tombstone setup: admin API unavailable: {exc}")
    except TombstoneError as exc:
        _fail(EXIT_REFUSED, f"tombstone setup: refused: {exc}")
    if any(step.outcome == Outcome.WRONG for step in steps):
        sys.exit(EXIT_REFUSED)
    if not all(step.ok for step in steps):
        sys.exit(EXIT_MISSING)


async def _run(plan: SetupPlan, *, check: bool) -> list[Step]:
    async with aiohttp.ClientSession() as http:
        admin = secured_admin(http, plan.admin_url, plan.pulsar.security)
        runner = TopicSetup(admin, plan, check=check, report=lambda step: click.echo(step.line()))
        await runner.run()
        return runner.steps


def _fail(code: int, line: str) -> NoReturn:
    click.echo(line.replace("\n", " "), err=True)
    sys.exit(code)
