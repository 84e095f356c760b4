"""Leaking setting combinations are refused at start, checked against the real ZooKeeper."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.core.metrics import Metrics
from services.metadata.peer_settings import (
    PeerSettings,
    Published,
    UnsafeSettings,
    conflicts,
    retry_budget,
)
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.store_kinds import StoreKind
from tests.verifier.world import World

ROOT = Path(__file__).resolve().parents[2]
MARKER = Published("marker", "m1", offload_tier=True, retry_window_s=60.0)
VERIFIER = Published("verifier", "v1", allowed_buckets=("offload",))
DELETER = Published("deleter", "d1", allowed_buckets=("offload",), retry_budget_s=649.0)


@pytest.fixture
async def store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(zk.address) as connected:
        yield connected


def test_a_consistent_deployment_has_no_conflict() -> None:
    """Marker, verifier and deleter with the defaults and one allowed bucket agree."""
    assert conflicts(MARKER, [MARKER, VERIFIER, DELETER]) == []
    assert conflicts(VERIFIER, [MARKER, VERIFIER, DELETER]) == []
    assert conflicts(DELETER, [MARKER, VERIFIER, DELETER]) == []


@pytest.mark.parametrize(
    ("mine", "peer", "says"),
    [
        (Published("verifier", "v2", allowed_buckets=()), MARKER, "allows no bucket"),
        (
            Published("marker", "m2", offload_tier=True, default_bucket="legacy"),
            VERIFIER,
            "default offload bucket 'legacy'",
        ),
        (
            Published("verifier", "v2", allowed_buckets=("a", "b"), default_bucket="b"),
            Published("marker", "m2", offload_tier=True, default_bucket="a"),
            "TOMBSTONE_OFFLOAD_DEFAULT_BUCKET differs",
        ),
        (Published("deleter", "d2", allowed_buckets=(), retry_budget_s=900), VERIFIER, "approves"),
        (
            Published("deleter", "d2", allowed_buckets=("offload",), retry_budget_s=30),
            MARKER,
            "retry",
        ),
        (
            Published("verifier", "v2", allowed_buckets=("a",), default_bucket="b"),
            Published("deleter", "d3", allowed_buckets=("a",)),
            "2.1",
        ),
        (
            Published("verifier", "v2", allowed_buckets=("offload",), cluster="west"),
            Published("marker", "m2", cluster=""),
            "acts on no other cluster's",
        ),
    ],
    ids=[
        "offload-tier-without-buckets",
        "default-bucket-not-allowed",
        "default-buckets-differ",
        "deleter-lacks-a-bucket",
        "retry-window-beyond-budget",
        "verifier-default-not-allowed",
        "cluster-names-differ",
    ],
)
def test_leaking_combinations_are_named(mine: Published, peer: Published, says: str) -> None:
    """Each leaking pair gives one problem naming what to change, from either side."""
    [problem] = conflicts(mine, [peer])
    assert says in problem
    if mine.service == "verifier" and says == "2.1":
        return  # a verifier's own inconsistency, not a pair
    assert [problem] == conflicts(peer, [mine])


WEST, EAST = "http://s3.west.example:9000", "https://s3.east.example"


def test_a_verifier_allowing_an_endpoint_the_deleter_does_not_is_named() -> None:
    """The verifier approves deletes at an endpoint where the deleter may not delete: every
    DELETE there would be dead-lettered. Named from either side, with the deleter's settings."""
    verifier = Published(
        "verifier", "v2", allowed_buckets=("offload",), allowed_endpoints=(EAST, WEST)
    )
    deleter = Published("deleter", "d2", allowed_buckets=("offload",), allowed_endpoints=(WEST,))
    [problem] = conflicts(verifier, [deleter])
    assert EAST in problem
    assert "TOMBSTONE_S3_ALLOWED_ENDPOINTS" in problem
    assert conflicts(deleter, [verifier]) == [problem]


