"""`tombstone devstack`: run the local stack's parts one by one, and seed a cluster.

`zookeeper`, `s3` and `oxia` run a server in the foreground until Ctrl-C or SIGTERM; `simulate`
writes a simulated Pulsar cluster into running ones. The wire-compatible broker's command
is added when its module is present.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from devstack import s3 as s3_launcher
from devstack.oxia.cli import oxia
from devstack.ports import Interrupted, PortInUse
from devstack.reconcile_command import ReconcileTarget, explain
from devstack.s3 import S3Server
from devstack.simulator.broker import DeleteFaults
from devstack.simulator.broker_run import render_broker_style
from devstack.simulator.options import (
    SPEC_OPTION_NAMES,
    broker_style_options,
    spec_from_options,
    spec_options,
)
from devstack.simulator.run import echo_progress, simulate_into, unlink_into
from devstack.simulator.summary import render
from devstack.zookeeper import ZooKeeperServer
from services.core.errors import TombstoneError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def devstack() -> None:
    """The embedded local stack: ZooKeeper, S3, Oxia, a simulated cluster (and the broker)."""


devstack.add_command(oxia)


class StopEvent(threading.Event):
    """Set by SIGINT or SIGTERM; remembers which one, for the exit code."""

    signum: int = signal.SIGTERM


@contextlib.contextmanager
def stop_signals() -> Iterator[StopEvent]:
    """An event set by SIGINT or SIGTERM, handled from before the server starts: a signal
    that arrives while it starts interrupts the start (the child is stopped), one that arrives
    while it serves stops it."""
    stop = StopEvent()
    previous = {sig: signal.signal(sig, _setter(stop)) for sig in _SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _setter(stop: StopEvent) -> Callable[[int, object], None]:
    def handler(signum: int, _frame: object) -> None:
        stop.signum = signum
        stop.set()

    return handler


def serve(stop: threading.Event, alive: Callable[[], bool], name: str) -> None:
    """Wait for a stop signal; a server child that dies meanwhile is an error, not a hang."""
    while not stop.wait(0.2):
        if not alive():
            raise click.ClickException(f"{name} exited unexpectedly")


@contextlib.contextmanager
def started(name: str, stop: StopEvent) -> Iterator[None]:
    """Turn a failed or interrupted start into one line on stderr and the exit code: 1 for a
    failure, 128 + the signal's number for an interrupted start (no traceback either way)."""
    try:
        yield
    except Interrupted:
        click.echo(f"{name} stopped before it was ready", err=True)
        raise SystemExit(128 + stop.signum) from None
    except PortInUse as exc:
        raise click.ClickException(f"{name}: {exc}") from None
    except (RuntimeError, TimeoutError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise click.ClickException(f"{name} did not start: {first}") from None


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Where the printed reconcile command writes its output (relative to where it is run).
RECONCILE_OUT = "reconcile-out"


@devstack.command()
@click.option("--port", type=int, default=None, help="default: a free port")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="where ZooKeeper keeps its data (default: a temporary folder, removed at exit)",
)
def zookeeper(port: int | None, data_dir: Path | None) -> None:
    """Run a ZooKeeper server until Ctrl-C / SIGTERM (exit 0); a busy --port is an error."""
    with stop_signals() as stop:
        server = ZooKeeperServer(port=port, data_dir=data_dir)
        try:
            with started("ZooKeeper", stop):
                server.start(stop=stop)
            click.echo(f"ZooKeeper listening on {server.address}")
            serve(stop, lambda: server.running, "ZooKeeper")
        finally:
            server.close()
    click.echo("ZooKeeper stopped")


@devstack.command()
@click.option("--port", type=int, default=None, help="default: a free port")
def s3(port: int | None) -> None:
    """Run an S3 server (moto) until Ctrl-C / SIGTERM (exit 0); a busy --port is an error."""
    with stop_signals() as stop:
        server = S3Server(port=port)
        try:
            with started("S3", stop):
                server.start(stop=stop)
            click.echo(f"S3 listening on {server.endpoint}")
            click.echo(
                f"  access key {s3_launcher.ACCESS_KEY}, secret {s3_launcher.SECRET_KEY}, "
                f"region {s3_launcher.REGION} (TOMBSTONE_S3_ACCESS_KEY_ID, "
                "TOMBSTONE_S3_SECRET_ACCESS_KEY, TOMBSTONE_S3_REGION)"
            )
            serve(stop, lambda: server.running, "S3")
        finally:
            server.close()
    click.echo("S3 stopped")


@devstack.command()
@click.option("--zookeeper", "zk_address", required=True, help="host:port")
@click.option("--s3-endpoint", default=None, help="http://host:port (needed for S3 offloads)")
@click.option(
    "--concurrency",
    type=int,
    default=128,
    show_default=True,
    help="ZooKeeper and S3 writes in flight while the cluster is written",
)
@broker_style_options
@spec_options()
def simulate(
    zk_address: str,
    s3_endpoint: str | None,
    concurrency: int,
    broker_style: bool,
    delete_failure_share: float,
    **options: Any,
) -> None:
    """Write a simulated Pulsar cluster (from a seed) into a running ZooKeeper and S3; with
    --broker-style, then unlink part of it the way unmodified brokers do. Ends with the
    `tombstone reconcile run` command for this cluster: with the defaults that run is not
    refused and proposes exactly the planted deletable orphans once they are a minute old
    (the opt-in kinds of --orphans change that: other-cluster objects make it refuse)."""
    spec = spec_from_options({name: options[name] for name in SPEC_OPTION_NAMES})
    s3_config = None
    if s3_endpoint is not None:
        s3_config = {
            "endpoint_url": s3_endpoint,
            "aws_access_key_id": s3_launcher.ACCESS_KEY,
            "aws_secret_access_key": s3_launcher.SECRET_KEY,
            "region_name": s3_launcher.REGION,
        }
    click.echo(f"Writing a simulated cluster (seed {spec.seed}) into {zk_address}")
    try:
        model = asyncio.run(
            simulate_into(
                spec,
                zookeeper=zk_address,
                s3_config=s3_config,
                concurrency=concurrency,
                progress=echo_progress(click.echo),
            )
        )
        click.echo(render(model))
        left_behind = 0
        if broker_style:
            faults = DeleteFaults(delete_failure_share, seed=spec.seed)
            result = asyncio.run(
                unlink_into(model, zookeeper=zk_address, s3_config=s3_config, faults=faults)
            )
            click.echo(render_broker_style(result))
            left_behind = len(result.left_behind)
        target = ReconcileTarget.of(spec, zk_address, s3_endpoint)
        click.echo(explain(target, RECONCILE_OUT, spec.orphans, left_behind=left_behind))
    except TombstoneError as e:
        raise click.ClickException(str(e)) from e


def _add_broker() -> None:
    """Register `devstack broker` when the wire-compatible broker is installed."""
    try:
        module = importlib.import_module("devstack.pulsar.cli")
    except ModuleNotFoundError as exc:
        if exc.name and "devstack.pulsar.cli".startswith(exc.name):
            return
        raise
    command = getattr(module, "broker", None)
    if isinstance(command, click.Command):
        devstack.add_command(command, "broker")


_add_broker()
