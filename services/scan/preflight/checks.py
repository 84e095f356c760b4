"""The reconciler's pre-flight: what would make a run fail or lie, found in seconds, before
any Spark work and before anything is written.

`extract` and `run` check the metadata stores (ZooKeeper or Oxia reachable, the Pulsar roots
present, `--cluster` registered; on Oxia the ZooKeeper-only checks are skipped, each with
its reason on stderr), each allowed bucket (HeadBucket with the run's credentials) and the
output folder; `analyze` checks the extract folder (an extract, of `--cluster`) and the output
folder. The remote checks run concurrently, each with its own timeout (ZooKeeper's is the
run's `--zk-timeout`). Every problem is one line `pre-flight: <problem>; <fix>` on stderr and
the command exits with `EXIT_PREFLIGHT`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from services.scan.preflight.problems import Problem

if TYPE_CHECKING:
    from services.scan.extract.units import ExtractSettings

EXIT_PREFLIGHT = 5


def require_source(settings: ExtractSettings, *out_dirs: str | Path) -> None:
    """Pre-flight of `extract` and `run`: exit 5 on any problem."""
    _warn_offload_tier(settings)
    _say_skipped(settings)
    _exit_on(asyncio.run(source_problems(settings, out_dirs)))
    _warn_replication(settings)


def require_extract(extract_dir: str | Path, cluster: str, out_dir: str | Path) -> None:
    """Pre-flight of `analyze`: exit 5 on any problem."""
    _exit_on(extract_problems(Path(extract_dir), cluster) + output_problems(out_dir))


def _exit_on(problems: Sequence[Problem]) -> None:
    for problem in problems:
        click.echo(problem.line, err=True)
    if problems:
        sys.exit(EXIT_PREFLIGHT)


def _warn_replication(settings: ExtractSettings) -> None:
    from services.scan.preflight.sharing import check_replication

    warning = asyncio.run(check_replication(settings))
    if warning is not None:
        click.echo(f"pre-flight: warning: {warning}", err=True)


def _on_oxia(settings: ExtractSettings) -> tuple[bool, bool]:
    """(any store read is on Oxia, every store read is): the ZooKeeper-only checks are
    skipped where they mean nothing."""
    from services.core.shared_clusters import OXIA
    from services.scan.extract.units import bookkeeper_of, policies_store, store_of

    kinds = {
        url.kind
        for url in (store_of(settings, None), bookkeeper_of(settings), policies_store(settings))
    }
    kinds |= {shared.store.kind for shared in settings.shared_clusters}
    return OXIA in kinds, kinds == {OXIA}


def _say_skipped(settings: ExtractSettings) -> None:
    if not _on_oxia(settings)[0]:
        return
    from services.scan.preflight.oxia import OXIA_SKIPPED

    for skipped in OXIA_SKIPPED:
        click.echo(f"pre-flight: skipped on Oxia: {skipped}", err=True)


def _warn_offload_tier(settings: ExtractSettings) -> None:
    if not settings.buckets:
        what = (
            "every --inventory row is ignored without --bucket"
            if settings.inventories
            else "no --bucket and no --inventory"
        )
        click.echo(
            f"pre-flight: warning: {what}: the offload tier will not be scanned (no offloaded "
            "object is read or proposed; the report says so)",
            err=True,
        )


async def source_problems(
    settings: ExtractSettings, out_dirs: Sequence[str | Path]
) -> list[Problem]:
    """Every problem of an extract's sources and outputs (metadata store, buckets, folders)."""
    # Imported here: aiozk and aiobotocore load only when a run really starts.
    from services.scan.extract.s3 import S3Settings
    from services.scan.extract.units import bucket_s3
    from services.scan.preflight.s3 import check_buckets
    from services.scan.preflight.zk import check_metadata

    # ZooKeeper's security settings mean nothing when no store read is a ZooKeeper.
    refusal = None if _on_oxia(settings)[1] else settings.zk_security.refusal()
    if refusal is not None:  # before any connection: it would be made without the security
        return [Problem(refusal, "unset it; see docs/operations.md, ZooKeeper security")]
    checks = [
        check_metadata(
            settings.zookeeper,
            settings.chroot,
            settings.ledgers_root,
            settings.cluster,
            configuration_store=settings.configuration_store,
            bookkeeper_store=settings.bookkeeper_store,
            metadata_store=settings.metadata_store,
            security=settings.zk_security,
            timeout_s=settings.zk_timeout_s,
        )
    ]
    # With inventory files, S3 is only asked for the objects' HEADs.
    if settings.buckets and (settings.head_objects or not settings.inventories):
        # Each bucket where it is listed: at its `--s3-location`, else the run's endpoint.
        groups: dict[S3Settings, list[str]] = {}
        for bucket in settings.buckets:
            groups.setdefault(bucket_s3(settings, bucket), []).append(bucket)
        checks += [check_buckets(where, group) for where, group in groups.items()]
    found = await asyncio.gather(*checks)
    # The folders are nested (`run`: OUT, then OUT/extract): the first one's problem is enough.
    local = next((found for found in map(output_problems, out_dirs) if found), [])
    return [problem for problems in found for problem in problems] + local


