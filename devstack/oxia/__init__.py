"""An in-memory Oxia server speaking the `OxiaClient` gRPC protocol, for the devstack and
the tests: shards in Oxia's hierarchical key order, versions and modification counts,
sessions with ephemeral records, notifications, sequential keys and secondary indexes.
"""

from .server import OxiaServer, running_in_thread

__all__ = ["OxiaServer", "running_in_thread"]
