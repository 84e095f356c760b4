"""`tombstone deleter status | dlq list | dlq replay` as child processes against the admin
service (with fakes behind its topic ports)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from services.core.config import GrpcServerConfig
from services.core.grpc_server import ServiceRunner
from services.deleter.servicer import METHOD_ROLES, SERVICE_NAME, DeleterAdminServicer
from tests.deleter.fakes import FakePublisher
from tests.deleter.test_admin import LETTERS, Dlq, make_admin
from tests.deleter_e2e.process import cli
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc


@pytest.fixture
async def address() -> AsyncIterator[str]:
    async with ServiceRunner(
        name="deleter",
        grpc=GrpcServerConfig(port=0),
        method_roles=METHOD_ROLES,
        handle_signals=False,
    ) as runner:
        servicer = DeleterAdminServicer(make_admin(Dlq(LETTERS), FakePublisher()))
        runner.add_servicer(_dl_grpc.add_DeleterAdminServicer_to_server, servicer, SERVICE_NAME)
        yield f"127.0.0.1:{await runner.start()}"


async def test_status_prints_the_estimate_and_reasons(address: str) -> None:
    """The human status names the in-flight estimate and each dead-letter reason."""
    code, out = await cli("deleter", "status", "--address", address)
    assert (
        code,
        "estimated in-flight deletions: 5" in out,
        "permanent_error: 2" in out,
    ) == (0, True, True)


async def test_dlq_list_as_json(address: str) -> None:
    """`dlq list --reason X --json` lists only that reason."""
    code, out = await cli(
        "deleter", "dlq", "list", "--reason", "permanent_error", "--json", "--address", address
    )
    letters = json.loads(out)["dead_letters"]
    assert (code, [d["message_id"] for d in letters]) == (0, ["7:2:0:-1", "7:3:0:-1"])


async def test_status_as_json_has_snake_case_numbers(address: str) -> None:
    """`status --json`: proto field names and integers as numbers (zeros: test_json_output)."""
    code, out = await cli("deleter", "status", "--json", "--address", address)
    status = json.loads(out)
    expected = (0, 5, 900, 2)
    actual = (
        code,
        status["estimated_in_flight"],
        status["oldest_pending_age_ms"],
        status["dead_letters_by_reason"]["permanent_error"],
    )
    assert expected == actual


async def test_dlq_replay_by_id(address: str) -> None:
    """`dlq replay ID...` replays those and names the ids it did not find."""
    code, out = await cli("deleter", "dlq", "replay", "7:1:0:-1", "nope", "--address", address)
    assert (code, out.strip()) == (0, "replayed 1; not found: nope")


async def test_unreachable_deleter_exits_non_zero() -> None:
    """No deleter listening: a clear error and exit code 1."""
    code, out = await cli("deleter", "status", "--address", "127.0.0.1:1")
    assert (code, out.startswith("error (UNAVAILABLE)")) == (1, True)
