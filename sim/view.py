"""The surface of the world a workload drives (`WorldView`).

The workloads (`cursor_refs`, `namespaces`, `neighbour`, `schemas`, `shadows`, the intruder)
are driven by the world and drive it back (a namespace deletion trims and deletes topics, a
shadow writes a cursor). They depend on this protocol, not on `sim.world`, so that the world
imports them and nothing imports the world but the runner.
"""

from __future__ import annotations

import asyncio
import random
from typing import Protocol

from sim.pulsar import Cluster
from sim.scheduler import Scheduler
from sim.services import MarkerService
from sim.state import Copy, TopicState
from sim.unmodified import UnmodifiedBrokers
from sim.zk import ZooKeeper


class WorldView(Protocol):
    """The world as its workloads see it (`sim.world.World` is the one implementation)."""

    sched: Scheduler
    zk: ZooKeeper
    cluster: Cluster
    markers: list[MarkerService]
    requests: int
    """MarkLedgers requests made so far (each request's id is `req-<n>`)."""
    owners: dict[str, frozenset[Copy]]
    """Owner znode path -> the copies it references now."""
    property_ledgers: set[int]
    """Ledgers referenced from cursor properties (compacted, bucket snapshots)."""
    unmodified: UnmodifiedBrokers
    unmodified_paths: set[str]
    """Owner znodes written by unmodified brokers (their unlinks reach the follower only)."""
    shadow_rng: random.Random
    shadow_lists: dict[str, frozenset[Copy]]
    shadow_followers: list[asyncio.Task[None]]
    late_shadow_count: int

    def create_topic(self, t: TopicState, rng: random.Random) -> None: ...

    def check_znode_path(self, path: str, by: str) -> None: ...

    async def trim(self, t: TopicState) -> None:
        """A trim through the marker (a PIP-186 broker)."""
        ...

    async def delete_topic(self, t: TopicState, *, recreate: bool = True) -> bool:
        """A topic deletion through the marker; whether the topic was deleted."""
        ...
