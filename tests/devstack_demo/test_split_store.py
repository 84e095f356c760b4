"""`SplitStore` over two real Oxia namespaces, Pulsar's and BookKeeper's: each path reaches
the store that holds it, and calls on several paths answer in the order asked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from devstack.split_store import SplitStore
from services.metadata import ANY_VERSION, MetadataStore
from services.metadata.oxia import OxiaMetadataStore


@pytest.fixture
def oxia() -> Iterator[OxiaServer]:
    with running_in_thread(namespaces=("broker", "bookkeeper")) as server:
        yield server


@pytest.fixture
async def stores(oxia: OxiaServer) -> AsyncIterator[tuple[MetadataStore, MetadataStore]]:
    def connect(namespace: str) -> AbstractAsyncContextManager[OxiaMetadataStore]:
        return OxiaMetadataStore.connect(
            oxia.address, namespace=namespace, session_timeout=10, request_timeout=10
        )

    async with connect("broker") as pulsar, connect("bookkeeper") as bookkeeper:
        yield pulsar, bookkeeper


async def test_the_ledgers_root_and_below_go_to_bookkeeper(
    stores: tuple[MetadataStore, MetadataStore],
) -> None:
    pulsar, bookkeeper = stores
    split = SplitStore(pulsar, bookkeeper, "/ledgers")
    await split.create("/ledgers/00/0000/L0001", b"ledger", make_parents=True)
    await split.create("/managed-ledgers/t/ns/persistent/a", b"ml", make_parents=True)
    await split.create("/ledgers-like", b"not the root")
    assert await bookkeeper.exists("/ledgers/00/0000/L0001") is not None
    assert await pulsar.exists("/ledgers") is None
    assert await pulsar.exists("/managed-ledgers/t/ns/persistent/a") is not None
    assert await bookkeeper.exists("/managed-ledgers") is None
    assert await pulsar.exists("/ledgers-like") is not None
    assert await split.get_children("/ledgers") == ["00"]


async def test_several_paths_are_answered_in_the_order_asked(
    stores: tuple[MetadataStore, MetadataStore],
) -> None:
    pulsar, bookkeeper = stores
    split = SplitStore(pulsar, bookkeeper, "/ledgers/")
    await split.create("/ledgers/L1", b"one", make_parents=True)
    await split.create("/admin", b"admin")
    await split.create("/ledgers/L2", b"two")
    got = await split.get_many(["/ledgers/L2", "/admin", "/missing", "/ledgers/L1"])
    data = [g.data if g is not None and not isinstance(g, Exception) else g for g in got]
    assert data == [b"two", b"admin", None, b"one"]
    deleted = await split.delete_many([("/admin", ANY_VERSION), ("/ledgers/L2", ANY_VERSION)])
    assert deleted == [None, None]
    assert (await pulsar.exists("/admin"), await bookkeeper.exists("/ledgers/L2")) == (None, None)
