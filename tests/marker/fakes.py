"""Fakes behind the marker's own ports (never in place of ZooKeeper or the Pulsar client)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.core.errors import Conflict, NotFound, Unavailable
from services.systopic import OutgoingMessage, SendResult, decode_intent
from tombstone.v1 import pending_delete_pb2 as _pd


@dataclass(frozen=True)
class Node:
    data: bytes
    version: int


class FakeStore:
    """An in-memory `OwnerStore` with ZooKeeper's version rules and switchable failures."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.writes: list[tuple[str, int]] = []
        self.fail_writes_with: Exception | None = None
        self.unavailable = False

    def put(self, path: str, data: bytes, version: int = 0) -> None:
        self.nodes[path] = Node(data, version)

    async def get(self, path: str) -> Node:
        await asyncio.sleep(0)
        if self.unavailable:
            raise Unavailable(f"{path}: store down")
        if path not in self.nodes:
            raise NotFound(f"{path}: no such znode")
        return self.nodes[path]

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        await asyncio.sleep(0)
        self.writes.append((path, version))
        if self.fail_writes_with is not None:
            raise self.fail_writes_with
        node = self._at(path, version)
        self.nodes[path] = Node(data, node.version + 1)
        return node.version + 1

    async def delete(self, path: str, *, version: int) -> None:
        self.writes.append((path, version))
        self._at(path, version)
        del self.nodes[path]

    def _at(self, path: str, version: int) -> Node:
        if path not in self.nodes:
            raise NotFound(f"{path}: no such znode")
        node = self.nodes[path]
        if node.version != version:
            raise Conflict(f"{path}: version is not {version}")
        return node


class FakePublisher:
    """An `IntentPublisher` that keeps what it accepted; `refuse` picks messages to fail."""

    producer_name = "fake"

    def __init__(self) -> None:
        self.accepted: list[OutgoingMessage] = []
        self.calls = 0
        self.refuse: Callable[[OutgoingMessage], bool] = lambda m: False
        self.gate: asyncio.Event | None = None

    @property
    def pdlis(self) -> list[_pd.PendingDeleteLedgerInfo]:
        return [decode_intent(m.payload, m.properties) for m in self.accepted]

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        results = []
        for i, message in enumerate(messages):
            if self.refuse(message):
                results.append(SendResult(error="refused by the test"))
            else:
                self.accepted.append(message)
                results.append(SendResult(message_id=f"1:{len(self.accepted)}:0:{i}"))
        return results

    async def close(self) -> None:
        pass


class FakeBelieveClient:
    def __init__(self, fail: bool = False) -> None:
        self.reports: list[list[_pd.PendingDeleteLedgerInfo]] = []
        self.fail = fail

    async def believe(self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]) -> None:
        if self.fail:
            raise Unavailable("verifier down")
        self.reports.append(list(pdlis))
