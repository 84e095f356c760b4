"""The gRPC adapter of `BelieveClient`: one `Believe` call to the verifier."""

from __future__ import annotations

from collections.abc import Sequence

from grpc import aio

from services.core.client import rpc_errors
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf
from tombstone.v1 import verifier_pb2_grpc as _vf_grpc


class GrpcBelieveClient:
    def __init__(self, channel: aio.Channel) -> None:
        self._stub = _vf_grpc.VerifierStub(channel)

    async def believe(self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]) -> None:
        with rpc_errors("verifier"):
            await self._stub.Believe(_vf.BelieveRequest(pdlis=pdlis))
