"""The gRPC face of the verifier: protobuf in and out, nothing else.

Request-level problems (no PDLI, an empty or oversized batch, a malformed PDLI in a Believe
call) are INVALID_ARGUMENT naming the field. A malformed PDLI in Verify is not a bad request
but bad data from the system topic: it gets a SKIP INVALID verdict naming the field, so the
deleter can dead-letter it with that reason.
"""

from __future__ import annotations

from grpc import aio

from services.core.errors import InvalidArgument
from services.core.validation import require, require_max_length, require_nonempty
from services.verifier.believed import BelievedSet
from services.verifier.decision import DecisionEngine
from services.verifier.model import Decision, SkipReason, Verdict
from services.verifier.validation import parse_target
from tombstone.v1 import verifier_pb2 as _pb
from tombstone.v1 import verifier_pb2_grpc as _grpc

SERVICE_NAME = _pb.DESCRIPTOR.services_by_name["Verifier"].full_name
METHOD_ROLES = {
    f"/{SERVICE_NAME}/Verify": ("deleter", "admin"),
    f"/{SERVICE_NAME}/VerifyBatch": ("deleter", "admin"),
    f"/{SERVICE_NAME}/Believe": ("marker", "admin"),
}

_DECISIONS = {Decision.DELETE: _pb.DELETE, Decision.SKIP: _pb.SKIP, Decision.RETRY: _pb.RETRY}
_SKIPS = {
    SkipReason.IN_USE: _pb.IN_USE,
    SkipReason.MISMATCH: _pb.MISMATCH,
    SkipReason.NOT_FOUND: _pb.NOT_FOUND,
    SkipReason.INVALID: _pb.INVALID,
    SkipReason.FORGED: _pb.FORGED,
    SkipReason.UNSUPPORTED: _pb.UNSUPPORTED,
    SkipReason.FOREIGN: _pb.FOREIGN,
}


def verdict_to_proto(verdict: Verdict) -> _pb.VerifyResponse:
    response = _pb.VerifyResponse(
        decision=_DECISIONS[verdict.decision],
        skip_reason=_SKIPS[verdict.skip_reason]
        if verdict.skip_reason
        else _pb.SKIP_REASON_UNSPECIFIED,
        reason=verdict.reason,
        believed=verdict.believed,
    )
    if verdict.bookkeeper is not None:
        response.bookkeeper.path = verdict.bookkeeper.path
        response.bookkeeper.version = verdict.bookkeeper.version
        if verdict.bookkeeper.length_bytes is not None:
            response.bookkeeper.length_bytes = verdict.bookkeeper.length_bytes
    elif verdict.offload is not None:
        evidence = verdict.offload
        response.offload.driver_name = evidence.driver_name
        response.offload.bucket = evidence.bucket
        response.offload.keys.extend(evidence.keys)
        response.offload.filesystem_path = evidence.filesystem_path
        response.offload.endpoint = evidence.endpoint
        response.offload.region = evidence.region
        if evidence.size_bytes is not None:
            response.offload.size_bytes = evidence.size_bytes
    return response


class VerifierServicer(_grpc.VerifierServicer):
    def __init__(
        self, engine: DecisionEngine, believed: BelievedSet, *, max_batch: int, max_believe: int
    ) -> None:
        self._engine = engine
        self._believed = believed
        self._max_batch = max_batch
        self._max_believe = max_believe

    async def Verify(
        self, request: _pb.VerifyRequest, context: aio.ServicerContext
    ) -> _pb.VerifyResponse:
        require(request.HasField("pdli"), "pdli", "missing")
        return verdict_to_proto(await self._engine.verify(request.pdli))

    async def VerifyBatch(
        self, request: _pb.VerifyBatchRequest, context: aio.ServicerContext
    ) -> _pb.VerifyBatchResponse:
        require_nonempty(request.pdlis, "pdlis")
        require_max_length(request.pdlis, self._max_batch, "pdlis")
        verdicts = await self._engine.verify_batch(request.pdlis)
        return _pb.VerifyBatchResponse(verdicts=[verdict_to_proto(v) for v in verdicts])

    async def Believe(
        self, request: _pb.BelieveRequest, context: aio.ServicerContext
    ) -> _pb.BelieveResponse:
        require_nonempty(request.pdlis, "pdlis")
        require_max_length(request.pdlis, self._max_believe, "pdlis")
        keys = []
        for index, pdli in enumerate(request.pdlis):
            try:
                keys.append(parse_target(pdli).believed_key)
            except InvalidArgument as e:
                raise InvalidArgument(f"pdlis[{index}].{e.field}", e.problem) from e
        accepted = await self._believed.add(keys)
        return _pb.BelieveResponse(accepted=accepted, believed_size=len(self._believed))
