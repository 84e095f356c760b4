"""Click options that describe a `ClusterSpec`, shared by `devstack simulate` and `demo`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import click

from devstack.simulator.spec import (
    PROFILES,
    ClusterSpec,
    Compression,
    IdLayout,
    LegacyPlan,
    OffloadDriver,
    OrphanPlan,
    PathWriter,
)
from services.core.errors import InvalidArgument
from services.metadata.paths import LedgerLayout

#: Layouts the simulator writes (the legacy 2-4-4 one is not simulated).
LAYOUTS = (LedgerLayout.HIERARCHICAL, LedgerLayout.LONG_HIERARCHICAL, LedgerLayout.FLAT)

F = TypeVar("F", bound=Callable[..., Any])


def _range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        return (int(low), int(high)) if sep else (int(low), int(low))
    except ValueError as e:
        raise click.BadParameter(f"{text!r} is not N or MIN-MAX") from e


#: Orphan kinds planted only when named in --orphans, so that a default seed gives a clean
#: reconcile: another cluster's objects in the bucket make every reconcile of it refuse (a
#: shared bucket), and a "young" ledger is young only until it is older than the age window
#: (its znode ctime is the server's real clock), after which a reconcile rightly proposes it.
OPT_IN_ORPHANS = frozenset({"other_cluster_objects", "young"})
ORPHAN_KINDS = tuple(f.name for f in dataclasses.fields(OrphanPlan))

ORPHANS_HELP = (
    "what to plant: N (N of each orphan and look-alike kind but the opt-in young and "
    "other-cluster-objects), "
    "KIND=N for one kind, all=N for every kind; comma-separated, later items win, e.g. "
    "'1,other-cluster-objects=2'. Kinds: "
    + ", ".join(k.replace("_", "-") for k in ORPHAN_KINDS)
    + ". Opt-in, as a reconcile of the seed does not give a clean run with them: "
    "other-cluster objects (every reconcile of the bucket refuses) and young (too young only "
    "while younger than the reconcile's --min-age; proposed after that)"
)


def parse_orphans(text: str) -> OrphanPlan:
    """The --orphans value as a plan: `N`, `KIND=N` and `all=N` items, later ones winning."""
    counts = dict.fromkeys(ORPHAN_KINDS, 0)
    for item in (part.strip() for part in str(text).split(",")):
        name, sep, value = item.rpartition("=")
        kind = name.strip().replace("-", "_")
        try:
            n = int(value)
        except ValueError:
            raise click.BadParameter(f"{item!r}: the count is not an integer") from None
        if n < 0:
            raise click.BadParameter(f"{item!r}: the count must not be negative")
        if not sep:
            counts.update({k: n for k in ORPHAN_KINDS if k not in OPT_IN_ORPHANS})
        elif kind == "all":
            counts = dict.fromkeys(ORPHAN_KINDS, n)
        elif kind in counts:
            counts[kind] = n
        else:
            raise click.BadParameter(f"{item!r}: unknown kind {name.strip()!r}")
    return OrphanPlan(**counts)


def _orphans_option(_ctx: click.Context, _param: click.Parameter, value: str) -> OrphanPlan:
    return parse_orphans(value)


def spec_options(
    *,
    tenants: int = 2,
    namespaces: int = 2,
    topics: int = 3,
    orphans: str = "1",
    profile: str = "default",
) -> Callable[[F], F]:
    """Add the spec options to a command, with these defaults for the size.

    `--profile legacy` seeds every artifact of the table "What real Pulsar leaves behind"
    (`spec.legacy_spec`); its layout, writer, compression and counts can still be overridden.
    """
    options = [
        click.option(
            "--profile",
            type=click.Choice(PROFILES),
            default=profile,
            show_default=True,
            help="legacy: every artifact real Pulsar versions leave behind",
        ),
        click.option(
            "--layout",
            type=click.Choice([layout.value for layout in LAYOUTS]),
            default=None,
            help="what <ledgers root>/LAYOUT names "
            "[default: hierarchical; legacy: longhierarchical]",
        ),
        click.option(
            "--path-writer",
            type=click.Choice([w.value for w in PathWriter]),
            default=None,
            help="who wrote the ledger znodes: pulsar (hybrid paths, >= 2.10), bookkeeper "
            "(LAYOUT's paths) or mixed [default: pulsar; legacy: mixed]",
        ),
        click.option(
            "--legacy",
            type=int,
            default=None,
            help="how many of each legacy artifact to seed [default: 0; legacy: 1]",
        ),
        click.option(
            "--seed", type=int, default=1, show_default=True, help="the same seed, the same cluster"
        ),
        click.option("--tenants", type=int, default=tenants, show_default=True, help="tenants"),
        click.option(
            "--namespaces", type=int, default=namespaces, show_default=True, help="per tenant"
        ),
        click.option("--topics", type=int, default=topics, show_default=True, help="per namespace"),
        click.option("--ledgers", default="2-5", show_default=True, help="N or MIN-MAX"),
        click.option("--cursors", default="0-2", show_default=True, help="N or MIN-MAX"),
        click.option(
            "--partitioned-share",
            type=float,
            default=0.3,
            show_default=True,
            help="fraction of topics that are partitioned (each partition its own ML)",
        ),
        click.option(
            "--offloaded-share",
            type=float,
            default=0.3,
            show_default=True,
            help="fraction of closed ledgers offloaded (complete)",
        ),
        click.option(
            "--offload-driver",
            type=click.Choice([d.value for d in OffloadDriver]),
            default=OffloadDriver.S3.value,
            show_default=True,
            help="where offloaded ledgers go: an S3 bucket or a filesystem offloader's layout",
        ),
        click.option(
            "--id-layout",
            type=click.Choice([i.value for i in IdLayout]),
            default=IdLayout.SHORT.value,
            show_default=True,
            help="ledger ids: short (31-bit idgen), long (63-bit idgen-long) or mixed (a "
            "cluster that crossed the switch)",
        ),
        click.option(
            "--compression",
            type=click.Choice([c.value for c in Compression]),
            default=None,
            help="ML and cursor znode compression [default: NONE; legacy: LZ4]",
        ),
        click.option(
            "--v2-share",
            type=float,
            default=0.0,
            show_default=True,
            help="fraction of ledger znodes in BookKeeper's metadata format v2 (text); the rest v3",
        ),
        click.option(
            "--cluster-name",
            default="standalone",
            show_default=True,
            help="the Pulsar cluster name (registered under /admin/clusters)",
        ),
        click.option(
            "--bucket", default="pulsar-offload", show_default=True, help="the offload bucket"
        ),
        click.option(
            "--orphans",
            default=orphans,
            show_default=True,
            callback=_orphans_option,
            help=ORPHANS_HELP,
        ),
    ]

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _profile_values(options: dict[str, Any]) -> dict[str, Any]:
    """Layout, writer, compression and legacy counts: the option when given, else the
    profile's value."""
    legacy = options.get("profile") == "legacy"
    defaults: dict[str, Any] = {
        "layout": LedgerLayout.LONG_HIERARCHICAL.value if legacy else "hierarchical",
        "path_writer": PathWriter.MIXED.value if legacy else PathWriter.PULSAR.value,
        "compression": Compression.LZ4.value if legacy else Compression.NONE.value,
        "legacy": 1 if legacy else 0,
    }
    chosen: dict[str, Any] = {
        k: options.get(k) if options.get(k) is not None else v for k, v in defaults.items()
    }
    return {
        "layout": LedgerLayout(chosen["layout"]),
        "path_writer": PathWriter(chosen["path_writer"]),
        "compression": Compression(chosen["compression"]),
        "legacy": LegacyPlan.some(chosen["legacy"]),
    }


