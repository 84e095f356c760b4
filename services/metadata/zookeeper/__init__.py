"""The ZooKeeper adapter of the metadata-store port: aiozk, with the requests it lacks.

In: a connect string, chroot, timeouts and security settings. Out: `ZkMetadataStore`, a
`MetadataStore` whose errors are the port's typed ones.
"""

from services.metadata.zookeeper.store import ZkMetadataStore

__all__ = ["ZkMetadataStore"]
