"""The Oxia adapter of the metadata-store port: the synchronous `oxia` client (0.2.1) run from
asyncio through a bounded thread pool.

In: an Oxia service address, a namespace, timeouts and a thread count. Out:
`OxiaMetadataStore`, a `MetadataStore` whose errors are the port's typed ones.

The client is imported only when the adapter is: a deployment on ZooKeeper alone runs without
it (`limits` holds what settings are checked against).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.metadata.oxia.store import OxiaMetadataStore

__all__ = ["OxiaMetadataStore"]


def __getattr__(name: str) -> object:
    if name == "OxiaMetadataStore":
        from services.metadata.oxia.store import OxiaMetadataStore

        return OxiaMetadataStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
