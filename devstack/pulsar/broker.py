"""The broker's state and lifecycle: namespaces, topics, connections, faults, admin server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .faults import Faults
from .names import TopicName
from .security import BrokerSecurity
from .storage import DiskStore, MemoryStore, Store
from .subscription import Subscription
from .topic import Topic


class ClientLink(Protocol):
    """A client connection as the broker keeps it (`connection.Connection`): dropped whole
    when the broker stops."""

    def close_gracefully(self) -> None: ...

    def abort(self) -> None: ...


log = logging.getLogger(__name__)

DEFAULT_NAMESPACES = ("public/default", "pulsar/system")
CURSOR_SAVE_DELAY = 0.02


@dataclass(frozen=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    """Address both listeners bind to."""
    port: int = 6650
    """Binary protocol port (0 picks a free one)."""
    admin_port: int = 8080
    """Admin HTTP port (0 picks a free one)."""
    data_dir: Path | None = None
    """On-disk mode when set; in memory otherwise."""
    advertised_host: str | None = None
    """Host named in lookup answers; defaults to `host`. It must match the client's URL."""
    namespaces: tuple[str, ...] = DEFAULT_NAMESPACES
    """Namespaces that exist from the start, besides those created through admin."""
    auto_create_namespaces: bool = False
    """Accept topics in any namespace instead of answering TopicNotFound."""
    deduplication: bool = True
    """PIP-6 deduplication by producer name and sequence id (namespaces may override it)."""
    keepalive_seconds: float = 30.0
    """Interval of the broker's PINGs; a connection silent for two intervals is closed."""
    security: BrokerSecurity | None = None
    """TLS on every listener and, when it says so, authentication; plain and open when None."""
    issuer_port: int = 0
    """Port of the OAuth2 issuer (when `security` runs one; 0 picks a free one)."""
    extra: dict[str, str] = field(default_factory=dict)


class Conflict(Exception):
    """An admin request that clashes with what exists (HTTP 409)."""


class UnknownNamespace(Exception):
    """A topic in a namespace the broker does not know (TopicNotFound / HTTP 404)."""


class PreconditionFailed(Exception):
    """An admin request Pulsar refuses with HTTP 412 (a policy on one partition...)."""


