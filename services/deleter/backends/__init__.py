"""Delete backends: BookKeeper metadata (ZooKeeper or the bookie HTTP API), S3, filesystem."""

from services.deleter.backends.bookie_http import BookieHttpDeleter
from services.deleter.backends.filesystem import FilesystemOffloadDeleter
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter

__all__ = [
    "BackendLimits",
    "BookieHttpDeleter",
    "FilesystemOffloadDeleter",
    "ZooKeeperLedgerDeleter",
]