def spec_from_options(options: dict[str, Any], **overrides: Any) -> ClusterSpec:
    """Build the spec from the parsed options; a bad value becomes a click usage error."""
    driver = OffloadDriver(options["offload_driver"])
    profile = _profile_values(options)
    orphans = options["orphans"]
    if not isinstance(orphans, OrphanPlan):
        orphans = parse_orphans(orphans)
    if driver is OffloadDriver.FILESYSTEM:
        # Filesystem offloads write no objects, so object orphans cannot be planted.
        orphans = OrphanPlan(
            **{**vars(orphans), "unreferenced_offload": 0, "other_cluster_objects": 0}
        )
    try:
        return ClusterSpec(
            seed=options["seed"],
            tenants=options["tenants"],
            namespaces_per_tenant=options["namespaces"],
            topics_per_namespace=options["topics"],
            ledgers_per_topic=_range(options["ledgers"]),
            cursors_per_topic=_range(options["cursors"]),
            partitioned_share=options["partitioned_share"],
            offloaded_share=options["offloaded_share"],
            offload_driver=driver,
            id_layout=IdLayout(options["id_layout"]),
            compression=profile["compression"],
            layout=profile["layout"],
            path_writer=profile["path_writer"],
            legacy=profile["legacy"],
            v2_share=options["v2_share"],
            cluster_name=options["cluster_name"],
            bucket=options["bucket"],
            orphans=orphans,
            **overrides,
        )
    except InvalidArgument as e:
        raise click.UsageError(str(e)) from e


SPEC_OPTION_NAMES = [
    "profile",
    "layout",
    "path_writer",
    "legacy",
    "seed",
    "tenants",
    "namespaces",
    "topics",
    "ledgers",
    "cursors",
    "partitioned_share",
    "offloaded_share",
    "offload_driver",
    "id_layout",
    "compression",
    "v2_share",
    "cluster_name",
    "bucket",
    "orphans",
]


def broker_style_options(command: F) -> F:
    """`--broker-style` and `--delete-failure-share`, for commands that can unlink part of
    the cluster the way unmodified brokers do (`devstack.simulator.broker_run`)."""
    command = click.option(
        "--delete-failure-share",
        type=click.FloatRange(0.0, 1.0),
        default=0.3,
        show_default=True,
        help="share of the brokers' own deletes that fail every attempt (seeded by --seed)",
    )(command)
    return click.option(
        "--broker-style",
        is_flag=True,
        help="then trim every other topic, switch and unsubscribe its cursors as an "
        "unmodified broker does: metadata first, its own deletes after, no intent recorded",
    )(command)
