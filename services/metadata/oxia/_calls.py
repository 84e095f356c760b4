"""Client calls from asyncio: each one in a bounded thread pool, bounded by the request
timeout, its failure mapped to the port's typed errors (unknown is `StoreUnavailable`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import oxia.ex as _ex

from services.metadata.errors import MetadataError, NoNode, StoreUnavailable

Conflict = Callable[[], MetadataError]
"""The typed error an `UNEXPECTED_VERSION_ID` means for the call at hand."""


class Caller:
    def __init__(self, *, request_timeout: float, max_threads: int) -> None:
        self.request_timeout = request_timeout
        self.pool = ThreadPoolExecutor(max_threads, thread_name_prefix="oxia-store")
        self._slots = asyncio.Semaphore(max_threads)
        self.closed = False

    async def call(
        self,
        path: str,
        method: Callable[..., Any],
        *args: Any,
        conflict: Conflict | None = None,
        on_start: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> Any:
        """`method(*args, **kwargs)` in the pool. The timeout starts once a thread is free,
        so a large batch does not time out while waiting its turn; a call that times out
        keeps its thread until the client returns, and is never sent again. `on_start()`
        runs on the event loop once the call has its slot, before it is handed to a thread."""
        if self.closed:
            raise StoreUnavailable(path, "the store is closed")
        async with self._slots:
            if on_start is not None:
                on_start()
            work = asyncio.get_running_loop().run_in_executor(
                self.pool, functools.partial(method, *args, **kwargs)
            )
            try:
                return await asyncio.wait_for(work, self.request_timeout)
            except Exception as e:
                raise self.mapped(e, path, conflict) from e

    def mapped(self, error: Exception, path: str, conflict: Conflict | None) -> MetadataError:
        if isinstance(error, MetadataError):
            return error
        if isinstance(error, _ex.KeyNotFound):
            return NoNode(path)
        if isinstance(error, _ex.UnexpectedVersionId) and conflict is not None:
            return conflict()
        if isinstance(error, _ex.SessionNotFound):
            return StoreUnavailable(path, "the Oxia session expired")
        if isinstance(error, _ex.InvalidOptions) or (
            isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.INVALID_ARGUMENT
        ):
            return MetadataError(path, f"Oxia refused the request: {error}")
        if isinstance(error, TimeoutError):
            return StoreUnavailable(path, f"no answer within {self.request_timeout}s")
        # Anything else (the channel down, a status the client does not know) is unknown.
        return StoreUnavailable(path, f"{type(error).__name__}: {error}")

    def shutdown(self) -> None:
        self.closed = True
        self.pool.shutdown(wait=False, cancel_futures=True)
