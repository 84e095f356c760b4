"""A preview's status through gRPC and `tombstone deleter status` (a child process), and its
refusal to replay dead letters."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from services.core.config import GrpcServerConfig
from services.core.grpc_server import ServiceRunner
from services.deleter.admin import DeleterAdmin, Topics
from services.deleter.pool import PoolStatus
from services.deleter.preview import PreviewTally
from services.deleter.servicer import METHOD_ROLES, SERVICE_NAME, DeleterAdminServicer
from tests.deleter.fakes import FakePublisher
from tests.deleter.test_admin import LETTERS, Dlq
from tests.deleter_e2e.process import cli
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc

TOPICS = Topics("sys", "retry", "dlq", "tombstone-preview", "dlq-sub", "tombstone-deleter")


class Backlogs:
    """Backlogs by topic and subscription: the preview's drained, the deleters' whole."""

    async def backlog(self, topic: str, subscription: str) -> int:
        return {
            ("sys", "tombstone-preview"): 1,
            ("retry", "tombstone-preview"): 0,
            ("sys", "tombstone-deleter"): 40,
            ("retry", "tombstone-deleter"): 2,
            ("dlq", "dlq-sub"): 0,
        }[(topic, subscription)]


def tally() -> PreviewTally:
    t = PreviewTally("tombstone-preview", clock=lambda: 1_790_000_000.0)
    t.would_delete.update({"bookkeeper": 30, "s3": 8})
    t.would_delete_bytes.update({"s3": 4096})
    t.settled.update({"in_use": 2})
    t.would_dead_letter.update({"mismatch": 1})
    t.retries = 5
    return t


def admin() -> DeleterAdmin:
    return DeleterAdmin(
        topics=TOPICS,
        stats=Backlogs(),
        pool_status=lambda: PoolStatus(in_process=1, holding=0, oldest_pending_age_ms=10),
        open_scan=Dlq(LETTERS).open,
        replay_sink=FakePublisher(),
        scan_idle=timedelta(milliseconds=20),
        preview=tally(),
    )


@pytest.fixture
async def address() -> AsyncIterator[str]:
    async with ServiceRunner(
        name="deleter",
        grpc=GrpcServerConfig(port=0),
        method_roles=METHOD_ROLES,
        handle_signals=False,
    ) as runner:
        servicer = DeleterAdminServicer(admin())
        runner.add_servicer(_dl_grpc.add_DeleterAdminServicer_to_server, servicer, SERVICE_NAME)
        yield f"127.0.0.1:{await runner.start()}"


async def test_the_status_of_a_preview_shows_its_verdicts(address: str) -> None:
    """The backlogs are the preview subscription's; the PREVIEW part names each count and the
    deleters' own backlog."""
    code, out = await cli("deleter", "status", "--address", address)
    assert code == 0, out
    lines = out.splitlines()
    assert "estimated in-flight deletions: 1 (system topic 1, retry topic 0)" in lines
    assert lines[3].startswith("PREVIEW: nothing is deleted; subscription tombstone-preview")
    for expected in (
        "would delete: 38",
        "  bookkeeper: 30",
        "  s3: 8 (4096 bytes known)",
        "settled without a delete: 2",
        "  in_use: 2",
        "would dead-letter: 1",
        "  mismatch: 1",
        "deferred to decide again (retries): 5",
        "the deleters' subscription holds 42 (system + retry topic)",
    ):
        assert expected in lines


async def test_the_json_status_of_a_preview(address: str) -> None:
    code, out = await cli("deleter", "status", "--json", "--address", address)
    status = json.loads(out)
    assert (code, status["mode"]) == (0, "preview")
    preview = status["preview"]
    assert (
        preview["would_delete"],
        preview["would_dead_letter"],
        preview["deleter_backlog"],
        preview["since_ms"],
    ) == ({"bookkeeper": 30, "s3": 8}, {"mismatch": 1}, 42, 1_790_000_000_000)


async def test_a_preview_replays_nothing(address: str) -> None:
    """Replay would publish to the system topic: refused, nothing published."""
    code, out = await cli("deleter", "dlq", "replay", "--all", "--address", address)
    assert code == 1
    assert "FAILED_PRECONDITION" in out
    assert "a preview deleter replays nothing" in out
