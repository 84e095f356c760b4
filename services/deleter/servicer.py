"""The gRPC `DeleterAdmin` service: proto in, validation, the admin domain, proto out."""

from __future__ import annotations

from grpc import aio

from services.core.validation import require
from services.deleter.admin import DeleterAdmin
from services.deleter.preview import PreviewReport
from services.systopic.dead_letter import DeadLetterEntry
from tombstone.v1 import deleter_pb2 as _dl
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc

SERVICE_NAME = _dl.DESCRIPTOR.services_by_name["DeleterAdmin"].full_name
METHOD_ROLES = {
    f"/{SERVICE_NAME}/GetStatus": ("admin",),
    f"/{SERVICE_NAME}/ListDeadLetters": ("admin",),
    f"/{SERVICE_NAME}/ReplayDeadLetters": ("admin",),
}
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
MAX_IDS = 10_000


class DeleterAdminServicer(_dl_grpc.DeleterAdminServicer):
    def __init__(self, admin: DeleterAdmin) -> None:
        self._admin = admin

    async def GetStatus(
        self, request: _dl.GetStatusRequest, context: aio.ServicerContext
    ) -> _dl.GetStatusResponse:
        status = await self._admin.status()
        return _dl.GetStatusResponse(
            estimated_in_flight=status.estimated_in_flight,
            system_topic_backlog=status.system_topic_backlog,
            retry_topic_backlog=status.retry_topic_backlog,
            in_process=status.in_process,
            oldest_pending_age_ms=status.oldest_pending_age_ms,
            dead_letter_backlog=status.dead_letter_backlog,
            dead_letters_by_reason=status.dead_letters_by_reason,
            holding=status.holding,
            mode=status.mode,
            preview=preview_proto(status.preview),
        )

    async def ListDeadLetters(
        self, request: _dl.ListDeadLettersRequest, context: aio.ServicerContext
    ) -> _dl.ListDeadLettersResponse:
        require(0 <= request.limit <= MAX_LIMIT, "limit", f"must be within 0..{MAX_LIMIT}")
        limit = request.limit or DEFAULT_LIMIT
        entries, truncated = await self._admin.list_dead_letters(
            limit=limit, reason_code=request.reason_code
        )
        return _dl.ListDeadLettersResponse(
            dead_letters=[to_proto(entry) for entry in entries], truncated=truncated
        )

    async def ReplayDeadLetters(
        self, request: _dl.ReplayDeadLettersRequest, context: aio.ServicerContext
    ) -> _dl.ReplayDeadLettersResponse:
        require(
            request.all != bool(request.message_ids),
            "message_ids",
            "name the dead letters to replay, or set all (not both)",
        )
        require(len(request.message_ids) <= MAX_IDS, "message_ids", f"at most {MAX_IDS}")
        done = await self._admin.replay(
            message_ids=list(request.message_ids),
            every=request.all,
            reason_code=request.reason_code,
        )
        return _dl.ReplayDeadLettersResponse(replayed=done.replayed, not_found=done.not_found)


def preview_proto(report: PreviewReport | None) -> _dl.PreviewStatus | None:
    if report is None:
        return None
    return _dl.PreviewStatus(
        subscription=report.subscription,
        would_delete=report.would_delete,
        would_delete_bytes=report.would_delete_bytes,
        settled=report.settled,
        would_dead_letter=report.would_dead_letter,
        retries=report.retries,
        since_ms=report.since_ms,
        deleter_backlog=report.deleter_backlog,
    )


def to_proto(entry: DeadLetterEntry) -> _dl.DeadLetter:
    letter = _dl.DeadLetter(
        message_id=entry.message_id,
        reason_code=entry.reason_code,
        reason=entry.reason,
        retry_count=entry.retry_count,
        dead_lettered_at_ms=entry.dead_lettered_at_ms,
    )
    if entry.pdli is not None:
        letter.pdli.CopyFrom(entry.pdli)
    else:
        letter.raw = entry.payload
    return letter
