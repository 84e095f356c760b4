"""A Verifier servicer whose behaviour is chosen by the request's ledger id (the core's tests
and the RPC benchmark).

It stands behind a real gRPC port so the bootstrap can be tested end to end; it knows
nothing of the real verifier's decision.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from services.core.grpc_server import ServiceRunner
from services.core.validation import require, require_non_negative
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _pb
from tombstone.v1 import verifier_pb2_grpc as _grpc

SERVICE = _pb.DESCRIPTOR.services_by_name["Verifier"].full_name
VERIFY = f"/{SERVICE}/Verify"
BELIEVE = f"/{SERVICE}/Believe"
METHOD_ROLES = {VERIFY: {"deleter", "admin"}, BELIEVE: {"broker"}}

CRASH_LEDGER = 13
"""Verify raises an unexpected exception for this ledger id."""
SLOW_LEDGER = 7
"""Verify sleeps `marked_at_ms` milliseconds for this ledger id, then answers."""


class FakeVerifier(_grpc.VerifierServicer):
    def __init__(self) -> None:
        self.completed: list[int] = []
        self.slow_started = asyncio.Event()

    async def Verify(self, request: _pb.VerifyRequest, context: Any) -> _pb.VerifyResponse:
        pdli = request.pdli
        require(pdli.HasField("ledger_id"), "pdli.ledger_id", "is required")
        require_non_negative(pdli.ledger_id, "pdli.ledger_id")
        # Echoes the caller's input, as the name checks of the real services do.
        require(not pdli.topic_name.startswith("bad"), "pdli.topic_name", f"{pdli.topic_name!r}")
        if pdli.ledger_id == CRASH_LEDGER:
            raise RuntimeError("unexpected bug")
        if pdli.ledger_id == SLOW_LEDGER:
            structlog.get_logger(__name__).info("slow_verify_started")
            self.slow_started.set()
            await asyncio.sleep(pdli.marked_at_ms / 1000)
        self.completed.append(pdli.ledger_id)
        return _pb.VerifyResponse(decision=_pb.SKIP, reason=f"ledger {pdli.ledger_id}")

    async def VerifyBatch(
        self, request: _pb.VerifyBatchRequest, context: Any
    ) -> _pb.VerifyBatchResponse:
        raise NotImplementedError("not used by the bootstrap tests")

    async def Believe(self, request: _pb.BelieveRequest, context: Any) -> _pb.BelieveResponse:
        return _pb.BelieveResponse(accepted=len(request.pdlis))


def verify_request(ledger_id: int, *, marked_at_ms: int = 0) -> _pb.VerifyRequest:
    return _pb.VerifyRequest(
        pdli=_pd.PendingDeleteLedgerInfo(ledger_id=ledger_id, marked_at_ms=marked_at_ms)
    )


def add_fake_verifier(runner: ServiceRunner) -> FakeVerifier:
    servicer = FakeVerifier()
    runner.add_servicer(_grpc.add_VerifierServicer_to_server, servicer, SERVICE)
    return servicer