def output_problems(out_dir: str | Path) -> list[Problem]:
    """The output folder is a folder, or can be created, and this user may write in it."""
    path = Path(out_dir)
    if path.exists():
        if not path.is_dir():
            return [Problem(f"--out {path} is a file", "give a folder path or move the file")]
        if not os.access(path, os.W_OK | os.X_OK):
            return [
                Problem(
                    f"--out {path} is not writable", "fix its permissions or choose another --out"
                )
            ]
        return []
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return [
            Problem(f"--out {path} cannot be created: {parent} is a file", "choose another --out")
        ]
    if not os.access(parent, os.W_OK | os.X_OK):
        return [
            Problem(
                f"--out {path} cannot be created: {parent} is not writable",
                "create the folder with the right owner or choose another --out",
            )
        ]
    return []


def extract_problems(extract_dir: Path, cluster: str) -> list[Problem]:
    """The folder holds an extract (its run and manifest tables readable) of `cluster`."""
    fix = "give the folder `tombstone reconcile extract --out` wrote (OUT/extract after `run`)"
    if not extract_dir.exists():
        return [Problem(f"--extract {extract_dir} does not exist", fix)]
    if not extract_dir.is_dir():
        return [Problem(f"--extract {extract_dir} is a file", fix)]
    from services.scan.schema import OPTIONAL_TABLES, TABLES

    missing = [
        table
        for table in TABLES
        if table not in OPTIONAL_TABLES and not (extract_dir / table).is_dir()
    ]
    if missing:
        return [
            Problem(f"--extract {extract_dir} is not an extract (no {', '.join(missing)})", fix)
        ]
    try:
        clusters = _read_column(extract_dir / "scan_run", "cluster_name")
        _read_column(extract_dir / "scan_manifest", "status")
    except Exception as e:  # an unreadable table is one line, whatever the reader raised
        return [Problem(f"--extract {extract_dir}: unreadable ({type(e).__name__}: {e})", fix)]
    if len(clusters) != 1:
        return [
            Problem(f"--extract {extract_dir}: scan_run holds {len(clusters)} rows, not 1", fix)
        ]
    if clusters[0] != cluster:
        return [
            Problem(
                f"--cluster {cluster}: the extract {extract_dir} was taken of cluster "
                f"{clusters[0]!r}",
                f"give --cluster {clusters[0]} or the extract of {cluster}",
            )
        ]
    return []


def _read_column(table_dir: Path, column: str) -> list[object]:
    # pyarrow reads the Parquet dataset Spark wrote, without starting a JVM.
    import pyarrow.parquet as pq

    return list(pq.read_table(table_dir, columns=[column]).column(column).to_pylist())
