"""Gets of one key waiting together for a thread of the Oxia adapter share one client call,
sent after all of them asked; a get that comes once that call has its thread makes its own.
The pool is held by taking its slots, so that the gets wait: the client is the real one, on
the devstack server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from services.metadata.errors import NoNode
from services.metadata.oxia import OxiaMetadataStore


@pytest.fixture(scope="module")
def server() -> Iterator[OxiaServer]:
    with running_in_thread(shards=1) as running:
        yield running


@pytest.fixture
async def store(server: OxiaServer) -> AsyncIterator[OxiaMetadataStore]:
    async with OxiaMetadataStore.connect(
        server.address, session_timeout=10.0, request_timeout=10.0, max_threads=1
    ) as opened:
        yield opened


def count_calls(store: OxiaMetadataStore) -> list[str]:
    """The names of the client methods the adapter calls from now on."""
    called: list[str] = []
    inner = store._call

    async def counting(path: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        called.append(method.__name__)
        return await inner(path, method, *args, **kwargs)

    store._call = counting
    return called


async def test_gets_waiting_together_share_one_call(store: OxiaMetadataStore) -> None:
    await store.create("/shared", b"v1")
    called = count_calls(store)
    async with store._calls._slots:  # the one thread is busy: the gets wait
        gets = [asyncio.ensure_future(store.get("/shared")) for _ in range(20)]
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*gets)
    assert {r.data for r in results} == {b"v1"}
    assert called == ["get"]


async def test_a_get_after_the_call_has_its_thread_makes_its_own(
    store: OxiaMetadataStore,
) -> None:
    await store.create("/own", b"v1")
    called = count_calls(store)
    async with store._calls._slots:
        first = asyncio.ensure_future(store.get("/own"))
        await asyncio.sleep(0.05)
    while "/own" in store._queued_gets:  # noqa: ASYNC110 - no event for a call handed over
        await asyncio.sleep(0)
    second = asyncio.ensure_future(store.get("/own"))
    assert (await first).data == (await second).data == b"v1"
    assert called == ["get", "get"]
    assert store._queued_gets == {}


async def test_a_cancelled_caller_leaves_the_others_their_read(store: OxiaMetadataStore) -> None:
    await store.create("/kept", b"v1")
    async with store._calls._slots:
        leaving = asyncio.ensure_future(store.get("/kept"))
        staying = asyncio.ensure_future(store.get("/kept"))
        await asyncio.sleep(0.05)
        leaving.cancel()
    assert (await staying).data == b"v1"
    assert leaving.cancelled()


async def test_a_shared_failure_is_every_caller_s(store: OxiaMetadataStore) -> None:
    async with store._calls._slots:
        gets = [asyncio.ensure_future(store.get("/absent")) for _ in range(3)]
        await asyncio.sleep(0.05)
    for outcome in await asyncio.gather(*gets, return_exceptions=True):
        assert isinstance(outcome, NoNode)
