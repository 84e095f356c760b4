"""The verifier's reads under adaptive concurrency limits, one per dependency.

A VerifyBatch of a thousand PDLIs starts thousands of reads at once; the limits let through
what ZooKeeper and S3 answer without a queue building up (`services.core.adaptive`), within
the operator's floor and ceiling. Only reads are limited: the believed set's few writes keep
their own pace. An error keeps its meaning: a read that waited for its place and then failed
still raises `Unavailable` (RETRY), never "absent".
"""

from __future__ import annotations

from collections.abc import Sequence

from services.core.adaptive import AdaptiveLimiter, Signal
from services.core.s3_locations import S3Location
from services.metadata.errors import StoreUnavailable
from services.verifier.ports import (
    ObjectHead,
    ObjectStore,
    WatchCallback,
    Znode,
    ZnodeStore,
)


class LimitedZnodeStore:
    """`ZnodeStore` whose reads each take a place under `limiter`."""

    def __init__(self, inner: ZnodeStore, limiter: AdaptiveLimiter) -> None:
        self._inner = inner
        self._limiter = limiter

    async def read(self, path: str, *, watch: WatchCallback | None = None) -> Znode | None:
        async with self._limiter.slot():
            return await self._inner.read(path, watch=watch)

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        """One request (a multiRead) for all paths; unanswered paths cut the limit."""
        permit = await self._limiter.acquire()
        try:
            results = await self._inner.read_many(paths)
        except BaseException as exc:
            permit.release(self._limiter.classify(exc))
            raise
        unanswered = any(isinstance(result, StoreUnavailable) for result in results)
        permit.release(Signal.UNANSWERED if unanswered else Signal.ANSWERED)
        return results

    def unwatch(self, path: str, watch: WatchCallback) -> None:
        self._inner.unwatch(path, watch)

    async def watch_node(self, path: str, watch: WatchCallback) -> bool:
        async with self._limiter.slot():
            return await self._inner.watch_node(path, watch)

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str] | None:
        async with self._limiter.slot():
            return await self._inner.children(path, watch=watch)

    async def create(self, path: str, data: bytes) -> str:
        return await self._inner.create(path, data)

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        return await self._inner.create_sequential(prefix, data)

    async def delete(self, path: str) -> None:
        await self._inner.delete(path)

    async def delete_all(self, paths: Sequence[str]) -> None:
        await self._inner.delete_all(paths)

    def epoch(self) -> int:
        return self._inner.epoch()


class LimitedObjectStore:
    """`ObjectStore` whose HEADs and ranged reads each take a place under `limiter`."""

    def __init__(self, inner: ObjectStore, limiter: AdaptiveLimiter) -> None:
        self._inner = inner
        self._limiter = limiter

    async def head(
        self, *, bucket: str, key: str, location: S3Location | None = None
    ) -> ObjectHead | None:
        async with self._limiter.slot():
            return await self._inner.head(bucket=bucket, key=key, location=location)

    async def read_range(
        self,
        *,
        bucket: str,
        key: str,
        start: int,
        length: int,
        location: S3Location | None = None,
    ) -> bytes | None:
        async with self._limiter.slot():
            return await self._inner.read_range(
                bucket=bucket, key=key, start=start, length=length, location=location
            )
