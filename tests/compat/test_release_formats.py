"""The current decoders read what earlier releases wrote (docs/upgrade.md, "Formats").

`tests/fixtures/release-<n>/` holds the bytes release n's encoders produced
(`python -m tests.compat.release_fixtures`): PDLIs of each kind, unsigned and signed as a
batch, and a follower checkpoint. The expected values below are written out by hand, not
recomputed, so a decoder that drifts fails here. A release adds its directory and keeps the
old ones; a directory whose format is no longer read must be removed together with a note in
docs/upgrade.md saying which release stopped reading it.
"""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.core.signing import SignatureStatus, TrustedKeys, key_id_of
from services.core.signing_keys import load_public_key
from services.marker.follower.checkpoint import (
    GENERATIONS,
    POINTER,
    CheckpointStore,
    Pointer,
    decompress,
)
from services.marker.follower.index import CZXID, VERSION, OwnerIndex, kind_of, ledger_ids, ml_refs
from services.marker.follower.owner_paths import Kind
from services.systopic.messages import decode_intent
from tests.marker.live import zk_store
from tombstone.v1 import pending_delete_pb2 as _pd

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RELEASES = sorted(p.name for p in FIXTURES.glob("release-*"))
ML_NAME = "public/default/persistent/orders"
SHARED = _pd.PendingDeleteLedgerInfo(
    topic_name="persistent://public/default/orders",
    marked_at_ms=1_700_000_000_000,
    not_before_ms=1_700_000_005_000,
    marker_id="marker-1",
    cluster="tombstone",
)
OWN_FIELDS = {
    "ledger": _pd.PendingDeleteLedgerInfo(
        ledger_id=101,
        ledger_type=_pd.LEDGER,
        component=_pd.MANAGED_LEDGER,
        managed_ledger_name=ML_NAME,
        fence_token=8,
        source=_pd.BROKER,
        request_id="req-0001",
    ),
    "offload": _pd.PendingDeleteLedgerInfo(
        ledger_id=102,
        ledger_type=_pd.OFFLOAD_LEDGER,
        component=_pd.MANAGED_LEDGER,
        managed_ledger_name=ML_NAME,
        fence_token=8,
        source=_pd.BROKER,
        request_id="req-0001",
        offload_context=_pd.OffloadContext(
            uuid_msb=0x6F1C1D8E4B1F4E0A,
            uuid_lsb=-0x65AAFEDCBA987655,
            driver_name="aws-s3",
            driver_metadata={"bucket": "offload-bucket"},
            complete=True,
            timestamp_ms=1_699_999_940_000,
        ),
    ),
    "cursor": _pd.PendingDeleteLedgerInfo(
        ledger_id=103,
        ledger_type=_pd.LEDGER,
        component=_pd.MANAGED_CURSOR,
        managed_ledger_name=ML_NAME,
        cursor_name="sub-1",
        fence_token=3,
        source=_pd.OBSERVED,
    ),
    "schema": _pd.PendingDeleteLedgerInfo(
        ledger_id=104,
        ledger_type=_pd.LEDGER,
        component=_pd.SCHEMA_STORAGE,
        schema_id="public/default/orders",
        fence_token=5,
        source=_pd.RECONCILER,
    ),
}


def _with_shared(own: _pd.PendingDeleteLedgerInfo) -> _pd.PendingDeleteLedgerInfo:
    pdli = _pd.PendingDeleteLedgerInfo()
    pdli.CopyFrom(SHARED)
    pdli.MergeFrom(own)
    return pdli


EXPECTED_PDLIS = {kind: _with_shared(own) for kind, own in OWN_FIELDS.items()}
EXPECTED_OWNERS = {
    # path: (kind, znode version, czxid, ledger ids in order)
    f"/managed-ledgers/{ML_NAME}": (Kind.ML, 7, 42, [101, 102, 105]),
    f"/managed-ledgers/{ML_NAME}/sub-1": (Kind.CURSOR, 2, 43, [103]),
    "/schemas/public/default/orders": (Kind.SCHEMA, 4, 44, [104, 106]),
}
BOTH_TIERS = (_pd.LEDGER, _pd.OFFLOAD_LEDGER)


def _trusted(release: Path) -> TrustedKeys:
    public = load_public_key(str(release / "marker.pub"))
    return TrustedKeys({key_id_of(public): public})


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("kind", sorted(EXPECTED_PDLIS))
def test_pdlis_decode_to_the_same_intent(release: str, kind: str) -> None:
    """Each PDLI, unsigned and signed, decodes (with its message properties) to the intent it
    was; the signed one still verifies against the release's public key."""
    folder = FIXTURES / release
    properties = json.loads((folder / "pdli-properties.json").read_text(encoding="utf-8"))
    trusted = _trusted(folder)
    results = []
    for variant in ("unsigned", "signed"):
        name = f"pdli-{kind}-{variant}.bin"
        pdli = decode_intent((folder / name).read_bytes(), properties[name])
        status = trusted.check(pdli)
        pdli.ClearField("signing_key_id")
        pdli.ClearField("signature")
        results.append((pdli, status))
    expected = EXPECTED_PDLIS[kind]
    assert results == [
        (expected, SignatureStatus.UNSIGNED),
        (expected, SignatureStatus.VALID),
    ]


def _check_index(index: OwnerIndex) -> None:
    owners = {
        path: (kind_of(entry), entry[VERSION], entry[CZXID], list(ledger_ids(entry)))
        for path, entry in index.items()
    }
    ml_entry = index.get(f"/managed-ledgers/{ML_NAME}")
    assert isinstance(ml_entry, array)
    refs = ml_refs(ml_entry, index.drivers)
    offload = refs[102].offload
    assert owners == EXPECTED_OWNERS
    assert {i: r.tiers for i, r in refs.items()} == {
        101: (_pd.LEDGER,),
        102: BOTH_TIERS,
        105: (_pd.LEDGER,),
    }
    assert offload is not None
    assert (offload.uuid_msb, offload.driver_name, dict(offload.driver_metadata)) == (
        0x6F1C1D8E4B1F4E0A,
        "aws-s3",
        {"bucket": "offload-bucket"},
    )


@pytest.mark.parametrize("release", RELEASES)
def test_follower_checkpoint_decodes_to_the_same_index(release: str) -> None:
    """The checkpoint's pointer parses, its digest matches, its index has every owner."""
    folder = FIXTURES / release
    pointer = Pointer(**json.loads((folder / "follower-checkpoint-pointer.json").read_bytes()))
    blob = (folder / "follower-checkpoint-chunk-0.bin").read_bytes()
    assert (pointer.chunks, pointer.owners, pointer.references) == (1, 3, 6)
    _check_index(decompress(blob))


@pytest.mark.parametrize("release", RELEASES)
async def test_a_follower_loads_the_checkpoint_from_zookeeper(
    release: str, zk: ZooKeeperServer
) -> None:
    """Put in ZooKeeper where the release wrote it, the checkpoint is what a new follower's
    `CheckpointStore.load` reads back whole."""
    folder = FIXTURES / release
    raw_pointer = (folder / "follower-checkpoint-pointer.json").read_bytes()
    pointer = Pointer(**json.loads(raw_pointer))
    async with zk_store(zk) as store:
        chunk = f"{GENERATIONS}/{pointer.generation}/0"
        await store.create(
            chunk, (folder / "follower-checkpoint-chunk-0.bin").read_bytes(), make_parents=True
        )
        await store.create(POINTER, raw_pointer, make_parents=True)
        index = await CheckpointStore(store).load()
    assert index is not None
    _check_index(index)
