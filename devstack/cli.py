"""`tombstone devstack`: run the local stack's parts one by one, and seed a cluster.

`zookeeper` and `s3` run a server in the foreground until Ctrl-C or SIGTERM; `simulate`
writes a simulated Pulsar cluster into running ones. The wire-compatible broker's command
is added when its module is present.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from devstack import s3 as s3_launcher
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
    """The embedded local stack: ZooKeeper, S3, a simulated cluster (and the broker)."""


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM, handled from before the server starts (a signal
    that arrives while it starts stops it once it is up, instead of killing the process)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait(stop: threading.Event) -> None:
    while not stop.wait(0.2):
        pass


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@devstack.command()
@click.option("--port", type=int, default=None, help="default: a free port")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None)
def zookeeper(port: int | None, data_dir: Path | None) -> None:
    """Run a ZooKeeper server until Ctrl-C / SIGTERM."""
    with stop_signals() as stop, ZooKeeperServer(port=port, data_dir=data_dir) as server:
        click.echo(f"ZooKeeper listening on {server.address}")
        wait(stop)
    click.echo("ZooKeeper stopped")


@devstack.command()
@click.option("--port", type=int, default=None, help="default: a free port")
def s3(port: int | None) -> None:
    """Run an S3 server (moto) until Ctrl-C / SIGTERM."""
    with stop_signals() as stop, S3Server(port=port) as server:
        click.echo(f"S3 listening on {server.endpoint}")
        click.echo(f"  access key {s3_launcher.ACCESS_KEY}, region {s3_launcher.REGION}")
        wait(stop)
    click.echo("S3 stopped")


@devstack.command()
@click.option("--zookeeper", "zk_address", required=True, help="host:port")
@click.option("--s3-endpoint", default=None, help="http://host:port (needed for S3 offloads)")
@click.option("--concurrency", type=int, default=128, show_default=True)
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
    --broker-style, then unlink part of it the way unmodified brokers do."""
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
        if broker_style:
            faults = DeleteFaults(delete_failure_share, seed=spec.seed)
            result = asyncio.run(
                unlink_into(model, zookeeper=zk_address, s3_config=s3_config, faults=faults)
            )
            click.echo(render_broker_style(result))
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
