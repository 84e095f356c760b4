"""The VerifyBatch client against a test servicer on a real gRPC server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from services.core.client import open_channel
from services.core.config import ClientConfig, GrpcServerConfig
from services.core.errors import Unavailable
from services.core.grpc_server import ServiceRunner
from services.deleter._verifier import GrpcVerdictSource
from services.deleter.ports import VerifierUnreachable
from tests.deleter.fakes import pdli
from tombstone.v1 import verifier_pb2 as _vf
from tombstone.v1 import verifier_pb2_grpc as _vf_grpc

SERVICE = _vf.DESCRIPTOR.services_by_name["Verifier"].full_name
ROLES = {f"/{SERVICE}/{m}": ("deleter",) for m in ("Verify", "VerifyBatch", "Believe")}
POISON = 13


class Servicer(_vf_grpc.VerifierServicer):
    """Answers SKIP with the ledger id as reason; a batch holding POISON fails as a whole."""

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []
        self.single_calls = 0

    async def VerifyBatch(self, request: _vf.VerifyBatchRequest, context: Any) -> Any:
        self.batch_sizes.append(len(request.pdlis))
        await asyncio.sleep(0.01)
        if any(p.ledger_id == POISON for p in request.pdlis):
            raise RuntimeError("verifier bug")
        return _vf.VerifyBatchResponse(verdicts=[answer(p.ledger_id) for p in request.pdlis])

    async def Verify(self, request: _vf.VerifyRequest, context: Any) -> Any:
        self.single_calls += 1
        if request.pdli.ledger_id == POISON:
            raise RuntimeError("verifier bug")
        return answer(request.pdli.ledger_id)

    async def Believe(self, request: _vf.BelieveRequest, context: Any) -> Any:
        return _vf.BelieveResponse()


def answer(ledger_id: int) -> _vf.VerifyResponse:
    return _vf.VerifyResponse(decision=_vf.SKIP, reason=str(ledger_id))


@pytest.fixture
async def verifier() -> AsyncIterator[tuple[Servicer, GrpcVerdictSource]]:
    servicer = Servicer()
    async with ServiceRunner(
        name="verifier", grpc=GrpcServerConfig(port=0), method_roles=ROLES, handle_signals=False
    ) as runner:
        runner.add_servicer(_vf_grpc.add_VerifierServicer_to_server, servicer, SERVICE)
        port = await runner.start()
        channel = open_channel(ClientConfig(f"127.0.0.1:{port}"))
        source = GrpcVerdictSource(channel, batch_max=50, max_concurrency=1)
        yield servicer, source
        await source.aclose()
        await channel.close()


async def test_concurrent_pdlis_share_verify_batch_calls(
    verifier: tuple[Servicer, GrpcVerdictSource],
) -> None:
    """120 concurrent PDLIs get their own verdicts from a few batches of at most 50."""
    servicer, source = verifier
    ids = range(100, 220)
    verdicts = await asyncio.gather(*(source.verify(pdli(i)) for i in ids))
    assert [str(i) for i in ids] == [v.reason for v in verdicts]
    assert (sum(servicer.batch_sizes), max(servicer.batch_sizes) <= 50) == (120, True)


async def test_a_poison_pdli_does_not_fail_its_batch_mates(
    verifier: tuple[Servicer, GrpcVerdictSource],
) -> None:
    """When a batch fails, each PDLI asks alone: the others get verdicts, the poison fails."""
    _, source = verifier
    results = await asyncio.gather(
        *(source.verify(pdli(i)) for i in (11, 12, POISON, 14)), return_exceptions=True
    )
    reasons = [r.reason if isinstance(r, _vf.VerifyResponse) else type(r) for r in results]
    assert ["11", "12", Unavailable, "14"] == reasons  # INTERNAL is an answer, not an outage


async def test_unreachable_verifier_is_unavailable() -> None:
    """No verifier listening: `VerifierUnreachable` (an outage the deleter pauses on), never
    a verdict."""
    channel = open_channel(ClientConfig("127.0.0.1:1", timeout=timedelta(seconds=1)))
    source = GrpcVerdictSource(channel)
    try:
        with pytest.raises(VerifierUnreachable):
            await source.verify(pdli(1))
    finally:
        await source.aclose()
        await channel.close()
