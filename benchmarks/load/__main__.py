"""`python -m benchmarks.load`: run the load test and print its figures; exit 1 if S1 or L1
fails (or the backlog did not drain). `--broker-style`: the brokers trim as unmodified Pulsar
does and the marker's follower must turn what they leave behind into intents."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from benchmarks._truth import parse
from benchmarks.load.checks import exit_code, final_check, undone_work
from benchmarks.load.report import figures, plot, summary, write_json
from benchmarks.load.stack import Endpoints, LocalStack, local_stack
from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import Workload, WorkloadOptions
from devstack.simulator.s3 import open_object_store
from services.core.client import open_channel
from services.core.config import ClientConfig
from services.metadata.zookeeper.store import ZkMetadataStore

SOAK_DURATION = 600.0
RESTART_EVERY = 60.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__)
    parser.add_argument("--brokers", type=int, default=4, help="simulated brokers (M)")
    parser.add_argument("--topics", type=int, default=8, help="topics per broker (T)")
    parser.add_argument("--rate", type=float, default=40.0, help="ledgers trimmed per second")
    parser.add_argument("--duration", type=float, default=None, help="seconds of load")
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--offloaded-share", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--soak", action="store_true",
        help=f"run {SOAK_DURATION:g} s and restart the deleter every {RESTART_EVERY:g} s",
    )  # fmt: skip
    parser.add_argument("--kill", action="store_true", help="soak restarts use SIGKILL")
    brokers = parser.add_argument_group("broker-style trims (unmodified Pulsar)")
    brokers.add_argument(
        "--broker-style", action="store_true",
        help="brokers write the shorter list and delete themselves, no MarkLedgers call; the "
        "devstack marker runs its follower (TOMBSTONE_MARKER_FOLLOW=true)",
    )  # fmt: skip
    brokers.add_argument(
        "--delete-failure-share", type=float, default=0.2,
        help="share of the brokers' deletions that fail every attempt (default 0.2)",
    )  # fmt: skip
    brokers.add_argument(
        "--delete-backoff", type=float, default=1.0,
        help="seconds between a broker's delete attempts (Pulsar: 60; default 1)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("out/load"), help="results directory")
    external = parser.add_argument_group("an external stack (default: start the devstack)")
    external.add_argument("--zookeeper", help="host:port of the cluster's ZooKeeper")
    external.add_argument("--s3", help="S3 endpoint URL of the offload bucket")
    external.add_argument("--s3-access-key", default=None)
    external.add_argument("--s3-secret-key", default=None)
    external.add_argument("--s3-region", default="us-east-1")
    external.add_argument("--bucket", default="pulsar-offload")
    external.add_argument("--cluster", default="tombstone", help="Pulsar cluster name")
    external.add_argument("--marker", help="marker host:port (not used with --broker-style)")
    external.add_argument("--marker-token", default=None, help="token with the broker role")
    args = parse(
        parser,
        {"brokers": 1, "topics": 2, "rate": 5.0, "duration": 6.0, "drain_timeout": 60.0},
        argv,
    )
    chosen = [args.zookeeper, args.s3] + ([] if args.broker_style else [args.marker])
    if any(chosen) and not all(chosen):
        needs = "--zookeeper and --s3" if args.broker_style else "--zookeeper, --s3 and --marker"
        parser.error(f"an external stack needs {needs}")
    if not 0.0 <= args.delete_failure_share <= 1.0:
        parser.error("--delete-failure-share must be in [0, 1]")
    if args.soak and args.zookeeper:
        parser.error("--soak restarts the deleter, so it runs on the devstack only")
    if args.duration is None:
        args.duration = SOAK_DURATION if args.soak else 120.0
    return args


def external_endpoints(args: argparse.Namespace) -> Endpoints:
    s3 = {"endpoint_url": args.s3, "region_name": args.s3_region}
    if args.s3_access_key:
        s3 |= {"aws_access_key_id": args.s3_access_key, "aws_secret_access_key": args.s3_secret_key}
    marker = args.marker or ""
    return Endpoints(args.zookeeper, s3, args.bucket, args.cluster, marker, args.marker_token)


@contextlib.asynccontextmanager
async def stack_for(args: argparse.Namespace) -> AsyncIterator[tuple[Endpoints, LocalStack | None]]:
    if args.zookeeper:
        yield external_endpoints(args), None
        return
    print("starting the devstack: ZooKeeper, S3, broker, verifier, marker, deleter ...", flush=True)
    async with local_stack(follow=args.broker_style) as local:
        print(f"devstack up (service logs in {local.log_dir})", flush=True)
        yield local.endpoints, local


async def progress(tracker: Tracker, workload: Workload, stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 5.0)
        deleted = tracker.deleted
        unlinked = f"marked {workload.stats.marked}"
        if workload.brokers is not None:
            unlinked = (
                f"unlinked by brokers {len(tracker.marked)} (their deletes failed "
                f"{workload.brokers.stats.deletes_failed})"
            )
        print(
            f"[{time.monotonic() - tracker.started:6.1f} s] ledgers created "
            f"{workload.stats.ledgers_created}, {unlinked}, deleted "
            f"bookkeeper {deleted['bookkeeper']} offload {deleted['offload']}, backlog "
            f"{len(tracker.pending)}, errors {len(workload.stats.errors)}",
            flush=True,
        )


async def restart_deleter(local: LocalStack, stop: asyncio.Event, sig: signal.Signals) -> None:
    deleter = local.services["deleter"]
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RESTART_EVERY)
        if stop.is_set():
            return
        print(f"restarting the deleter ({sig.name})", flush=True)
        await deleter.restart(sig)


async def run(args: argparse.Namespace) -> int:
    options = WorkloadOptions(
        brokers=args.brokers, topics=args.topics, rate=args.rate, duration=args.duration,
        offloaded_share=args.offloaded_share, seed=args.seed, broker_style=args.broker_style,
        delete_failure_share=args.delete_failure_share, delete_backoff=args.delete_backoff,
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    async with (
        stack_for(args) as (endpoints, local),
        ZkMetadataStore.connect(endpoints.zookeeper) as store,
        open_object_store(endpoints.s3) as objects,
    ):
        channel = None
        if not options.broker_style:
            channel = open_channel(ClientConfig(endpoints.marker, token=endpoints.marker_token))
        tracker = Tracker(store, objects, endpoints.bucket)
        workload = Workload(
            options, store=store, objects=objects, marker=channel,
            bucket=endpoints.bucket, cluster=endpoints.cluster, on_marked=tracker.add,
        )  # fmt: skip
        await workload.prepare()
        print(f"{len(workload.topics)} topics ready; load for {options.duration:g} s", flush=True)
        stop = asyncio.Event()
        tracker.started = time.monotonic()
        background = [
            asyncio.create_task(tracker.run(stop)),
            asyncio.create_task(progress(tracker, workload, stop)),
        ]
        if args.soak and local is not None:
            sig = signal.SIGKILL if args.kill else signal.SIGTERM
            background.append(asyncio.create_task(restart_deleter(local, stop, sig)))
        started = time.monotonic()
        try:
            await workload.run()
            workload_seconds = time.monotonic() - started
            print(f"load done in {workload_seconds:.1f} s; draining ...", flush=True)
            stop.set()
            await asyncio.gather(*background)
            drained = await tracker.drain(args.drain_timeout)
            check = await final_check(workload, tracker)
        finally:
            stop.set()
            for task in background:
                task.cancel()
            if channel is not None:
                await channel.close()
        restarts = local.services["deleter"].restarts if local is not None else 0
        fig = figures(tracker, workload.stats, workload_seconds, drained, restarts)
    name = ("load-soak" if args.soak else "load-test") + ("-broker" if args.broker_style else "")
    plot(tracker, args.out / f"{name}.png", f"{options.brokers} brokers x {options.topics} "
         f"topics, {options.rate:g} ledgers/s{' (soak)' if args.soak else ''}"
         f"{' (broker-style)' if args.broker_style else ''}")  # fmt: skip
    brokers = None
    if workload.brokers is not None:
        brokers = (len(tracker.marked), workload.brokers.failures_injected)
    write_json(args.out / f"{name}.json", options, workload.stats, fig, check, broker_style=brokers)
    print(summary(options, workload.stats, fig, check, broker_style=brokers))
    print(f"plot: {args.out / f'{name}.png'}; figures: {args.out / f'{name}.json'}")
    for error in workload.stats.errors[:10]:
        print(f"  error: {error}")
    undone = undone_work(workload, tracker)
    for why in undone:
        print(f"benchmark failed: {why}")
    return exit_code(check, drained) or int(bool(undone))


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run(parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
