"""Forged or stale PDLIs (S2) never get DELETE, whatever field was changed."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from services.verifier.model import Decision
from tests.verifier.world import (
    CURSOR,
    ML,
    OTHER_BUCKET,
    OTHER_ML,
    OTHER_UUID,
    SCHEMA,
    UUID,
    Listed,
    World,
    cursor_meta,
    data_meta,
    pdli,
    schema_meta,
)
from tombstone.v1 import pending_delete_pb2 as pb

OFF: dict[str, Any] = {"tier": pb.OFFLOAD_LEDGER}


async def cluster(world: World) -> None:
    """Two topics, a cursor and a schema; ledger 1 belongs to OTHER_ML and is listed there,
    ledger 2 to OTHER_ML (unlisted), 5 is a cursor ledger of ML, 7 a schema ledger,
    and ledger 9 of OTHER_ML has objects under UUID."""
    await world.ledger(1, data_meta(OTHER_ML))
    await world.ledger(2, data_meta(OTHER_ML))
    await world.ledger(5, cursor_meta())
    await world.ledger(7, schema_meta())
    await world.ml([3])
    await world.ml([1, Listed(9, UUID)], ml=OTHER_ML)
    await world.cursor(6)
    await world.schema([8])
    await world.objects(9, ml=OTHER_ML)
    await world.objects(9, uuid=OTHER_UUID, ml=OTHER_ML)
    await world.objects(9, bucket=OTHER_BUCKET, ml=ML)


FORGERIES = [
    pytest.param(pdli(1), id="listed-ledger-of-another-topic"),
    pytest.param(pdli(2), id="unlisted-ledger-of-another-topic"),
    pytest.param(pdli(2, fence=10**9), id="another-topic-with-a-huge-fence-token"),
    pytest.param(pdli(1, ml=OTHER_ML, fence=10**9), id="listed-with-a-huge-fence-token"),
    pytest.param(pdli(5), id="cursor-ledger-claimed-as-data"),
    pytest.param(pdli(5, component=pb.MANAGED_CURSOR, cursor="other"), id="another-cursor"),
    pytest.param(pdli(2, component=pb.MANAGED_CURSOR, cursor=CURSOR), id="data-as-cursor"),
    pytest.param(pdli(7), id="schema-ledger-claimed-as-data"),
    pytest.param(pdli(5, component=pb.SCHEMA_STORAGE, schema_id=SCHEMA), id="cursor-as-schema"),
    pytest.param(
        pdli(7, component=pb.SCHEMA_STORAGE, schema_id="public/default/x"), id="another-schema"
    ),
    pytest.param(pdli(9, uuid=UUID, ml=OTHER_ML, **OFF), id="listed-offload"),
    pytest.param(pdli(9, uuid=UUID, **OFF), id="offload-of-another-topic"),
    pytest.param(pdli(9, uuid=OTHER_UUID, **OFF), id="other-upload-of-another-topic"),
    pytest.param(pdli(9, uuid=UUID, bucket=OTHER_BUCKET, **OFF), id="keys-in-another-bucket"),
    pytest.param(
        pdli(9, uuid="00000000-0000-4000-8000-000000000001", **OFF), id="uuid-that-does-not-match"
    ),
    pytest.param(pdli(9, uuid=UUID, ml=OTHER_ML, cluster="east", **OFF), id="another-cluster"),
]


@pytest.mark.parametrize("forged", FORGERIES)
async def test_forged_pdli_is_never_deleted(
    forged: pb.PendingDeleteLedgerInfo, world: World, parts: Any
) -> None:
    """The verdict for a forged PDLI is SKIP or RETRY: never DELETE."""
    await cluster(world)
    verdict = await parts.engine.verify(forged)
    assert verdict.decision != Decision.DELETE, verdict.reason


async def test_mismatch_is_counted_and_logged_as_security(world: World, parts: Any) -> None:
    """A MISMATCH increments the mismatch counter and writes a security line naming the
    field that differed."""
    await cluster(world)
    with structlog.testing.capture_logs() as logs:
        await parts.engine.verify(pdli(2))
    security = [entry for entry in logs if entry["event"] == "verify_mismatch"]
    counted = parts.metrics.mismatches.labels("mismatch", "bookkeeper", "managed-ledger")
    assert (len(security), security[0]["differences"][0]["field"], counted._value.get()) == (
        1,
        "pulsar/managed-ledger",
        1,
    )
