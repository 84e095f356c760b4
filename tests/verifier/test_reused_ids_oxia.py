"""Ledger ids given again after a PIP-454 migration, on the devstack Oxia server.

The cluster is laid out as the migration leaves it: every persistent znode of ZooKeeper copied
as a record (`MigrationCoordinator.copy`), `<root>/idgen` among them with the modifications
count of its ZooKeeper data version, 0. A topic's ledger 2 (an id ZooKeeper gave) was
trimmed; its intent is recorded and believed, and the ledger is deleted on it. Then a broker
on Oxia rolls the topic over: ids are drawn as Pulsar draws them there, start again from 1,
and ledger 2 is created again, OPEN, of the same topic. The old intent delivered again must
not delete it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from services.core.config import GrpcServerConfig
from services.core.metrics import Metrics
from services.metadata.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from services.metadata.namespaces import encode_policies, policies_path
from services.metadata.oxia._client import open_client
from services.metadata.paths import LAYOUT_ZNODE, LedgerLayout, LedgerPaths, layout_text
from services.metadata.pulsar_formats import ManagedLedgerInfo, encode_managed_ledger_info
from services.metadata.pulsar_names import managed_ledger_path
from services.metadata.store import MetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import VerifierParts, build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, SkipReason
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from tests.store_kinds import StoreKind
from tests.verifier.world import CLUSTER, ML, data_meta, pdli

PATHS = LedgerPaths()
IDGEN = f"{PATHS.root}/idgen"
OLD = 2
"""The trimmed ledger's id, as ZooKeeper gave it."""
CURRENT = 4
"""The topic's current ledger, still listed."""


class PulsarIdGenerator:
    """Draws ledger ids as Pulsar's `PulsarLedgerIdGenerator.internalGenerateShortLedgerId`
    does on `OxiaMetadataStore` (pulsar-metadata, `org.apache.pulsar.metadata.bookkeeper` and
    `org.apache.pulsar.metadata.impl.oxia`): a put of `<root>/idgen/ID-` with the options
    Sequential and Ephemeral, which `OxiaMetadataStore.storePut` turns into an unconditional
    put of an empty value on the parent `<root>/idgen`, then an ephemeral put, if absent, of
    `ID-` plus the parent's modifications count after that put (`%010d`); the generator then
    deletes that key and takes the number as the ledger id."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def draw(self) -> int:
        _, version = self._client.put(IDGEN, b"")
        number = int(version.modifications_count())
        key, _ = self._client.put(
            f"{IDGEN}/ID-{number:010d}", b"", expected_version_id=-1, ephemeral=True
        )
        self._client.delete(key)
        return number


@contextmanager
def pulsar_ids(kind: StoreKind) -> Iterator[PulsarIdGenerator]:
    client = open_client(kind.address, "default", 10_000, 10.0, lambda _session: None)
    try:
        yield PulsarIdGenerator(client)
    finally:
        client.close()


@pytest.fixture
async def store(oxia_store_kind: StoreKind) -> AsyncIterator[MetadataStore]:
    async with oxia_store_kind.open() as opened:
        yield opened


def ledger(ledger_id: int, state: LedgerState) -> bytes:
    """Ledger metadata as `ManagedLedgerImpl` has BookKeeper create it (no stored `ctime`:
    the creation time is the record's)."""
    closed = state is LedgerState.CLOSED
    return encode_ledger_metadata(
        LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=2,
            write_quorum=2,
            ack_quorum=2,
            state=state,
            length=100 if closed else 0,
            last_entry_id=9 if closed else -1,
            custom_metadata=data_meta(ML),
        )
    )


async def copied_cluster(store: MetadataStore) -> int:
    """What PIP-454's copy leaves on Oxia; returns the ML's version (after the trim of OLD)."""
    await store.create(
        f"{PATHS.root}/{LAYOUT_ZNODE}", layout_text(LedgerLayout.HIERARCHICAL), make_parents=True
    )
    await store.create(IDGEN, b"")  # a fresh record: modifications count 0, as copied
    await store.create(
        policies_path("public/default"), encode_policies([CLUSTER]), make_parents=True
    )
    for ledger_id, state in ((OLD, LedgerState.CLOSED), (CURRENT, LedgerState.OPEN)):
        await store.create(
            PATHS.ledger_path(ledger_id), ledger(ledger_id, state), make_parents=True
        )
    info = ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=CURRENT, entries=0, size=0, timestamp=0)
    path = managed_ledger_path(ML)
    await store.create(path, encode_managed_ledger_info(info), make_parents=True)
    return (await store.get(path)).version


def verifier(store: MetadataStore, s3client: Any) -> VerifierParts:
    config = VerifierConfig(grpc=GrpcServerConfig(port=0), shadow_scan_interval=timedelta(0))
    znodes = MetadataZnodeStore(store)
    return build(config, znodes, S3ObjectStore(s3client), VerifierMetrics(Metrics()))


async def test_a_ledger_id_given_again_is_not_deleted_on_the_old_intent(
    oxia_store_kind: StoreKind, store: MetadataStore, s3client: Any
) -> None:
    version = await copied_cluster(store)
    parts = verifier(store, s3client)
    intent = pdli(OLD, fence=version)
    intent.marked_at_ms = int(time.time() * 1000)
    await parts.believed.add([parse_target(intent).believed_key])

    first = await parts.engine.verify(intent)
    assert first.decision is Decision.DELETE, first
    assert first.bookkeeper is not None
    await store.delete(first.bookkeeper.path, version=first.bookkeeper.version)

    # The new ledger is created after the old one's deletion, in a later millisecond than
    # the intent (the server's clock is this host's).
    await asyncio.sleep(0.01)
    with pulsar_ids(oxia_store_kind) as ids:
        drawn = [await asyncio.to_thread(ids.draw) for _ in range(OLD)]
    assert drawn == [1, OLD]  # counting starts again from the copied count
    await store.create(PATHS.ledger_path(OLD), ledger(OLD, LedgerState.OPEN))

    again = await parts.engine.verify(intent)
    assert (again.decision, again.skip_reason, again.code) == (
        Decision.SKIP,
        SkipReason.MISMATCH,
        "other_incarnation",
    ), again
    assert await store.exists(PATHS.ledger_path(OLD)) is not None
