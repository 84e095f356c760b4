"""`tombstone demo` (`make run`): the local stack end to end, then a clean stop.

It starts ZooKeeper and S3, seeds a simulated cluster with some orphans and, by default
(`--profile legacy`), every legacy artifact real Pulsar versions leave behind, plants a
neighbour Pulsar cluster sharing its BookKeeper (`devstack.neighbour`; not declared to the
services, whose verifier must detect it), and prints what it created; then (unless
--seed-only) it starts the devstack broker, the verifier, the marker (with its follower) and
the deleter, trims half the topics through the marker the way brokers' retention would with
the protocol, trims the other half (and switches and unsubscribes their cursors) the way
unmodified brokers do, some of their own deletes failing, sends the neighbour's ledgers to the
marker as a careless reconciler would, follows the deleter until everything is settled, and
checks the outcome of all (S1 and L1; the neighbour's ledgers kept, its intents dead-lettered
as foreign); then it runs the reconciler on what is left (a dry run, then a submit the
services carry out). Each stage is one method of `Demo`, entered on one exit stack, so servers
always stop in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from devstack import demo_props, demo_stores
from devstack.demo_pipeline import (
    PULSAR_SECURITY,
    PULSAR_SECURITY_ENV,
    Summary,
    trim_and_delete,
)
from devstack.demo_stores import DemoMetadata, OxiaMetadata, ZooKeeperMetadata
from devstack.neighbour import PlantedNeighbour
from devstack.oxia import running_in_thread
from devstack.reconcile_command import SEEDED_MIN_AGE
from devstack.s3 import S3Locations, S3Server
from devstack.simulator.model import ClusterModel
from devstack.simulator.options import SPEC_OPTION_NAMES, spec_from_options, spec_options
from devstack.simulator.run import echo_progress, simulate_into
from devstack.simulator.spec import ClusterSpec
from devstack.simulator.summary import render
from devstack.zookeeper import ZooKeeperServer
from services.core.durations import format_duration, parse_duration

SECOND_BUCKET = "pulsar-offload-west"
SECOND_REGION = "us-west-2"


class Demo:
    """The stages of the demo; servers are stopped by the exit stack in reverse order."""

    def __init__(
        self,
        spec: ClusterSpec,
        echo: Callable[[str], None],
        delete_failure_share: float = 0.3,
        reconcile_out: Path | None = None,
        zookeeper_auth: bool = False,
        pulsar_security: str | None = None,
        second_s3: bool = False,
        metadata: str = demo_stores.ZOOKEEPER,
        reconcile_min_age: timedelta = SEEDED_MIN_AGE,
    ) -> None:
        self.spec = spec
        self.metadata_kind = metadata
        self.metadata: DemoMetadata | None = None
        self.reconcile_min_age = reconcile_min_age
        self.zookeeper_auth = zookeeper_auth
        self.pulsar_security = pulsar_security
        self.second_s3 = second_s3
        self.echo = echo
        self.delete_failure_share = delete_failure_share
        self.reconcile_out = reconcile_out
        self.seeded_at: float | None = None
        self.stack = contextlib.ExitStack()
        self.zookeeper: ZooKeeperServer | None = None
        self.s3: S3Locations | None = None
        self.model: ClusterModel | None = None
        self.neighbour: PlantedNeighbour | None = None
        self.props: demo_props.PlantedProps | None = None

    def start_zookeeper(self) -> ZooKeeperServer:
        """With `zookeeper_auth`, the services and the reconciler authenticate as digest
        user `tombstone` (a fresh password) and Tombstone's znodes are writable only by it;
        the seeded Pulsar znodes stay open, as an unsecured Pulsar writes them."""
        server = ZooKeeperServer()
        if self.zookeeper_auth:
            server = ZooKeeperServer(
                super_password=secrets.token_hex(8),
                tombstone_identity=("tombstone", secrets.token_hex(8)),
            )
        self.zookeeper = self.stack.enter_context(server)
        auth = " (digest authentication: user tombstone)" if self.zookeeper_auth else ""
        self.echo(f"ZooKeeper on {self.zookeeper.address}{auth}")
        self.metadata = ZooKeeperMetadata(self.zookeeper)
        return self.zookeeper

    def start_metadata(self) -> DemoMetadata:
        """ZooKeeper (`start_zookeeper`), or the devstack Oxia server with Pulsar's metadata
        in namespace `broker`, BookKeeper's in `bookkeeper` and the neighbour's in `neighbour`,
        served from a thread of this process."""
        if self.metadata_kind == demo_stores.ZOOKEEPER:
            self.start_zookeeper()
        else:
            server = self.stack.enter_context(
                running_in_thread(namespaces=demo_stores.OXIA_NAMESPACES)
            )
            self.metadata = OxiaMetadata(server)
            self.echo(
                f"Oxia on {server.address}: Pulsar's metadata in namespace "
                f"{demo_stores.PULSAR_NAMESPACE}, BookKeeper's in "
                f"{demo_stores.BOOKKEEPER_NAMESPACE}"
            )
            settings = ", ".join(f"{k}={v}" for k, v in self.metadata.service_env().items())
            self.echo(f"  the services' stores: {settings}")
        assert self.metadata is not None
        return self.metadata

    def start_s3(self) -> S3Locations:
        """With `second_s3`, half the namespaces offload to a second S3 location (their offload
        policies name another bucket, endpoint and region), served by a second server."""
        primary = self.stack.enter_context(S3Server())
        self.echo(f"S3 on {primary.endpoint}")
        self.s3 = S3Locations(primary)
        if self.second_s3:
            west = self.stack.enter_context(S3Server(region=SECOND_REGION))
            self.s3 = S3Locations(primary, {SECOND_BUCKET: west})
            self.spec = replace(
                self.spec,
                second_bucket=SECOND_BUCKET,
                second_region=SECOND_REGION,
                second_endpoint=west.endpoint,
                second_location_share=0.5,
            )
            self.echo(f"S3 on {west.endpoint} ({SECOND_REGION}): bucket {SECOND_BUCKET}")
        return self.s3

    async def seed(self) -> ClusterModel:
        assert self.metadata is not None, "start_metadata first"
        assert self.s3 is not None, "start_s3 first"
        self.echo(f"Seeding a simulated cluster (seed {self.spec.seed})")
        started = time.monotonic()
        self.model = await simulate_into(
            self.spec,
            metadata=self.metadata.cluster(self.spec.ledgers_root),
            s3_config=self.s3.client_config(),
            s3_routes=self.s3.routes(),
            progress=echo_progress(self.echo),
        )
        self.seeded_at = time.monotonic()
        self.echo(f"Seeded in {self.seeded_at - started:.1f}s")
        return self.model

    async def plant_props(self) -> demo_props.PlantedProps:
        """Compacted-topic ledgers and bucket snapshots on a topic of their own
        (`devstack.demo_props`), counted as seeded data like the neighbour below."""
        assert self.metadata is not None, "start_metadata first"
        assert self.model is not None, "seed first"
        self.props = await demo_props.plant(self.model, self.metadata)
        self.seeded_at = time.monotonic()
        self.echo(self.props.describe())
        return self.props

    async def plant_neighbour(self) -> PlantedNeighbour:
        """The neighbour cluster, after our seed (its ids follow ours in the shared generator).
        It counts as seeded data: `seeded_at` moves to after it, so the reconciler stage's wait
        for the age window covers the neighbour's ledgers too, and a proposal of them is the
        reconciler's choice, not an accident of their age."""
        assert self.metadata is not None, "start_metadata first"
        assert self.model is not None, "seed first"
        self.neighbour = await demo_stores.plant_neighbour(self.model, self.metadata)
        self.seeded_at = time.monotonic()
        self.echo(self.neighbour.describe())
        return self.neighbour

    def report(self) -> None:
        assert self.model is not None
        self.echo(render(self.model))

    async def trim_and_delete(self) -> Summary:
        assert self.model is not None, "seed first"
        assert self.metadata is not None, "start_metadata first"
        assert self.s3 is not None, "start_s3 first"
        self.echo(
            "Trimming half the topics through the marker and half as unmodified brokers do "
            "(the marker's follower records those); the deleter pool does the rest"
        )
        return await trim_and_delete(
            self.model,
            metadata=self.metadata,
            s3=self.s3,
            echo=self.echo,
            delete_failure_share=self.delete_failure_share,
            reconcile_out=self.reconcile_out,
            seeded_at=self.seeded_at,
            neighbour=self.neighbour,
            security=self.pulsar_security,
            props=self.props,
            reconcile_min_age=self.reconcile_min_age,
        )

    def close(self) -> None:
        self.stack.close()
        where = "Oxia" if self.metadata_kind == demo_stores.OXIA else "ZooKeeper"
        self.echo(f"Stopped {where} and S3")