RETENTION = "retention"
INACTIVE_TOPIC_POLICIES = "inactiveTopicPolicies"


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.store: Store = DiskStore(config.data_dir) if config.data_dir else MemoryStore()
        self.faults = Faults()
        self.topics: dict[str, Topic] = {}
        self.connections: set[ClientLink] = set()
        self.port = config.port
        self.admin_port = config.admin_port
        meta = self.store.load_meta()
        self.namespaces: set[str] = set(meta.get("namespaces", [])) | set(config.namespaces)
        self.partitioned: dict[str, int] = dict(meta.get("partitioned", {}))
        self.deduplication: dict[str, bool] = dict(meta.get("deduplication", {}))
        """Per-namespace overrides of `config.deduplication`."""
        self.topic_policies: dict[str, dict[str, Any]] = {
            name: dict(policies) for name, policies in meta.get("topic_policies", {}).items()
        }
        """Topic-level policies by topic (a partitioned topic's apply to its partitions)."""
        self.trim_floors: dict[str, int] = dict(meta.get("trimmed", {}))
        """Per topic, how many leading entries are gone (published with nothing keeping them)."""
        self._meta_handle: asyncio.TimerHandle | None = None
        self._next_ledger_id = int(meta.get("next_ledger_id", 1))
        self._producer_names = 0
        self._dirty_subs: set[Subscription] = set()
        self._dispatch_handle: asyncio.Handle | None = None
        self._dirty_cursors: dict[int, tuple[Topic, Subscription]] = {}
        self._save_handle: asyncio.TimerHandle | None = None
        self.run_id = self.allocate_ledger_id()
        for name in self.store.topic_names():
            self.topic(TopicName.parse(name))

    # metadata ---------------------------------------------------------------------------

    def _save_meta(self) -> None:
        self.store.save_meta(
            {
                "namespaces": sorted(self.namespaces),
                "partitioned": self.partitioned,
                "deduplication": self.deduplication,
                "next_ledger_id": self._next_ledger_id,
                "topic_policies": self.topic_policies,
                "trimmed": self.trim_floors,
            }
        )

    def _save_meta_soon(self) -> None:
        """Coalesce the metadata writes of one burst (a floor moves with every SEND to a
        topic that keeps nothing)."""
        if self.config.data_dir is None or self._meta_handle is not None:
            return
        loop = asyncio.get_running_loop()
        self._meta_handle = loop.call_later(CURSOR_SAVE_DELAY, self._flush_meta)

    def _flush_meta(self) -> None:
        self._meta_handle = None
        self._save_meta()

    def allocate_ledger_id(self) -> int:
        """A ledger id never used before by this data directory."""
        ledger_id = self._next_ledger_id
        self._next_ledger_id += 1
        self._save_meta()
        return ledger_id

    def new_producer_name(self) -> str:
        self._producer_names += 1
        return f"devstack-{self.run_id}-{self._producer_names}"

    def check_namespace(self, name: TopicName) -> None:
        if name.ns in self.namespaces:
            return
        if not self.config.auto_create_namespaces:
            raise UnknownNamespace(f"namespace {name.ns} does not exist")
        self.create_namespace(name.ns)

    def create_namespace(self, ns: str) -> None:
        if ns in self.namespaces:
            raise Conflict(f"namespace {ns} already exists")
        self.namespaces.add(ns)
        self._save_meta()

    def deduplication_enabled(self, ns: str) -> bool:
        return self.deduplication.get(ns, self.config.deduplication)

    def set_deduplication(self, ns: str, enabled: bool) -> None:
        if ns not in self.namespaces:
            raise UnknownNamespace(f"namespace {ns} does not exist")
        self.deduplication[ns] = enabled
        self._save_meta()

    def partitions_of(self, name: TopicName) -> int:
        if name.partition_index >= 0:
            return 0
        return self.partitioned.get(name.full, 0)

    def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        self.check_namespace(name)
        if partitions < 1:
            raise ValueError("a partitioned topic needs at least one partition")
        if name.full in self.partitioned or name.full in self.topics:
            raise Conflict(f"topic {name.full} already exists")
        self.partitioned[name.full] = partitions
        self._save_meta()

    def topic_exists(self, name: TopicName) -> bool:
        """A topic, partitioned topic or partition of one that Pulsar would say exists."""
        if name.full in self.topics or name.full in self.partitioned:
            return True
        index = name.partition_index
        return 0 <= index < self.partitions_of(name.base)

    # topic-level policies (Pulsar keeps them per topic; a partitioned topic's apply to every
    # partition, and a policy cannot be set on one partition) -----------------------------

    def topic_policy(self, name: TopicName, key: str) -> dict[str, Any] | None:
        return self.topic_policies.get(name.base.full, {}).get(key)

    def set_topic_policy(self, name: TopicName, key: str, value: dict[str, Any]) -> None:
        if name.partition_index >= 0:
            raise PreconditionFailed("Not allowed to set/get topic policy for a partition")
        self.check_namespace(name)
        if not self.topic_exists(name):
            raise KeyError(f"Topic {name.full} not found")
        self.topic_policies.setdefault(name.full, {})[key] = value
        self._save_meta()

    def retains(self, name: TopicName) -> bool:
        """Whether a retention policy keeps this topic's entries with no subscription.

        Pulsar's `RetentionPolicies`: -1 is infinite, 0 is none; any other time or size keeps
        entries for a while, which here (nothing expires) means kept."""
        policy = self.topic_policy(name, RETENTION)
        if policy is None:
            return False
        minutes = int(policy.get("retentionTimeInMinutes", 0))
        size = int(policy.get("retentionSizeInMB", 0))
        return minutes != 0 or size != 0

    def record_trim(self, topic: Topic) -> None:
        """Record a topic's new trim floor (kept across restarts with a data directory)."""
        self.trim_floors[topic.name.full] = topic.trimmed
        self._save_meta_soon()

    def topic(self, name: TopicName) -> Topic:
        """The topic, loaded or created (auto-creation of non-partitioned topics)."""
        topic = self.topics.get(name.full)
        if topic is None:
            store = self.store.topic(name.full)
            topic = Topic(self, name, store, self.allocate_ledger_id())
            self.topics[name.full] = topic
        return topic

    def topics_of_namespace(self, ns: str) -> list[str]:
        names = {t for t in self.topics if TopicName.parse(t).ns == ns}
        for base, count in self.partitioned.items():
            if TopicName.parse(base).ns == ns:
                names.update(TopicName.parse(base).partition(i).full for i in range(count))
        return sorted(names)

    # scheduling -------------------------------------------------------------------------

    def schedule_dispatch(self, sub: Subscription) -> None:
        """Dispatch once per loop iteration, after every frame of the current read."""
        self._dirty_subs.add(sub)
        if self._dispatch_handle is None:
            self._dispatch_handle = asyncio.get_running_loop().call_soon(self._run_dispatch)

    def _run_dispatch(self) -> None:
        self._dispatch_handle = None
        subs, self._dirty_subs = self._dirty_subs, set()
        for sub in subs:
            sub.dispatch()

    def resume_dispatch(self) -> None:
        self.faults.dispatch_paused = False
        for topic in self.topics.values():
            for sub in topic.subscriptions.values():
                self.schedule_dispatch(sub)

    def schedule_cursor_save(self, topic: Topic, sub: Subscription) -> None:
        if self.config.data_dir is None:
            return
        self._dirty_cursors[id(sub)] = (topic, sub)
        if self._save_handle is None:
            loop = asyncio.get_running_loop()
            self._save_handle = loop.call_later(CURSOR_SAVE_DELAY, self.save_cursors)

    def save_cursors(self) -> None:
        self._save_handle = None
        dirty, self._dirty_cursors = self._dirty_cursors, {}
        for topic, sub in dirty.values():
            if topic.subscriptions.get(sub.name) is sub:
                topic.store.save_cursor(sub.name, sub.snapshot())

    # operations -------------------------------------------------------------------------

    def drop_connections(self) -> int:
        """Abort every client connection (as a network failure would)."""
        connections = list(self.connections)
        for conn in connections:
            conn.abort()
        return len(connections)

    def unload(self, name: TopicName) -> None:
        """Broker-initiated close of a topic's producers and consumers; they reconnect."""
        targets = (
            [name]
            if self.partitions_of(name) == 0
            else [name.partition(i) for i in range(self.partitions_of(name))]
        )
        for target in targets:
            topic = self.topics.get(target.full)
            if topic is not None:
                topic.close_clients()

    def reset(self) -> None:
        """Forget every topic, partitioned topic, namespace added later and fault."""
        for topic in list(self.topics.values()):
            topic.close_clients()
            topic.close()
            self.store.delete_topic(topic.name.full)
        self.topics.clear()
        self.partitioned.clear()
        self.deduplication.clear()
        self.topic_policies.clear()
        self.trim_floors.clear()
        self.namespaces = set(self.config.namespaces)
        self.faults.clear()
        self._dirty_cursors.clear()
        self._save_meta()

    def close_all_clients(self) -> None:
        for topic in self.topics.values():
            topic.close_clients()

    def close(self) -> None:
        """Persist everything and release the stores (the sockets are closed by the server)."""
        if self._save_handle is not None:
            self._save_handle.cancel()
        if self._meta_handle is not None:
            self._meta_handle.cancel()
            self._meta_handle = None
        self.save_cursors()
        for topic in self.topics.values():
            topic.close()
        with contextlib.suppress(Exception):
            self._save_meta()
