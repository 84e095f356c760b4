"""The reconciler's pre-flight and store options on Oxia (the devstack server, no Spark): the
same checks as on ZooKeeper where they mean something, the ZooKeeper-only ones skipped with
their reason, and Pulsar's store named by exactly one of `--zookeeper` and `--metadata-store`;
a configuration store in an Oxia namespace of its own."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from services.core.shared_clusters import OXIA, ZOOKEEPER, StoreUrl
from services.metadata import MANAGED_LEDGERS_ROOT
from services.metadata.namespaces import POLICIES_ROOT, encode_policies
from services.metadata.oxia import OxiaMetadataStore
from services.scan.cli.errors import UsageProblem
from services.scan.cli.sharing import metadata_store
from services.scan.extract.units import NAMESPACES, ExtractSettings, Unit, run_unit
from services.scan.preflight.checks import require_source, source_problems
from services.scan.preflight.tree import CLUSTERS_ROOT

CLUSTER = "standalone"
POLICIES = encode_policies([CLUSTER])


@pytest.fixture
def oxia() -> Iterator[OxiaServer]:
    with running_in_thread(shards=2) as server:
        yield server


def _settings(address: str) -> ExtractSettings:
    return ExtractSettings(
        zookeeper="",
        cluster=CLUSTER,
        metadata_store=StoreUrl(OXIA, address, ""),
        zk_timeout_s=5.0,
    )


async def _pulsar_roots(address: str) -> None:
    """The roots Pulsar's and BookKeeper's initialisation leave (`/managed-ledgers`, the
    ledgers root, the cluster's registration under `/admin/clusters`), in one namespace."""
    async with OxiaMetadataStore.connect(
        address, session_timeout=5.0, request_timeout=5.0
    ) as store:
        await store.create(MANAGED_LEDGERS_ROOT)
        await store.create("/ledgers")
        await store.create(f"{CLUSTERS_ROOT}/{CLUSTER}", b"{}", make_parents=True)


async def test_an_empty_namespace_is_every_missing_root(oxia: OxiaServer) -> None:
    """An Oxia namespace without Pulsar's metadata: each missing root and the unregistered
    cluster is a problem naming --metadata-store, as on ZooKeeper."""
    problems = [p.line for p in await source_problems(_settings(oxia.address), [])]
    assert len(problems) == 3, problems
    assert all(f"Oxia {oxia.address}" in line for line in problems), problems
    assert any(f"{MANAGED_LEDGERS_ROOT} missing" in line for line in problems)
    assert any("--ledgers-root /ledgers missing" in line for line in problems)
    assert any(f"{CLUSTERS_ROOT} missing" in line for line in problems)


async def test_nothing_listening_is_connection_refused() -> None:
    """No Oxia at the address: one line, "connection refused", with the option to fix."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    problems = await source_problems(_settings(f"127.0.0.1:{port}"), [])
    assert len(problems) == 1
    assert "connection refused" in problems[0].line
    assert "--metadata-store" in problems[0].line


async def test_bookkeeper_store_on_oxia_is_checked_there(oxia: OxiaServer) -> None:
    """Pulsar's metadata in one store, the ledgers root in BookKeeper's Oxia: the ledgers
    root is looked for in BookKeeper's store, with the fix naming --bookkeeper-metadata."""
    await _pulsar_roots(oxia.address)
    async with OxiaMetadataStore.connect(
        oxia.address, session_timeout=5.0, request_timeout=5.0
    ) as store:
        await store.delete("/ledgers", version=(await store.get("/ledgers")).version)
    settings = replace(_settings(oxia.address), bookkeeper_store=StoreUrl(OXIA, oxia.address, ""))
    problems = [p.line for p in await source_problems(settings, [])]
    assert len(problems) == 1, problems
    assert "--ledgers-root /ledgers missing" in problems[0]
    assert "--bookkeeper-metadata" in problems[0]


async def test_a_pulsar_namespace_passes_and_says_what_was_skipped(
    oxia: OxiaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With Pulsar's roots there, the pre-flight passes (no exit) and says on stderr which
    ZooKeeper-only checks it skipped and why."""
    await _pulsar_roots(oxia.address)
    await asyncio.to_thread(require_source, _settings(oxia.address), tmp_path / "out")
    skipped = [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("pre-flight: skipped on Oxia:")
    ]
    assert len(skipped) == 2, skipped
    assert "ACLs" in skipped[0]
    assert "zxid" in skipped[1]


def test_the_metadata_store_is_named_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--metadata-store` (or TOMBSTONE_METADATA_STORE_URL) or `--zookeeper`/`--chroot`:
    one of them, never both, never neither; a zk: URL is the same ZooKeeper store."""
    monkeypatch.delenv("TOMBSTONE_METADATA_STORE_URL", raising=False)
    assert StoreUrl(OXIA, "oxia:6648", "pulsar") == metadata_store(
        "oxia://oxia:6648/pulsar", None, None
    )
    assert StoreUrl(ZOOKEEPER, "zk:2181", "/p") == metadata_store("zk:zk:2181/p", None, None)
    assert StoreUrl(ZOOKEEPER, "zk:2181", "/p") == metadata_store(None, "zk:2181", "/p")
    for raw, zookeeper in (("oxia://oxia:6648", "zk:2181"), (None, None)):
        with pytest.raises(UsageProblem):
            metadata_store(raw, zookeeper, None)
    monkeypatch.setenv("TOMBSTONE_METADATA_STORE_URL", "oxia://oxia:6648/pulsar")
    assert StoreUrl(OXIA, "oxia:6648", "pulsar") == metadata_store(None, None, None)
    with pytest.raises(UsageProblem, match="TOMBSTONE_METADATA_STORE_URL"):
        metadata_store(None, "zk:2181", None)


@pytest.fixture
def two_namespaces() -> Iterator[OxiaServer]:
    """A server with Pulsar's namespace and a configuration store's (stopped from a
    synchronous teardown, outside the test's loop)."""
    with running_in_thread(namespaces=("default", "config")) as server:
        yield server


async def test_a_configuration_store_on_oxia_is_where_the_cluster_and_policies_are(
    two_namespaces: OxiaServer,
) -> None:
    """`--configuration-store oxia://.../config`: the cluster's registration is looked for
    in that namespace (the fix names the option), and the namespace policies are read
    there."""
    server = two_namespaces
    await _pulsar_roots(server.address)
    config = StoreUrl(OXIA, server.address, "config")
    settings = replace(_settings(server.address), configuration_store=config)
    missing = [p.line for p in await source_problems(settings, [])]
    async with OxiaMetadataStore.connect(
        server.address, namespace="config", session_timeout=5.0, request_timeout=5.0
    ) as store:
        await store.create(f"{CLUSTERS_ROOT}/{CLUSTER}", b"{}", make_parents=True)
        await store.create(f"{POLICIES_ROOT}/t/ns", POLICIES, make_parents=True)
    registered = await source_problems(settings, [])
    out = await run_unit(Unit(NAMESPACES, POLICIES_ROOT), settings)
    assert len(missing) == 1, missing
    assert f"{CLUSTERS_ROOT} missing" in missing[0], missing
    assert "--configuration-store" in missing[0], missing
    assert registered == []
    assert [(t, r["namespace"]) for t, r in out if t == "namespaces"] == [("namespaces", "t/ns")]