async def run_demo(
    spec: ClusterSpec,
    echo: Callable[[str], None],
    *,
    pipeline: bool = True,
    delete_failure_share: float = 0.3,
    reconcile_out: Path | None = None,
    zookeeper_auth: bool = False,
    pulsar_security: str | None = None,
    second_s3: bool = False,
    metadata: str = demo_stores.ZOOKEEPER,
    reconcile_min_age: timedelta = SEEDED_MIN_AGE,
) -> tuple[ClusterModel, Summary | None]:
    """With `reconcile_out`, the reconciler stage runs after the services' part, its runs'
    age window `reconcile_min_age` (the stage waits until the planted data is that old); with
    `zookeeper_auth`, everything Tombstone runs authenticates to ZooKeeper; `pulsar_security`
    secures the broker (`none`, `token`, `oauth2`, see `trim_and_delete`); with `second_s3`,
    half the namespaces offload to a second S3 location; `metadata` (`zookeeper`, `oxia`) is
    where the cluster's metadata is (`devstack.demo_stores`)."""
    demo = Demo(
        spec,
        echo,
        delete_failure_share,
        reconcile_out,
        zookeeper_auth,
        pulsar_security,
        second_s3,
        metadata,
        reconcile_min_age,
    )
    try:
        demo.start_metadata()
        demo.start_s3()
        model = await demo.seed()
        await demo.plant_props()
        await demo.plant_neighbour()
        demo.report()
        summary = await demo.trim_and_delete() if pipeline else None
        return model, summary
    finally:
        demo.close()


