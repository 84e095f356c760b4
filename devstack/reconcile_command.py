"""The `tombstone reconcile run` command for a seeded devstack cluster.

`devstack simulate` prints it and the demo runs it, so both describe the same run: this
devstack's ZooKeeper, S3 endpoint and bucket, its cluster name, the devstack S3 credentials as
`TOMBSTONE_S3_*` variables, and a short age window.

The window: ZooKeeper's znode ctime and S3's LastModified are the servers' real clocks and
cannot be backdated, so everything a seed plants is minutes old while the reconciler's default
window is 3 days. `SEEDED_MIN_AGE` (with the explicit override the reconciler asks for below
its 1-day floor) lets it judge planted data once that data is that old; a stack that cannot
spare the minute (the demo under test, `tombstone demo --reconcile-min-age`) gives its target
a shorter window and waits for that instead. For the same reason
the simulator's "young" look-alike is planted only on request: it stays young only until it
is older than the window.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import timedelta

from devstack import s3 as s3_launcher
from devstack.s3 import S3Locations
from devstack.simulator.spec import ClusterSpec, OffloadDriver, OrphanPlan
from services.core.durations import format_duration

SEEDED_MIN_AGE = timedelta(minutes=1)
SEEDED_MIN_AGE_TEXT = "1m"


@dataclass(frozen=True)
class ReconcileTarget:
    """Where a seeded cluster lives, as `tombstone reconcile run` needs it."""

    zookeeper: str
    cluster: str
    ledgers_root: str = "/ledgers"
    s3_endpoint: str | None = None
    bucket: str | None = None
    elsewhere: tuple[tuple[str, str, str], ...] = ()
    """(bucket, endpoint, region) of each bucket a namespace's offload policy puts at another
    S3 location."""
    metadata_store: str | None = None
    """Pulsar's store as a URL (`oxia://host:port/broker`), in place of `zookeeper`."""
    bookkeeper_metadata: str | None = None
    """BookKeeper's store as a URL, when it is not Pulsar's."""
    min_age: timedelta = SEEDED_MIN_AGE
    """The runs' --min-age: planted data is proposed once it is this old."""

    @property
    def min_age_text(self) -> str:
        return format_duration(self.min_age)

    @classmethod
    def of(
        cls,
        spec: ClusterSpec,
        zookeeper: str,
        s3: str | S3Locations | None,
        min_age: timedelta = SEEDED_MIN_AGE,
    ) -> ReconcileTarget:
        """The target of a cluster seeded from `spec` (its S3 endpoint, or every location it
        offloads to); the buckets only when they hold objects."""
        offloads_to_s3 = spec.offload_driver is OffloadDriver.S3 and s3 is not None
        endpoint = s3.endpoint if isinstance(s3, S3Locations) else s3
        elsewhere = s3.reconcile_locations() if isinstance(s3, S3Locations) else ()
        return cls(
            zookeeper=zookeeper,
            cluster=spec.cluster_name,
            ledgers_root=spec.ledgers_root,
            s3_endpoint=endpoint if offloads_to_s3 else None,
            bucket=spec.bucket if offloads_to_s3 else None,
            elsewhere=elsewhere if offloads_to_s3 else (),
            min_age=min_age,
        )


def reconcile_args(target: ReconcileTarget, out: str, *extra: str) -> list[str]:
    """Arguments after `tombstone`: a dry run unless `extra` adds --submit."""
    if target.metadata_store is not None:
        args = ["reconcile", "run", "--metadata-store", target.metadata_store]
    else:
        args = ["reconcile", "run", "--zookeeper", target.zookeeper]
    if target.bookkeeper_metadata is not None:
        args += ["--bookkeeper-metadata", target.bookkeeper_metadata]
    if target.ledgers_root != "/ledgers":
        args += ["--ledgers-root", target.ledgers_root]
    if target.s3_endpoint is not None and target.bucket is not None:
        args += ["--s3-endpoint", target.s3_endpoint, "--bucket", target.bucket]
        for bucket, endpoint, region in target.elsewhere:
            args += ["--bucket", bucket, "--s3-location", f"{bucket}={endpoint},{region}"]
    args += ["--cluster", target.cluster, "--out", out]
    args += ["--min-age", target.min_age_text, "--allow-short-min-age", *extra]
    return args


def reconcile_env(target: ReconcileTarget) -> dict[str, str]:
    """The devstack S3 credentials (moto accepts any; these are the devstack's) and region."""
    if target.s3_endpoint is None:
        return {}
    return {
        "TOMBSTONE_S3_ACCESS_KEY_ID": s3_launcher.ACCESS_KEY,
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": s3_launcher.SECRET_KEY,
        "TOMBSTONE_S3_REGION": s3_launcher.REGION,
    }


def shell_command(target: ReconcileTarget, out: str) -> str:
    """One shell line: the variables, then `tombstone reconcile run ...`."""
    env = [f"{name}={shlex.quote(value)}" for name, value in reconcile_env(target).items()]
    return " ".join([*env, shlex.join(["tombstone", *reconcile_args(target, out)])])


def explain(target: ReconcileTarget, out: str, orphans: OrphanPlan, *, left_behind: int = 0) -> str:
    """What `devstack simulate` prints last: the command and why it looks the way it does.
    `left_behind`: (ledger, tier) pairs broker-style unlinks left behind (`--broker-style`)."""
    lines = [
        "Reconcile it (dry run) with:",
        f"  {shell_command(target, out)}",
        f"  --min-age {SEEDED_MIN_AGE_TEXT} --allow-short-min-age: planted data is minutes old "
        "(znode and object times are the servers' real clocks) and the default window is 3d; "
        f"the planted orphans are proposed once they are {SEEDED_MIN_AGE_TEXT} old.",
    ]
    if orphans.other_cluster_objects and target.bucket is not None:
        lines.append(
            "  Other-cluster objects were planted: that run refuses (another cluster's objects "
            "in the bucket)."
        )
    if left_behind:
        lines.append(
            f"  Broker-style unlinks left {left_behind} (ledger, tier) behind: that run proposes "
            "them too, once they are as old (no follower recorded them)."
        )
    if orphans.young:
        lines.append(
            f"  Young ledgers were planted: too young only until they are {SEEDED_MIN_AGE_TEXT} "
            "old, proposed after that."
        )
    return "\n".join(lines)
