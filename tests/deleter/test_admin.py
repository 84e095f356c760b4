"""The admin domain and its gRPC service, with fakes behind the topic ports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import grpc
import pytest
from grpc import aio

from services.core._tokens import Principal
from services.core.config import AuthConfig, GrpcServerConfig
from services.core.errors import Conflict, Unavailable
from services.core.grpc_server import ServiceRunner
from services.deleter.admin import DeleterAdmin, Topics
from services.deleter.pool import PoolStatus
from services.deleter.servicer import METHOD_ROLES, SERVICE_NAME, DeleterAdminServicer
from services.systopic.consumer import IncomingMessage
from services.systopic.dead_letter import ReasonCode, dead_letter_message
from services.systopic.messages import decode_intent
from tests.deleter.fakes import FakePublisher, FakeSource, incoming, pdli
from tombstone.v1 import deleter_pb2 as _dl
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc

TOPICS = Topics("sys", "retry", "dlq", "sub", "dlq-sub")


class FakeStats:
    def __init__(self, backlogs: dict[str, int]) -> None:
        self.backlogs = backlogs

    async def backlog(self, topic: str, subscription: str) -> int:
        return self.backlogs[topic]


def letter(ledger_id: int | None, code: ReasonCode) -> IncomingMessage:
    original = incoming(pdli(ledger_id)) if ledger_id is not None else incoming(b"\xff")
    out = dead_letter_message(original, reason_code=code, reason=f"why {code}", attempts=2)
    return IncomingMessage(out.payload, dict(out.properties), f"7:{ledger_id}:0:-1", "dlq")


class Dlq:
    """A dead-letter subscription: what is not acknowledged stays for the next scan."""

    def __init__(self, messages: list[IncomingMessage]) -> None:
        self.messages = messages
        self.acked: list[str] = []

    @asynccontextmanager
    async def open(self) -> AsyncIterator[FakeSource]:
        source = FakeSource([m for m in self.messages if m.message_id not in self.acked])
        yield source
        self.acked += source.acked


def make_admin(
    dlq: Dlq, sink: FakePublisher, backlogs: dict[str, int] | None = None
) -> DeleterAdmin:
    return DeleterAdmin(
        topics=TOPICS,
        stats=FakeStats(backlogs or {"sys": 3, "retry": 2, "dlq": len(dlq.messages)}),
        pool_status=lambda: PoolStatus(in_process=4, holding=1, oldest_pending_age_ms=900),
        open_scan=dlq.open,
        replay_sink=sink,
        scan_idle=timedelta(milliseconds=20),
    )


LETTERS = [
    letter(1, ReasonCode.RETRIES_EXHAUSTED),
    letter(2, ReasonCode.PERMANENT_ERROR),
    letter(None, ReasonCode.UNDECODABLE),
    letter(3, ReasonCode.PERMANENT_ERROR),
]


async def test_status_sums_backlogs_and_counts_dead_letters_by_reason() -> None:
    """In flight = system + retry backlog; dead letters are grouped by reason code."""
    status = await make_admin(Dlq(LETTERS), FakePublisher()).status()
    assert (
        status.estimated_in_flight,
        status.in_process,
        status.holding,
        status.oldest_pending_age_ms,
        status.dead_letter_backlog,
    ) == (5, 4, 1, 900, 4)
    expected = {"retries_exhausted": 1, "permanent_error": 2, "undecodable": 1}
    assert expected == status.dead_letters_by_reason


async def test_list_filters_by_reason_and_reports_truncation() -> None:
    """Listing by reason returns only those, and says when the limit cut the list."""
    admin = make_admin(Dlq(LETTERS), FakePublisher())
    letters, truncated = await admin.list_dead_letters(limit=1, reason_code="permanent_error")
    assert ([x.message_id for x in letters], truncated) == (["7:2:0:-1"], True)


async def test_replay_publishes_then_acknowledges_only_what_it_replayed() -> None:
    """Replayed PDLIs go to the system topic due now; they leave the DLQ, the rest stays."""
    dlq, sink = Dlq(LETTERS), FakePublisher()
    done = await make_admin(dlq, sink).replay(message_ids=["7:2:0:-1", "nope"], every=False)
    assert (done.replayed, done.not_found, dlq.acked) == (1, ["nope"], ["7:2:0:-1"])
    assert decode_intent(sink.sent[0].payload).ledger_id == 2


async def test_replay_all_skips_undecodable_letters() -> None:
    """Garbage cannot be replayed: it stays in the DLQ while the PDLIs are replayed."""
    dlq, sink = Dlq(LETTERS), FakePublisher()
    done = await make_admin(dlq, sink).replay(message_ids=(), every=True)
    assert (
        done.replayed,
        [m.message_id for m in LETTERS if m.message_id not in dlq.acked],
    ) == (3, ["7:None:0:-1"])


async def test_replay_that_cannot_publish_acknowledges_nothing() -> None:
    """If the system topic refuses the replay, the dead letter is not removed."""
    dlq, sink = Dlq(LETTERS), FakePublisher()
    sink.fail = True
    with pytest.raises(Unavailable):
        await make_admin(dlq, sink).replay(message_ids=["7:1:0:-1"], every=False)
    assert dlq.acked == []


@pytest.fixture
async def stub() -> AsyncIterator[tuple[_dl_grpc.DeleterAdminStub, str]]:
    auth = AuthConfig(
        enabled=True,
        tokens={
            "admin-token": Principal("ops", frozenset({"admin"})),
            "broker-token": Principal("broker", frozenset({"broker"})),
        },
    )
    grpc_config = GrpcServerConfig(port=0, auth=auth)
    async with ServiceRunner(
        name="deleter", grpc=grpc_config, method_roles=METHOD_ROLES, handle_signals=False
    ) as runner:
        servicer = DeleterAdminServicer(make_admin(Dlq(LETTERS), FakePublisher()))
        runner.add_servicer(_dl_grpc.add_DeleterAdminServicer_to_server, servicer, SERVICE_NAME)
        port = await runner.start()
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield _dl_grpc.DeleterAdminStub(channel), "admin-token"


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


async def test_status_over_grpc(stub: tuple[_dl_grpc.DeleterAdminStub, str]) -> None:
    """GetStatus answers with the admin's figures."""
    client, token = stub
    response = await client.GetStatus(_dl.GetStatusRequest(), metadata=bearer(token))
    assert (
        response.estimated_in_flight,
        response.dead_letters_by_reason["permanent_error"],
    ) == (5, 2)


