"""The Verifier gRPC service on a real server: RPCs, bad requests, restarts, roles."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from grpc import aio

from services.core.config import AuthConfig, Principal
from services.verifier.app import open_verifier
from services.verifier.believed import BelievedSet
from services.verifier.cli import verifier
from services.verifier.config import VerifierConfig
from services.verifier.store_adapter import MetadataZnodeStore
from tests.helpers import assert_eventually
from tests.verifier.world import World, pdli
from tombstone.v1 import pending_delete_pb2 as pdpb
from tombstone.v1 import verifier_pb2 as pb
from tombstone.v1 import verifier_pb2_grpc as pb_grpc


@pytest.fixture
async def service(
    config: VerifierConfig, world: World
) -> AsyncIterator[tuple[pb_grpc.VerifierStub, Any]]:
    """A started verifier; `world` first creates the ledgers root it checks at start."""
    async with open_verifier(config) as (runner, parts):
        await runner.start()
        async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
            yield pb_grpc.VerifierStub(channel), (runner, parts)


async def status_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(aio.AioRpcError) as err:
        await call
    return err.value.code(), err.value.details() or ""


async def test_verify_returns_the_verdict_with_evidence(world: World, service: Any) -> None:
    """Verify answers DELETE with the ledger znode path and version, and the length of the
    CLOSED ledger (BookKeeper's LedgerMetadataFormat.length, 100 in the world's metadata)."""
    stub, _ = service
    await world.ledger(1)
    response = await stub.Verify(pb.VerifyRequest(pdli=pdli(1)))
    bk = response.bookkeeper
    assert (response.decision, bk.path, bk.version, bk.length_bytes) == (
        pb.DELETE,
        "/ledgers/00/0000/L0001",
        0,
        100,
    )


async def test_verify_batch_answers_in_request_order(world: World, service: Any) -> None:
    """VerifyBatch returns one verdict per PDLI, in order."""
    stub, _ = service
    await world.ledger(1)
    await world.ledger(3)
    await world.ml([3])
    response = await stub.VerifyBatch(pb.VerifyBatchRequest(pdlis=[pdli(1), pdli(2), pdli(3)]))
    assert [(v.decision, v.skip_reason) for v in response.verdicts] == [
        (pb.DELETE, pb.SKIP_REASON_UNSPECIFIED),
        (pb.SKIP, pb.NOT_FOUND),
        (pb.SKIP, pb.IN_USE),
    ]


async def test_malformed_pdli_is_skip_invalid_naming_the_field(service: Any) -> None:
    """A PDLI from the topic without a ledger id is SKIP INVALID, the reason naming the field."""
    stub, _ = service
    response = await stub.Verify(pb.VerifyRequest(pdli=pdli(None)))
    assert (response.skip_reason, response.reason.split(":")[0]) == (pb.INVALID, "ledger_id")


async def test_unknown_enum_numbers_are_skip_invalid(service: Any) -> None:
    """proto3 enums are open: a PDLI with a tier and component no proto names (found by the
    gRPC fuzz campaign, docs/fuzz.md) is SKIP INVALID, not INTERNAL from logging the verdict."""
    stub, _ = service
    bad = pdli(None)
    bad.ledger_type = pdpb.LedgerType.ValueType(-1)
    bad.component = pdpb.LedgerComponent.ValueType(99)
    response = await stub.Verify(pb.VerifyRequest(pdli=bad))
    assert (response.decision, response.skip_reason) == (pb.SKIP, pb.INVALID)
    bad.ledger_id = 7
    batch = await stub.VerifyBatch(pb.VerifyBatchRequest(pdlis=[bad]))
    assert [(v.decision, v.skip_reason) for v in batch.verdicts] == [(pb.SKIP, pb.INVALID)]


@pytest.mark.parametrize(
    "alias",
    [
        "public/default/./persistent/orders",
        "public/default/persistent/orders/",
        "public//default/persistent/orders",
        "public/default/persistent/%2E%2E",
    ],
)
async def test_an_alias_in_verify_batch_is_skip_invalid(service: Any, alias: str) -> None:
    """A PDLI whose ML name is an alias of a canonical one is SKIP INVALID naming the field,
    in Verify and VerifyBatch alike."""
    stub, _ = service
    single = await stub.Verify(pb.VerifyRequest(pdli=pdli(1, ml=alias)))
    batch = await stub.VerifyBatch(pb.VerifyBatchRequest(pdlis=[pdli(1, ml=alias)]))
    assert {(v.skip_reason, v.reason.split(":")[0]) for v in (single, *batch.verdicts)} == {
        (pb.INVALID, "managed_ledger_name")
    }


def _seen(message: pdpb.PendingDeleteLedgerInfo, seen_at: int) -> pdpb.PendingDeleteLedgerInfo:
    message.seen_at_ms = seen_at
    return message


@pytest.mark.parametrize("seen_at", [-1, 10**13])
async def test_an_impossible_seen_at_in_verify_is_skip_invalid(service: Any, seen_at: int) -> None:
    """`seen_at_ms` negative or later than `marked_at_ms`: SKIP INVALID naming the field, in
    Verify and VerifyBatch alike (Believe refuses it as INVALID_ARGUMENT, below)."""
    stub, _ = service
    single = await stub.Verify(pb.VerifyRequest(pdli=_seen(pdli(1), seen_at)))
    batch = await stub.VerifyBatch(pb.VerifyBatchRequest(pdlis=[_seen(pdli(1), seen_at)]))
    assert {(v.skip_reason, v.reason.split(":")[0]) for v in (single, *batch.verdicts)} == {
        (pb.INVALID, "seen_at_ms")
    }


@pytest.mark.parametrize(
    ("method", "request_", "field"),
    [
        ("Verify", pb.VerifyRequest(), "pdli"),
        ("VerifyBatch", pb.VerifyBatchRequest(), "pdlis"),
        ("VerifyBatch", pb.VerifyBatchRequest(pdlis=[pdli(n) for n in range(1001)]), "pdlis"),
        ("Believe", pb.BelieveRequest(), "pdlis"),
        ("Believe", pb.BelieveRequest(pdlis=[pdli(1), pdli(None)]), "pdlis[1].ledger_id"),
        (
            "Believe",
            pb.BelieveRequest(pdlis=[pdli(1, cursor="", component=pdpb.MANAGED_CURSOR)]),
            "pdlis[0].cursor_name",
        ),
        (
            "Believe",
            pb.BelieveRequest(pdlis=[pdli(1, ml="public/default/./persistent/orders")]),
            "pdlis[0].managed_ledger_name",
        ),
        (
            "Believe",
            pb.BelieveRequest(pdlis=[pdli(1, cursor="..", component=pdpb.MANAGED_CURSOR)]),
            "pdlis[0].cursor_name",
        ),
        ("Believe", pb.BelieveRequest(pdlis=[_seen(pdli(1), -1)]), "pdlis[0].seen_at_ms"),
        ("Believe", pb.BelieveRequest(pdlis=[_seen(pdli(1), 10**13)]), "pdlis[0].seen_at_ms"),
    ],
)
async def test_bad_requests_are_invalid_argument(
    service: Any, method: str, request_: Any, field: str
) -> None:
    """Bad requests fail with INVALID_ARGUMENT whose message starts with the field."""
    stub, _ = service
    code, details = await status_of(getattr(stub, method)(request_))
    assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, field)


async def test_believed_set_survives_a_restart(world: World, config: VerifierConfig) -> None:
    """What was believed before a restart is still believed after it (about a ledger whose
    metadata leaves its ML out, which only a belief lets through)."""
    await world.ledger(1, {"application": b"pulsar", "component": b"managed-ledger"})
    async with open_verifier(config) as (runner, _):
        await runner.start()
        async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
            accepted = await pb_grpc.VerifierStub(channel).Believe(
                pb.BelieveRequest(pdlis=[pdli(1)])
            )
    async with open_verifier(config) as (runner, parts):
        await runner.start()
        await parts.believed.refresh()
        async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
            verdict = await pb_grpc.VerifierStub(channel).Verify(pb.VerifyRequest(pdli=pdli(1)))
    assert (accepted.accepted, verdict.decision, verdict.believed) == (1, pb.DELETE, True)


async def test_believed_set_loads_in_the_background(
    store: Any, config: VerifierConfig, world: World
) -> None:
    """A serving verifier loads the believed set by itself, with no call needed."""
    await BelievedSet(MetadataZnodeStore(store), config.believed).add([1 << 64])
    async with open_verifier(config) as (runner, parts):
        serving = asyncio.create_task(runner.run())

        async def loaded() -> None:
            assert (1 << 64) in parts.believed

        await assert_eventually(loaded)
        runner.request_stop()
        await serving


async def test_believe_needs_the_marker_role(world: World, config: VerifierConfig) -> None:
    """With auth on, the deleter may Verify but not Believe."""
    auth = AuthConfig(enabled=True, tokens={"d": Principal("deleter", frozenset({"deleter"}))})
    secured = replace(config, grpc=replace(config.grpc, auth=auth))
    async with open_verifier(secured) as (runner, _):
        await runner.start()
        async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
            stub = pb_grpc.VerifierStub(channel)
            metadata = (("authorization", "Bearer d"),)
            verify = await stub.Verify(pb.VerifyRequest(pdli=pdli(1)), metadata=metadata)
            code, _ = await status_of(
                stub.Believe(pb.BelieveRequest(pdlis=[pdli(1)]), metadata=metadata)
            )
    assert (verify.decision, code) == (pb.SKIP, grpc.StatusCode.PERMISSION_DENIED)


async def test_metrics_count_verdicts_and_reads(world: World, service: Any) -> None:
    """The registry exposes verdicts by decision and reason, reads, cache and believed size."""
    stub, (runner, _parts) = service
    await world.ledger(1)
    await stub.Verify(pb.VerifyRequest(pdli=pdli(1)))
    await stub.Verify(pb.VerifyRequest(pdli=pdli(1)))
    text = runner.metrics.render().decode()
    expected = [
        'tombstone_verifier_verdicts_total{code="ledger",decision="delete"} 2.0',
        'tombstone_verifier_metadata_reads_total{kind="ledger"} 2.0',
        'tombstone_verifier_owner_cache_lookups_total{result="miss"} 2.0',
        "tombstone_verifier_believed_entries 0.0",
    ]
    assert [line in text for line in expected] == [True] * len(expected)


def test_cli_lists_serve() -> None:
    """`tombstone verifier --help` offers `serve`."""
    result = CliRunner().invoke(verifier, ["--help"])
    assert (result.exit_code, "serve" in result.output) == (0, True)