def test_a_deleter_allowing_more_endpoints_or_a_peer_predating_them_is_consistent() -> None:
    """More endpoints at the deleter leak nothing; a peer publishing none cannot be compared."""
    verifier = Published("verifier", "v2", allowed_buckets=("offload",), allowed_endpoints=(WEST,))
    deleter = Published(
        "deleter", "d2", allowed_buckets=("offload",), allowed_endpoints=(EAST, WEST)
    )
    assert conflicts(verifier, [deleter]) == []
    assert conflicts(verifier, [DELETER]) == []
    assert Published.decode(verifier.encode()) == verifier


def test_both_services_publish_their_canonical_endpoints_from_the_environment() -> None:
    """The configured endpoint and the extra ones, in canonical form, from the same
    variables: a verifier and a deleter spelling one endpoint differently agree."""
    from services.deleter import app as deleter_app
    from services.deleter.config import DeleterConfig
    from services.verifier import app as verifier_app
    from services.verifier.config import VerifierConfig

    common = {
        "TOMBSTONE_S3_ALLOWED_BUCKETS": "offload",
        "TOMBSTONE_VERIFIER_CLUSTER_NAME": "standalone",
        "TOMBSTONE_PULSAR_SERVICE_URL": "pulsar://127.0.0.1:6650",
    }
    verifier = verifier_app.published_settings(
        VerifierConfig.from_env(
            {
                **common,
                "TOMBSTONE_S3_ENDPOINT_URL": "HTTP://Minio:9000/",
                "TOMBSTONE_S3_ALLOWED_ENDPOINTS": "https://s3.east.example:443",
            }
        )
    )
    deleter = deleter_app.published_settings(
        DeleterConfig.from_env(
            {
                **common,
                "TOMBSTONE_S3_ENDPOINT_URL": "http://minio:9000",
                "TOMBSTONE_S3_ALLOWED_ENDPOINTS": "https://S3.East.Example",
            }
        )
    )
    assert verifier.allowed_endpoints == ("http://minio:9000", "https://s3.east.example")
    assert conflicts(verifier, [deleter]) == []


def test_a_marker_without_the_offload_tier_needs_no_bucket() -> None:
    """TOMBSTONE_MARKER_OFFLOAD_TIER=false beside a verifier without buckets is consistent."""
    marker = Published("marker", "m2", offload_tier=False, retry_window_s=60.0)
    assert conflicts(Published("verifier", "v2", allowed_buckets=()), [marker]) == []


def test_the_default_retry_budget_is_the_shortest_time_to_the_dead_letter() -> None:
    """Defaults (1 s doubling to 5 min, 10 retries, jitter 0.2): 811 s at least 0.8 of it."""
    budget = retry_budget(
        initial=timedelta(seconds=1),
        max_delay=timedelta(minutes=5),
        multiplier=2.0,
        jitter=0.2,
        retries=10,
    )
    assert round(budget.total_seconds(), 1) == 648.8


async def test_a_verifier_without_buckets_is_refused_beside_an_offloading_marker(
    store: ZkMetadataStore,
) -> None:
    """The marker published first; the verifier joining after it is refused and leaves no
    entry, while the marker's entry stays."""
    marker = PeerSettings(store, MARKER)
    await marker.join()
    verifier = PeerSettings(store, Published("verifier", "v2", allowed_buckets=()))
    with pytest.raises(UnsafeSettings, match="allows no bucket"):
        await verifier.join()
    assert [p.service for p in await marker.peers()] == ["marker"]


async def test_a_marker_is_refused_beside_a_verifier_without_buckets(
    store: ZkMetadataStore,
) -> None:
    """Whichever starts second is refused: here the marker."""
    await PeerSettings(store, Published("verifier", "v2", allowed_buckets=())).join()
    with pytest.raises(UnsafeSettings, match="TOMBSTONE_MARKER_OFFLOAD_TIER=false"):
        await PeerSettings(store, MARKER).join()