async def test_undecodable_letter_is_listed_with_its_raw_bytes(
    stub: tuple[_dl_grpc.DeleterAdminStub, str],
) -> None:
    """A dead letter without a PDLI carries its bytes in `raw`."""
    client, token = stub
    response = await client.ListDeadLetters(
        _dl.ListDeadLettersRequest(reason_code="undecodable"), metadata=bearer(token)
    )
    [only] = response.dead_letters
    assert (only.HasField("pdli"), only.raw) == (False, b"\xff")


@pytest.mark.parametrize(
    "call",
    [
        lambda c, md: c.ListDeadLetters(_dl.ListDeadLettersRequest(limit=10_001), metadata=md),
        lambda c, md: c.ReplayDeadLetters(_dl.ReplayDeadLettersRequest(), metadata=md),
        lambda c, md: c.ReplayDeadLetters(
            _dl.ReplayDeadLettersRequest(all=True, message_ids=["x"]), metadata=md
        ),
    ],
)
async def test_bad_requests_are_invalid_argument(
    stub: tuple[_dl_grpc.DeleterAdminStub, str], call: object
) -> None:
    """A limit out of range, or a replay naming neither ids nor all (or both)."""
    client, token = stub
    with pytest.raises(aio.AioRpcError) as failure:
        await call(client, bearer(token))  # type: ignore[operator]
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_only_admins_may_call(stub: tuple[_dl_grpc.DeleterAdminStub, str]) -> None:
    """A broker token is refused; no token is unauthenticated."""
    client, _ = stub
    with pytest.raises(aio.AioRpcError) as denied:
        await client.GetStatus(_dl.GetStatusRequest(), metadata=bearer("broker-token"))
    with pytest.raises(aio.AioRpcError) as anonymous:
        await client.GetStatus(_dl.GetStatusRequest())
    assert (
        denied.value.code(),
        anonymous.value.code(),
    ) == (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)


async def test_status_while_another_scan_holds_the_dlq_reports_depth_only() -> None:
    """A concurrent scan elsewhere (CONFLICT) does not fail GetStatus: depth, no breakdown."""

    class Busy:
        async def __aenter__(self) -> FakeSource:
            raise Conflict("subscription busy")

        async def __aexit__(self, *exc: object) -> None:
            return None

    def busy() -> Busy:
        return Busy()

    admin = DeleterAdmin(
        topics=TOPICS,
        stats=FakeStats({"sys": 0, "retry": 0, "dlq": 4}),
        pool_status=lambda: PoolStatus(0, 0, 0),
        open_scan=busy,
        replay_sink=FakePublisher(),
    )
    status = await admin.status()
    assert (status.dead_letter_backlog, status.dead_letters_by_reason) == (4, {})
