"""`VerdictSource` on the verifier's gRPC API: concurrent PDLIs are decided in `VerifyBatch`
calls (one round trip for many), through the core client helpers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.core.client import rpc_errors
from services.core.errors import TombstoneError, Unavailable
from services.deleter.batching import Batcher, BatcherClosed
from services.deleter.ports import VerifierUnreachable
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf
from tombstone.v1 import verifier_pb2_grpc as _vf_grpc


class GrpcVerdictSource:
    def __init__(
        self, channel: grpc.aio.Channel, *, batch_max: int = 256, max_concurrency: int = 4
    ) -> None:
        self._stub = _vf_grpc.VerifierStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)
        self._batcher: Batcher[_pd.PendingDeleteLedgerInfo, _vf.VerifyResponse] = Batcher(
            self._verify_batch, max_batch=batch_max, max_concurrency=max_concurrency
        )

    async def verify(self, pdli: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        try:
            return await self._batcher.submit(pdli)
        except BatcherClosed as exc:
            raise Unavailable("the verifier client is closed") from exc
        except VerifierUnreachable:
            raise  # no answer: asking again PDLI by PDLI would only wait longer
        except TombstoneError:
            # One PDLI that breaks the verifier must not fail the others of its batch (nor a
            # verifier without VerifyBatch): each asks once more on its own.
            return await self._verify_one(pdli)

    async def _verify_one(self, pdli: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        with _verifier_errors():
            response: _vf.VerifyResponse = await self._stub.Verify(_vf.VerifyRequest(pdli=pdli))
        return response

    async def _verify_batch(
        self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]
    ) -> Sequence[_vf.VerifyResponse]:
        with _verifier_errors():
            response = await self._stub.VerifyBatch(_vf.VerifyBatchRequest(pdlis=pdlis))
        if len(response.verdicts) != len(pdlis):
            raise Unavailable(
                f"verifier answered {len(response.verdicts)} verdicts for {len(pdlis)} PDLIs"
            )
        return list(response.verdicts)

    async def probe(self) -> None:
        """The verifier's health check: returns once it answers SERVING (outage probe)."""
        with rpc_errors("verifier"):
            response = await self._health.Check(health_pb2.HealthCheckRequest(service=""))
        if response.status != health_pb2.HealthCheckResponse.SERVING:
            status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
            raise Unavailable(f"verifier health: {status}")

    async def aclose(self) -> None:
        await self._batcher.aclose()


# Statuses that mean the verifier gave no answer. INTERNAL and UNKNOWN (a verifier bug on one
# PDLI) are answers: they stay ordinary errors, so one poison PDLI cannot pause the deleter.
_NO_ANSWER = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


@contextmanager
def _verifier_errors() -> Iterator[None]:
    try:
        with rpc_errors("verifier"):
            yield
    except Unavailable as exc:
        cause = exc.__cause__
        if isinstance(cause, grpc.aio.AioRpcError) and cause.code() in _NO_ANSWER:
            raise VerifierUnreachable(str(exc)) from cause
        raise
