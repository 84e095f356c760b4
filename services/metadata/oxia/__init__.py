"""The Oxia adapter of the metadata-store port: the synchronous `oxia` client (0.2.1) run from
asyncio through a bounded thread pool.

In: an Oxia service address, a namespace, timeouts and a thread count. Out:
`OxiaMetadataStore`, a `MetadataStore` whose errors are the port's typed ones.
"""

from services.metadata.oxia.store import OxiaMetadataStore

__all__ = ["OxiaMetadataStore"]
