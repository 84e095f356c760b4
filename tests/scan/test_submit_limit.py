"""--submit's adaptive limit: what a failed MarkLedgers call says about the marker."""

from __future__ import annotations

import grpc
import pytest

from services.core.adaptive import Signal
from services.core.client import from_rpc_error
from services.core.errors import InvalidArgument
from services.scan.cli.options import submit_settings
from services.scan.submit.send import marker_signal


def failed(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="x")


@pytest.mark.parametrize(
    ("code", "signal"),
    [
        (grpc.StatusCode.UNAVAILABLE, Signal.UNANSWERED),
        (grpc.StatusCode.DEADLINE_EXCEEDED, Signal.UNANSWERED),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, Signal.THROTTLED),
        (grpc.StatusCode.INVALID_ARGUMENT, Signal.ANSWERED),
        (grpc.StatusCode.PERMISSION_DENIED, Signal.ANSWERED),
    ],
)
def test_marker_errors_are_judged_by_their_grpc_code(code: grpc.StatusCode, signal: Signal) -> None:
    """The typed error `rpc_errors` raises is judged by the gRPC status it came from."""
    error = failed(code)
    typed = from_rpc_error(error, "marker")
    typed.__cause__ = error
    assert marker_signal(typed) is signal


def test_floor_above_ceiling_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="submit_concurrency_min"):
        submit_settings(
            submit=True,
            marker_address="127.0.0.1:1",
            submit_rate=1.0,
            submit_concurrency=2,
            submit_concurrency_min=3,
            submit_batch=10,
        )
