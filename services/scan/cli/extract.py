"""`tombstone reconcile extract` and `tombstone reconcile run` (extract, then analyze)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from services.core.config import S3Config, canonical_endpoint, check_region
from services.core.errors import TombstoneError
from services.core.shared_clusters import ZOOKEEPER
from services.core.zk_security import ZooKeeperSecurity
from services.scan.analysis.config import parse_duration
from services.scan.cli.options import (
    analysis_options,
    analyze_config,
    finish,
    submit_options,
    submit_request,
)
from services.scan.cli.run_guard import interruptible, versioned_run
from services.scan.cli.sharing import (
    bookkeeper_store,
    configuration_store,
    metadata_store,
    shared_cluster_option,
    shared_clusters,
)
from services.scan.preflight.checks import require_source

F = Callable[..., Any]
EXTRACT_DIR = "extract"
ACCEPT_UNATTRIBUTED = "--accept-unattributed-objects"


def extract_options(func: F) -> F:
    """Where to read from: ZooKeeper, the ledgers root, the buckets or inventory files."""
    options: list[Callable[[F], F]] = [
        click.option(
            "--zookeeper",
            default=None,
            help="host:port[,host:port...] of the ZooKeeper holding Pulsar's metadata (or "
            "--metadata-store).",
        ),
        click.option("--chroot", default=None, help="ZooKeeper chroot of the Pulsar metadata."),
        click.option(
            "--metadata-store",
            default=None,
            metavar="URL",
            help="Pulsar's metadata store as broker.conf's metadataStoreUrl, instead of "
            "--zookeeper/--chroot: zk:host:port[,host:port...][/chroot] or "
            "oxia://host:port/namespace (default: TOMBSTONE_METADATA_STORE_URL).",
        ),
        click.option(
            "--configuration-store",
            default=None,
            help="host:port[,host:port...][/chroot] (or zk:...) of Pulsar's configuration store "
            "(configurationMetadataStoreUrl) when it is not --zookeeper: the pre-flight looks "
            "for /admin/clusters/<--cluster> there and the extract reads the namespace "
            "policies (/admin/policies) there (default: TOMBSTONE_CONFIGURATION_STORE, else "
            "--zookeeper under --chroot).",
        ),
        click.option(
            "--bookkeeper-metadata",
            default=None,
            metavar="URL",
            help="Where BookKeeper keeps its ledger metadata when it is not Pulsar's metadata "
            "store, as bookkeeper.conf's metadataServiceUri: "
            "[metadata-store:]zk:host:port[,host:port...][/chroot] or "
            "[metadata-store:]oxia://host:port/namespace. The ledgers root (--ledgers-root) "
            "is read there (default: TOMBSTONE_BOOKKEEPER_METADATA_URL, else Pulsar's store).",
        ),
        shared_cluster_option,
        click.option(
            "--ledgers-root",
            default="/ledgers",
            show_default=True,
            help="BookKeeper's ledgers root znode (zkLedgersRootPath), under --chroot.",
        ),
        click.option(
            "--s3-endpoint", default=None, help="S3-compatible endpoint (else AWS / env)."
        ),
        click.option("--s3-region", default=None, help="Region (else TOMBSTONE_S3_REGION)."),
        click.option(
            "--bucket", "buckets", multiple=True, help="An allowed offload bucket (repeatable)."
        ),
        click.option(
            "--s3-location",
            "s3_locations",
            multiple=True,
            metavar="BUCKET=ENDPOINT[,REGION]",
            help="Where a --bucket is when not at --s3-endpoint (a namespace's own offload "
            "policies): its endpoint (scheme://host[:port]) and region (else --s3-region). "
            "Repeatable; the same credentials serve every endpoint.",
        ),
        click.option(
            "--inventory",
            "inventories",
            multiple=True,
            type=click.Path(dir_okay=False, exists=True),
            help="S3 Inventory file (CSV, CSV.gz or Parquet) listing the buckets instead of a "
            "live listing (repeatable).",
        ),
        click.option(
            "--inventory-schema",
            default="Bucket, Key, Size, LastModifiedDate",
            show_default=True,
            help="Column order of headerless inventory CSVs (the manifest's fileSchema).",
        ),
        click.option(
            "--head-objects/--no-head-objects",
            default=True,
            show_default=True,
            help="HEAD Pulsar-named objects for their managed-ledger and cluster names. "
            "--no-head-objects needs --accept-unattributed-objects.",
        ),
        click.option(
            ACCEPT_UNATTRIBUTED,
            "accept_unattributed_objects",
            is_flag=True,
            help="Acknowledge --no-head-objects: without HEAD an object's cluster is unknown, "
            "so in a bucket shared with other Pulsar clusters their objects cannot be "
            "excluded and may be proposed for deletion (shown as a warning in the report).",
        ),
        click.option(
            "--zk-timeout",
            default="10s",
            show_default=True,
            help="Connect, request and session timeout of each task's ZooKeeper client and of "
            "the pre-flight's (a duration, e.g. 10s; the session takes at least 4s).",
        ),
        click.option(
            "--subtree-level",
            default=4,
            show_default=True,
            type=click.IntRange(min=1),
            help="Depth of the BookKeeper subtrees read one per extract task (1: the top-level "
            "nodes; 4: down to the parents of the ledger znodes; lower: fewer, bigger tasks).",
        ),
        click.option(
            "--concurrency",
            default=64,
            show_default=True,
            help="Requests in flight per extract task (ZooKeeper or S3). Times the tasks "
            "running at once (executor cores / spark.task.cpus, summed) is the cluster's "
            "ceiling on ZooKeeper.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def check_head_objects(head_objects: bool, accept_unattributed_objects: bool) -> None:
    """`--no-head-objects` is a usage error unless acknowledged; acknowledged, a warning."""
    if head_objects:
        return
    if not accept_unattributed_objects:
        raise click.UsageError(
            f"--no-head-objects needs {ACCEPT_UNATTRIBUTED}: without HEAD the objects' "
            "cluster is unknown and another cluster's objects may be proposed"
        )
    click.secho(
        "WARNING: --no-head-objects: offloaded objects are not read with HEAD; their cluster "
        "is unknown, so another cluster's objects in a shared bucket may be proposed.",
        fg="red",
        bold=True,
        err=True,
    )


def parse_s3_locations(
    values: Sequence[str], buckets: Sequence[str]
) -> tuple[tuple[str, str, str | None], ...]:
    """`BUCKET=ENDPOINT[,REGION]` values as (bucket, canonical endpoint, region or None)."""
    found: dict[str, tuple[str, str, str | None]] = {}
    for value in values:
        bucket, sep, rest = value.partition("=")
        endpoint, _, region = rest.partition(",")
        if not sep or not bucket or not endpoint:
            raise click.BadParameter(
                f"{value!r} is not BUCKET=ENDPOINT[,REGION]", param_hint="--s3-location"
            )
        if bucket not in buckets:
            raise _bad_location(f"{bucket!r} is not a --bucket")
        if bucket in found:
            raise _bad_location(f"{bucket!r} is given twice")
        try:
            where = canonical_endpoint(endpoint)
            named = check_region(region) if region else None
        except ValueError as exc:
            raise _bad_location(str(exc)) from exc
        found[bucket] = (bucket, where, named)
    return tuple(found.values())


def _bad_location(message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint="--s3-location")


def extract_settings(cluster: str, **kw: Any) -> Any:
    from services.scan.extract.inventory import parse_schema
    from services.scan.extract.s3 import S3Settings
    from services.scan.extract.units import ExtractSettings

    env = S3Config.from_env()
    s3 = S3Settings(
        endpoint_url=kw["s3_endpoint"] or env.endpoint_url,
        region=kw["s3_region"] or env.region,
        access_key_id=env.access_key_id,
        secret_access_key=env.secret_access_key,
    )
    ours = metadata_store(kw.get("metadata_store"), kw["zookeeper"], kw["chroot"])
    on_zookeeper = ours.kind == ZOOKEEPER
    return ExtractSettings(
        # A ZooKeeper store keeps the fields it always had (what the tasks and the pre-flight
        # read); any other is named by its URL.
        zookeeper=ours.servers if on_zookeeper else "",
        cluster=cluster,
        chroot=(ours.root or None) if on_zookeeper else None,
        metadata_store=None if on_zookeeper else ours,
        ledgers_root=kw["ledgers_root"],
        configuration_store=configuration_store(kw["configuration_store"]),
        bookkeeper_store=bookkeeper_store(kw.get("bookkeeper_metadata"), ours),
        shared_clusters=shared_clusters(kw["shared_cluster"], cluster),
        zk_timeout_s=parse_duration(kw["zk_timeout"], "zk_timeout").total_seconds(),
        zk_security=ZooKeeperSecurity.from_env(),
        s3=s3,
        buckets=tuple(kw["buckets"]),
        locations=parse_s3_locations(kw.get("s3_locations", ()), kw["buckets"]),
        inventories=tuple(str(Path(p).resolve()) for p in kw["inventories"]),
        inventory_schema=parse_schema(kw["inventory_schema"]),
        head_objects=kw["head_objects"],
        subtree_level=kw["subtree_level"],
        concurrency=kw["concurrency"],
    )


def _extract(spark: Any, settings: Any, out: Path) -> Any:
    from services.scan.extract.job import manifest_counts, run_extract

    outcome = run_extract(spark, settings, out, progress=True)
    counts = manifest_counts(outcome.manifest)
    rows = ", ".join(f"{kind} {n}" for kind, n in sorted(counts["rows"].items()))
    # None on Oxia (no global transaction id) and when the listing failed.
    point = "no zxid recorded" if outcome.zxid is None else f"zxid {outcome.zxid}"
    click.echo(f"extract {outcome.scan_id} in {out}: {rows} ({point})")
    for problem in outcome.problems:
        click.echo(f"  task {problem['task_id']} {problem['status']}: {problem['error']}", err=True)
    return outcome


@click.command()
@extract_options
@click.option("--cluster", required=True, help="The Pulsar cluster name (recorded in scan_run).")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(),
    help="The extract run directory, written in place (an input of analyze, not a versioned run).",
)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master; 'submit' takes the one spark-submit was given.",
)
def extract(cluster: str, out_dir: str, master: str, **kw: Any) -> None:
    """Read the metadata store and the allowed buckets into an extract run directory (exit 3
    when a task failed or was truncated: the analysis of such a run proposes nothing)."""
    check_head_objects(kw["head_objects"], kw["accept_unattributed_objects"])
    try:
        settings = extract_settings(cluster, **kw)
        require_source(settings, out_dir)
        with interruptible(lambda: f"the extract in {out_dir} is incomplete") as holder:
            outcome = _extract(holder.start(master), settings, Path(out_dir))
    except TombstoneError as exc:
        raise click.ClickException(str(exc)) from exc
    if outcome.problems:
        sys.exit(3)


@click.command()
@extract_options
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(),
    help="Output directory: each run goes into its own folder OUT/<UTC YYYYmmddTHHMMSSZ>/ "
    "(its extract in OUT/<run>/extract); OUT/latest points at the newest complete run.",
)
@analysis_options
@submit_options
def run(out_dir: str, master: str, **kw: Any) -> None:
    """Extract into OUT/<UTC time>/extract, analyze into OUT/<UTC time>/ (OUT/latest: the
    newest complete run), and with --submit mark the candidates."""
    check_head_objects(kw["head_objects"], kw["accept_unattributed_objects"])
    analysis_keys = (
        "cluster",
        "min_age",
        "allow_short_min_age",
        "max_orphan_share",
        "inactive_cursor_age",
        "dormant_topic_age",
        "deleted_namespace",
    )
    submit_keys = (
        "submit",
        "marker_address",
        "submit_rate",
        "submit_concurrency",
        "submit_concurrency_min",
        "submit_batch",
        "yes",
        "plan_dir",
    )
    try:
        config = analyze_config(*(kw[k] for k in analysis_keys))
        submit = submit_request(cluster=kw["cluster"], **{k: kw.pop(k) for k in submit_keys})
        for key in analysis_keys[1:]:
            kw.pop(key)
        settings = extract_settings(kw.pop("cluster"), **kw)
        if submit is not None and settings.locations:
            # What the extract listed at its own location is submitted naming that location.
            where = {bucket: (endpoint, region) for bucket, endpoint, region in settings.locations}
            submit = dataclasses.replace(
                submit, settings=dataclasses.replace(submit.settings, locations=where)
            )
        require_source(settings, out_dir)
        with versioned_run(out_dir) as (run, holder):
            # Imported here (pyspark takes seconds to import): a SIGINT meanwhile is handled.
            from services.scan.analysis.job import run_analysis

            spark = holder.start(master)
            _extract(spark, settings, run.path / EXTRACT_DIR)
            outcome = run_analysis(
                spark, run.path / EXTRACT_DIR, run.path, config, run_ids=run.ids(), progress=True
            )
            holder.stop()
            status = finish(outcome, run, submit)
    except TombstoneError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(status)
