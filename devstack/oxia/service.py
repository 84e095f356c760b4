"""The `OxiaClient` gRPC service: requests in, shard operations, responses out.

Every request is checked before it reaches a shard: an unknown shard or namespace is
NOT_FOUND, a malformed request INVALID_ARGUMENT, as the Oxia server answers them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc

from . import reads, schema
from .notifications import Batch, StreamDropped
from .sessions import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, SessionNotFound
from .shard import InvalidRequest, Put, Shard
from .storage import Record

M = schema.message
_COMPARISONS = ["EQUAL", "FLOOR", "CEILING", "LOWER", "HIGHER"]
_NOTIFICATION_TYPES = ["KEY_CREATED", "KEY_MODIFIED", "KEY_DELETED", "KEY_RANGE_DELETED"]
#: Keys or records per List / RangeScan response message.
_CHUNK = 1000


class Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def hash_ranges(count: int) -> list[tuple[int, int]]:
    """[min, max] xxhash ranges splitting the 32-bit hash space into `count` shards."""
    size = (1 << 32) // count
    bounds = [i * size for i in range(count)] + [1 << 32]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(count)]


class OxiaService:
    """`namespaces` maps each namespace to its shard count. As in Oxia, every namespace has
    shards of its own and shard ids are unique across namespaces (numbered in the order the
    namespaces are given), so a request naming a shard needs no namespace. Each shard's first
    put gets `first_version_id`."""

    def __init__(
        self,
        namespaces: Mapping[str, int],
        leader: Callable[[], str],
        first_version_id: int = 0,
    ) -> None:
        if not namespaces:
            raise ValueError("an Oxia server needs at least one namespace")
        self.namespaces: dict[str, list[int]] = {}
        self.shards: dict[int, Shard] = {}
        for name, count in namespaces.items():
            if count < 1:
                raise ValueError(f"namespace {name!r} needs at least one shard")
            first = len(self.shards)
            self.namespaces[name] = list(range(first, first + count))
            self.shards.update({i: Shard(i, first_version_id) for i in self.namespaces[name]})
        self._leader = leader
        self.stopping = asyncio.Event()

    def shard(self, shard_id: int | None) -> Shard:
        if shard_id is None:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "the request names no shard")
        shard = self.shards.get(shard_id)
        if shard is None:
            raise Abort(grpc.StatusCode.NOT_FOUND, f"oxia: shard not found: {shard_id}")
        return shard

    # -- shard assignments -----------------------------------------------------

    async def GetShardAssignments(self, request: Any) -> AsyncIterator[Any]:
        shard_ids = self.namespaces.get(request.namespace)
        if shard_ids is None:
            raise Abort(
                grpc.StatusCode.NOT_FOUND, f"oxia: namespace not found: {request.namespace}"
            )
        answer = M("ShardAssignments")()
        assignment = answer.namespaces[request.namespace]
        assignment.shard_key_router = schema.enum_value("ShardKeyRouter", "XXHASH3")
        for shard_id, (low, high) in zip(shard_ids, hash_ranges(len(shard_ids)), strict=True):
            one = assignment.assignments.add(shard=shard_id, leader=self._leader())
            one.int32_hash_range.min_hash_inclusive = low
            one.int32_hash_range.max_hash_inclusive = high
        yield answer
        # The stream stays open: Oxia pushes new assignments on it when shards move.
        await self.stopping.wait()

    # -- writes ----------------------------------------------------------------

    async def Write(self, request: Any) -> Any:
        shard = self.shard(_optional(request, "shard"))
        puts = [_put(p) for p in request.puts]
        deletes = [(d.key, _optional(d, "expected_version_id")) for d in request.deletes]
        ranges = [(r.start_inclusive, r.end_exclusive) for r in request.delete_ranges]
        try:
            put_results, delete_statuses, range_statuses = shard.write(puts, deletes, ranges)
        except InvalidRequest as exc:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        response = M("WriteResponse")()
        for result in put_results:
            out = response.puts.add(status=_status(result.status))
            if result.record is not None:
                _fill_version(out.version, result.record)
            if result.key is not None:
                out.key = result.key
        for status in delete_statuses:
            response.deletes.add(status=_status(status))
        for status in range_statuses:
            response.delete_ranges.add(status=_status(status))
        return response

    async def WriteStream(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            yield await self.Write(request)

    # -- reads -----------------------------------------------------------------

    async def Read(self, request: Any) -> AsyncIterator[Any]:
        shard = self.shard(_optional(request, "shard"))
        response = M("ReadResponse")()
        for get in request.gets:
            comparison = _comparison(get.comparison_type)
            index = _optional(get, "secondary_index_name")
            found = reads.get(shard, get.key, comparison, index)
            out = response.gets.add()
            if found is None:
                out.status = _status("KEY_NOT_FOUND")
                continue
            _fill_found(out, found, include_value=get.include_value)
        yield response

    async def List(self, request: Any) -> AsyncIterator[Any]:
        found = self._scan(request)
        for i in range(0, len(found), _CHUNK):
            yield M("ListResponse")(keys=[key for key, _, _ in found[i : i + _CHUNK]])

    async def RangeScan(self, request: Any) -> AsyncIterator[Any]:
        found = self._scan(request)
        for i in range(0, len(found), _CHUNK):
            response = M("RangeScanResponse")()
            for one in found[i : i + _CHUNK]:
                _fill_found(response.records.add(), one, include_value=True)
            yield response

    def _scan(self, request: Any) -> list[reads.Found]:
        shard = self.shard(_optional(request, "shard"))
        index = _optional(request, "secondary_index_name")
        return reads.scan(shard, request.start_inclusive, request.end_exclusive, index)

    # -- sequences and notifications -------------------------------------------

    async def GetSequenceUpdates(self, request: Any) -> AsyncIterator[Any]:
        shard = self.shard(request.shard)
        if not request.key:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "the sequence prefix key is empty")
        queue = shard.watch_sequence(request.key)
        try:
            while True:
                highest = await queue.get()
                while not queue.empty():
                    highest = queue.get_nowait()
                yield M("GetSequenceUpdatesResponse")(highest_sequence_key=highest)
        finally:
            shard.unwatch_sequence(request.key, queue)

    async def GetNotifications(self, request: Any) -> AsyncIterator[Any]:
        shard = self.shard(request.shard)
        start = _optional(request, "start_offset_exclusive")
        if start is None:
            # As Oxia does: a first, empty batch tells the client where it starts from.
            start = shard.commit_offset
            yield M("NotificationBatch")(shard=shard.shard_id, offset=start, timestamp=0)
        try:
            async for batch in shard.notifications.follow(start):
                yield _batch(shard.shard_id, batch)
        except StreamDropped:
            raise Abort(grpc.StatusCode.UNAVAILABLE, "notification stream dropped") from None

    # -- sessions --------------------------------------------------------------

    async def CreateSession(self, request: Any) -> Any:
        shard = self.shard(request.shard)
        if not MIN_TIMEOUT_MS <= request.session_timeout_ms <= MAX_TIMEOUT_MS:
            raise Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"oxia: invalid session timeout: timeoutMs={request.session_timeout_ms}",
            )
        session_id = shard.create_session(request.session_timeout_ms, request.client_identity)
        return M("CreateSessionResponse")(session_id=session_id)

    async def KeepAlive(self, request: Any) -> Any:
        try:
            self.shard(request.shard).keep_alive(request.session_id)
        except SessionNotFound:
            raise Abort(grpc.StatusCode.NOT_FOUND, "oxia: session not found") from None
        return M("KeepAliveResponse")()

    async def CloseSession(self, request: Any) -> Any:
        try:
            self.shard(request.shard).close_session(request.session_id)
        except SessionNotFound:
            raise Abort(grpc.StatusCode.NOT_FOUND, "oxia: session not found") from None
        return M("CloseSessionResponse")()


def _optional(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _status(name: str) -> int:
    return schema.enum_value("Status", name)


def _comparison(value: int) -> str:
    if not 0 <= value < len(_COMPARISONS):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown comparison type {value}")
    return _COMPARISONS[value]


def _put(request: Any) -> Put:
    return Put(
        key=request.key,
        value=request.value,
        expected_version_id=_optional(request, "expected_version_id"),
        session_id=_optional(request, "session_id"),
        client_identity=_optional(request, "client_identity"),
        partition_key=_optional(request, "partition_key"),
        sequence_key_delta=list(request.sequence_key_delta),
        secondary_indexes=[(i.index_name, i.secondary_key) for i in request.secondary_indexes],
    )


def _fill_version(out: Any, record: Record) -> None:
    out.version_id = record.version_id
    out.modifications_count = record.modifications_count
    out.created_timestamp = record.created_ms
    out.modified_timestamp = record.modified_ms
    if record.session_id is not None:
        out.session_id = record.session_id
    if record.client_identity is not None:
        out.client_identity = record.client_identity


def _fill_found(out: Any, found: reads.Found, *, include_value: bool) -> None:
    key, record, secondary = found
    out.status = _status("OK")
    out.key = key
    _fill_version(out.version, record)
    if include_value:
        out.value = record.value
    if secondary is not None:
        out.secondary_index_key = secondary


def _batch(shard_id: int, batch: Batch) -> Any:
    out = M("NotificationBatch")(shard=shard_id, offset=batch.offset, timestamp=batch.timestamp_ms)
    for key, change in batch.changes.items():
        one = out.notifications[key]
        one.type = _NOTIFICATION_TYPES.index(change.kind)
        if change.version_id is not None:
            one.version_id = change.version_id
        if change.key_range_last is not None:
            one.key_range_last = change.key_range_last
    return out