@click.command()
@spec_options(tenants=2, namespaces=2, topics=5, orphans="2", profile="legacy")
@click.option("--seed-only", is_flag=True, help="Seed and show the cluster; skip the services.")
@click.option(
    "--delete-failure-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.3,
    show_default=True,
    help="share of the broker-style trims' own deletes that fail (seeded by --seed)",
)
@click.option(
    "--reconcile/--no-reconcile",
    default=True,
    show_default=True,
    help="after the services: a reconciler dry run, then a submit of what it proposes",
)
@click.option(
    "--reconcile-out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where the reconciler runs write (dry-run/, submit/) [default: a new temporary folder]",
)
@click.option(
    "--zookeeper-auth",
    is_flag=True,
    envvar="DEVSTACK_ZOOKEEPER_AUTH",
    help="run with ZooKeeper digest authentication: the services and the reconciler log in, "
    "Tombstone's znodes are writable only by them [env DEVSTACK_ZOOKEEPER_AUTH=1]",
)
@click.option(
    "--pulsar-security",
    type=click.Choice(PULSAR_SECURITY),
    envvar=PULSAR_SECURITY_ENV,
    default="none",
    show_default=True,
    help="the devstack broker with TLS (pulsar+ssl, https, a test CA) and token or OAuth2 "
    f"client-credentials authentication; also read from {PULSAR_SECURITY_ENV}",
)
@click.option(
    "--second-s3",
    is_flag=True,
    envvar="DEVSTACK_SECOND_S3",
    help="half the namespaces offload to a second S3 location (another bucket, endpoint "
    "and region, as per-namespace offload policies make) [env DEVSTACK_SECOND_S3=1]",
)
@click.option(
    "--metadata",
    type=click.Choice(demo_stores.KINDS),
    default=demo_stores.ZOOKEEPER,
    show_default=True,
    help="where the cluster's metadata is: ZooKeeper, or the devstack Oxia server with "
    "Pulsar's in namespace broker and BookKeeper's in bookkeeper",
)
@click.option(
    "--reconcile-min-age",
    callback=lambda _ctx, _param, value: _window(value),
    default=format_duration(SEEDED_MIN_AGE),
    show_default=True,
    envvar="DEVSTACK_RECONCILE_MIN_AGE",
    help="the reconciler runs' --min-age and the verifier's windows for what they submit: "
    "planted data is proposed once it is this old, and the stage waits until it is; a test "
    "stack shortens it (planted data cannot be backdated) [env DEVSTACK_RECONCILE_MIN_AGE]",
)
def demo(
    seed_only: bool,
    delete_failure_share: float,
    reconcile: bool,
    reconcile_out: Path | None,
    zookeeper_auth: bool,
    pulsar_security: str,
    second_s3: bool,
    metadata: str,
    reconcile_min_age: timedelta,
    **options: Any,
) -> None:
    """Run the local stack end to end: seed a simulated cluster (every legacy artifact by
    default) and a neighbour cluster sharing its BookKeeper, trim half of it through the
    marker and half as unmodified brokers do (their unlinks recorded by the marker's
    follower), delete through the verifier and the deleter pool, check nothing referenced
    was deleted and nothing unlinked remains outside the DLQ, and that the neighbour's
    ledgers, sent to the marker too, are kept and their intents dead-lettered as foreign.
    Then the reconciler runs on what is left, the planted orphans: a dry run, a submit to the
    demo's marker, and a check that the services deleted every candidate; the reports' paths
    are printed."""
    spec = spec_from_options({name: options[name] for name in SPEC_OPTION_NAMES})
    # The ZooKeeper client reports every closed connection as a warning; on the console those
    # lines look like failures, so only its errors are shown.
    logging.getLogger("aiozk").setLevel(logging.ERROR)
    # SIGTERM unwinds like Ctrl-C does, so the exit stack stops every server.
    signal.signal(signal.SIGTERM, _terminate)
    if metadata == demo_stores.OXIA and zookeeper_auth:
        raise click.UsageError("--zookeeper-auth secures ZooKeeper; --metadata oxia has none")
    if reconcile and not seed_only and reconcile_out is None:
        reconcile_out = Path(tempfile.mkdtemp(prefix="tombstone-demo-reconcile-"))
    run = run_demo(
        spec,
        click.echo,
        pipeline=not seed_only,
        delete_failure_share=delete_failure_share,
        reconcile_out=reconcile_out if reconcile else None,
        zookeeper_auth=zookeeper_auth,
        pulsar_security=pulsar_security,
        second_s3=second_s3,
        metadata=metadata,
        reconcile_min_age=reconcile_min_age,
    )
    _, summary = asyncio.run(run)
    if summary is not None and summary.problems:
        raise SystemExit(1)


def _window(value: str) -> timedelta:
    """A --reconcile-min-age: a positive duration (the reconciler refuses none shorter)."""
    try:
        window = parse_duration(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    if window <= timedelta(0):
        raise click.BadParameter("must be positive")
    return window


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
