"""Fakes behind the deleter's own ports (never behind a library)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.core.errors import TombstoneError, Unavailable
from services.deleter.ports import DeleteFailed, DeleteResult, Tier
from services.systopic.consumer import IncomingMessage
from services.systopic.messages import encode_intent
from services.systopic.ports import OutgoingMessage, SendResult
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf


def pdli(
    ledger_id: int, *, offload: bool = False, not_before_ms: int = 0
) -> _pd.PendingDeleteLedgerInfo:
    return _pd.PendingDeleteLedgerInfo(
        ledger_id=ledger_id,
        ledger_type=_pd.OFFLOAD_LEDGER if offload else _pd.LEDGER,
        component=_pd.MANAGED_LEDGER,
        managed_ledger_name="t/ns/persistent/topic",
        fence_token=3,
        not_before_ms=not_before_ms,
    )


_ids = iter(range(1_000_000))


def incoming(p: _pd.PendingDeleteLedgerInfo | bytes, **properties: str) -> IncomingMessage:
    if isinstance(p, bytes):
        payload, props = p, {}
    else:
        message = encode_intent(p)
        payload, props = message.payload, dict(message.properties)
    props.update(properties)
    return IncomingMessage(
        payload=payload,
        properties=props,
        message_id=f"1:{next(_ids)}:-1:-1",
        topic="persistent://pulsar/system/__ledger_deletion",
        publish_time_ms=1,
    )


def delete_verdict(ledger_id: int) -> _vf.VerifyResponse:
    return _vf.VerifyResponse(
        decision=_vf.DELETE,
        bookkeeper=_vf.BookKeeperEvidence(path=f"/ledgers/00/0000/L{ledger_id:04d}", version=0),
    )


def offload_verdict(ledger_id: int) -> _vf.VerifyResponse:
    uuid = "0b4c3a52-5d1e-4c55-9a3b-1f2e3d4c5b6a"
    keys = [f"{uuid}-ledger-{ledger_id}", f"{uuid}-ledger-{ledger_id}-index"]
    return _vf.VerifyResponse(
        decision=_vf.DELETE,
        offload=_vf.OffloadEvidence(driver_name="aws-s3", bucket="offload", keys=keys),
    )


def skip(reason: _vf.SkipReason.ValueType = _vf.IN_USE) -> _vf.VerifyResponse:
    return _vf.VerifyResponse(decision=_vf.SKIP, skip_reason=reason, reason="still listed")


def retry(reason: str = "marking in progress") -> _vf.VerifyResponse:
    return _vf.VerifyResponse(decision=_vf.RETRY, reason=reason)


class FakeVerifier:
    def __init__(self, answer: Callable[[_pd.PendingDeleteLedgerInfo], _vf.VerifyResponse]):
        self.answer = answer
        self.seen: list[int] = []
        self.gate: asyncio.Event | None = None

    async def verify(self, p: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        self.seen.append(p.ledger_id)
        if self.gate is not None:
            await self.gate.wait()
        return self.answer(p)


def unavailable(_: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
    raise Unavailable("verifier down")


@dataclass
class FakeBookKeeper:
    deleted: list[tuple[int, str, int]] = field(default_factory=list)
    fail: TombstoneError | None = None
    gate: asyncio.Event | None = None
    removed: bool = True
    """False: the znode was already gone (a `DeleteResult` that removed nothing)."""

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.deleted.append((ledger_id, path, version))
        evidence: dict[str, object] = {"znode_path": path, "znode_version": version}
        return DeleteResult(Tier.BOOKKEEPER, self.removed, evidence)


@dataclass
class FakeOffload:
    deleted: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    fail: DeleteFailed | None = None

    async def delete_offloaded(
        self, *, ledger_id: int, evidence: _vf.OffloadEvidence
    ) -> DeleteResult:
        if self.fail is not None:
            raise self.fail
        self.deleted.append((ledger_id, tuple(evidence.keys)))
        return DeleteResult(Tier.S3, True, {"bucket": evidence.bucket, "keys": list(evidence.keys)})


class FakePublisher:
    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.sent: list[OutgoingMessage] = []
        self.fail = False

    @property
    def producer_name(self) -> str:
        return self.name

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        if self.fail:
            return [SendResult(error="broker said no") for _ in messages]
        self.sent.extend(messages)
        return [SendResult(message_id=f"9:{i}:-1:-1") for i, _ in enumerate(messages)]

    async def close(self) -> None:
        pass


class FakeSource:
    def __init__(self, messages: Sequence[IncomingMessage] = (), topic: str = "sys") -> None:
        self._queue: asyncio.Queue[IncomingMessage] = asyncio.Queue()
        for m in messages:
            self._queue.put_nowait(m)
        self._topic = topic
        self.acked: list[str] = []
        self.released: list[str] = []
        self.received = 0

    @property
    def topic(self) -> str:
        return self._topic

    def put(self, message: IncomingMessage) -> None:
        self._queue.put_nowait(message)

    async def receive(self) -> IncomingMessage:
        message = await self._queue.get()
        self.received += 1
        return message

    async def acknowledge(self, message: IncomingMessage) -> None:
        self.acked.append(message.message_id)

    async def release(self, message: IncomingMessage) -> None:
        self.released.append(message.message_id)

    async def close(self) -> None:
        pass

    @property
    def settled(self) -> list[str]:
        return self.acked + self.released