async def test_a_marker_whose_retry_window_outlasts_the_deleter_budget_is_refused(
    store: ZkMetadataStore,
) -> None:
    """A deleter that dead-letters after 1.2 s and a marker that may write 60 s late."""
    short = Published("deleter", "d2", allowed_buckets=("offload",), retry_budget_s=1.2)
    await PeerSettings(store, short).join()
    with pytest.raises(UnsafeSettings, match="TOMBSTONE_MARKER_RETRY_WINDOW"):
        await PeerSettings(store, MARKER).join()


async def test_entries_vanish_with_their_session(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """Entries are ephemeral: a stopped (or crashed) instance no longer constrains others."""
    async with ZkMetadataStore.connect(zk.address) as other:
        await PeerSettings(other, MARKER).join()
        assert [p.service for p in await PeerSettings(store, VERIFIER).peers()] == ["marker"]
    await PeerSettings(store, Published("verifier", "v2", allowed_buckets=())).join()


async def test_a_conflicting_peer_published_later_is_reported(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """A running instance cannot refuse a peer that skipped the check: it logs the conflict
    and sets `tombstone_settings_conflicts`; its own entry is re-published if lost."""
    metrics = Metrics()
    marker = PeerSettings(store, MARKER, metrics=metrics)
    await marker.join()
    async with ZkMetadataStore.connect(zk.address) as other:
        late = Published("verifier", "v2", allowed_buckets=())
        await other.create(
            "/tombstone/settings/verifier/v2", late.encode(), make_parents=True, ephemeral=True
        )
        await store.delete(marker.path, version=-1)
        problems = await marker.check()
        assert len(problems) == 1
        assert b"tombstone_settings_conflicts 1.0" in metrics.render()
        assert await store.exists(marker.path) is not None


@pytest.mark.parametrize(
    ("service", "peer", "env", "names"),
    [
        ("verifier", MARKER, {}, "TOMBSTONE_S3_ALLOWED_BUCKETS"),
        (
            "marker",
            Published("deleter", "d2", allowed_buckets=("offload",), retry_budget_s=1.2),
            {"TOMBSTONE_MARKER_BELIEVE_ENABLED": "false"},
            "TOMBSTONE_MARKER_RETRY_WINDOW",
        ),
    ],
    ids=["verifier-without-buckets", "marker-retry-window"],
)
async def test_a_refused_process_exits_with_one_line(
    zk: ZooKeeperServer, service: str, peer: Published, env: dict[str, str], names: str
) -> None:
    """`python -m services.<service>` beside a running peer it would leak with: exit status 1
    and one line on stderr (no traceback) that names the variable to change."""
    async with ZkMetadataStore.connect(zk.address) as store:
        # A cluster the services accept at start (ledgers root, LAYOUT, /managed-ledgers), so
        # that what refuses them is the peer's settings.
        await World(store).bookkeeper_root()
        await PeerSettings(store, peer).join()
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            f"services.{service}",
            cwd=ROOT,
            env=inherited
            | env
            | {
                "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
                "TOMBSTONE_GRPC_PORT": "0",
                "TOMBSTONE_METRICS_PORT": "0",
            },
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), 60)
    text = err.decode()
    refusals = [line for line in text.splitlines() if line.startswith(f"{service}: refusing")]
    assert process.returncode == 1
    assert "Traceback" not in text
    assert len(refusals) == 1
    assert names in refusals[0]


async def test_leaving_during_a_store_outage_leaves_the_entry_to_the_session(
    store_kind: StoreKind,
) -> None:
    """The store stops answering while an instance stops: `leave` returns (the entry goes
    with the session), so the service's shutdown is not cut short by the outage."""
    async with store_kind.open() as session:
        settings = PeerSettings(session, VERIFIER)
        await settings.join()
        if store_kind.oxia is not None:
            await asyncio.to_thread(store_kind.oxia.halt_from_thread)
        else:
            assert store_kind.zk is not None
            await asyncio.to_thread(store_kind.zk.stop)
        try:
            await settings.leave()
        finally:
            if store_kind.zk is not None:
                await asyncio.to_thread(store_kind.zk.start)
