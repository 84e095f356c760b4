"""structlog renders JSON with the call's context; audit lines carry their evidence."""

from __future__ import annotations

import io
import json

import pytest
import structlog
from grpc import aio

from devstack.fake_verifier import verify_request
from services.core.config import LogConfig
from services.core.logging import configure_logging
from tests.core.conftest import Running


def log_to_buffer(level: str = "info") -> io.StringIO:
    buffer = io.StringIO()
    configure_logging(LogConfig(level=level, format="auto"), stream=buffer, cache_loggers=False)
    return buffer


def test_json_when_not_a_terminal_with_contextvars_and_utc_timestamp() -> None:
    """Off a TTY, lines are JSON carrying bound contextvars and an ISO UTC timestamp."""
    buffer = log_to_buffer()
    with structlog.contextvars.bound_contextvars(request_id="r-1"):
        structlog.get_logger().info("hello", ledger_id=5)
    record = json.loads(buffer.getvalue())
    assert (
        record["event"],
        record["request_id"],
        record["ledger_id"],
        record["level"],
        record["timestamp"].endswith("Z"),
    ) == ("hello", "r-1", 5, "info", True)


def test_level_filters_lower_levels() -> None:
    """At warning level, info lines are dropped."""
    buffer = log_to_buffer("warning")
    structlog.get_logger().info("quiet")
    structlog.get_logger().warning("loud")
    events = [json.loads(line)["event"] for line in buffer.getvalue().splitlines()]
    assert events == ["loud"]


def test_console_format_is_not_json() -> None:
    """The console format renders readable text, not JSON."""
    buffer = io.StringIO()
    configure_logging(LogConfig(format="console"), stream=buffer, cache_loggers=False)
    structlog.get_logger().info("hello")
    assert (buffer.getvalue().startswith("{"), "hello" in buffer.getvalue()) == (False, True)


def test_audit_line_carries_its_evidence() -> None:
    """`audit()` writes an info line marked audit=True with the evidence fields."""
    from services.core.logging import audit

    with structlog.testing.capture_logs() as logs:
        audit("ledger_deleted", ledger_id=9, path="/ledgers/00/0000/L0009", version=3)
    expected = {
        "event": "ledger_deleted",
        "audit": True,
        "ledger_id": 9,
        "path": "/ledgers/00/0000/L0009",
        "version": 3,
        "log_level": "info",
    }
    assert [expected] == logs


async def test_rpc_logs_carry_method_and_request_id(service: Running) -> None:
    """Lines logged while serving a call carry `rpc.method` and the caller's request id."""
    with (
        structlog.testing.capture_logs(
            processors=[structlog.contextvars.merge_contextvars]
        ) as logs,
        pytest.raises(aio.AioRpcError),
    ):
        await service.stub.Verify(verify_request(-1), metadata=(("x-request-id", "abc"),))
    failed = next(line for line in logs if line["event"] == "rpc_failed")
    expected = ("/tombstone.v1.Verifier/Verify", "abc", "INVALID_ARGUMENT")
    assert expected == (failed["rpc.method"], failed["request_id"], failed["code"])
