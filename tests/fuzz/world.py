"""What a rejected request must not change: ZooKeeper's subtrees, the topics, the bucket.

A snapshot records every znode under the watched roots (data, version, mzxid, cversion), the
message-in counters of the system, retry and dead-letter topics (every partition), and the
S3 listing of every bucket (key, size, ETag). `diff` names what changed between two.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass
from typing import Any

import boto3

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from services.metadata.errors import NoNode
from services.metadata.zookeeper.store import ZkMetadataStore

ROOTS = ("/managed-ledgers", "/ledgers", "/schemas", "/tombstone")


@dataclass(frozen=True)
class Snapshot:
    znodes: dict[str, tuple[str, int, int, int]]
    topics: dict[str, int]
    objects: dict[str, tuple[int, str]]


def diff(before: Snapshot, after: Snapshot) -> list[str]:
    """Human-readable differences, empty when the world is unchanged."""
    changes: list[str] = []
    for label, old, new in (
        ("znode", before.znodes, after.znodes),
        ("topic", before.topics, after.topics),
        ("object", before.objects, after.objects),
    ):
        old_map: dict[str, Any] = dict(old)
        new_map: dict[str, Any] = dict(new)
        for key in sorted(old_map.keys() | new_map.keys()):
            if old_map.get(key) != new_map.get(key):
                changes.append(f"{label} {key}: {old_map.get(key)} -> {new_map.get(key)}")
    return changes


class World:
    """Takes snapshots of the real ZooKeeper, devstack broker and moto S3."""

    def __init__(
        self, store: ZkMetadataStore, broker: PulsarBrokerProcess, s3: S3Server, topics: list[str]
    ) -> None:
        self._store = store
        self._broker = broker
        self._topics = topics
        self._s3 = boto3.client("s3", **s3.client_config())

    async def snapshot(self) -> Snapshot:
        znodes: dict[str, tuple[str, int, int, int]] = {}
        for root in ROOTS:
            await self._walk(root, znodes)
        topics, objects = await asyncio.to_thread(self._outside)
        return Snapshot(znodes, topics, objects)

    async def _walk(self, path: str, out: dict[str, tuple[str, int, int, int]]) -> None:
        try:
            node = await self._store.get(path)
            children = await self._store.get_children(path)
        except NoNode:
            return
        digest = hashlib.blake2b(node.data, digest_size=8).hexdigest()
        out[path] = (digest, node.version, node.mzxid, node.cversion)
        for child in children:
            await self._walk(f"{path}/{child}", out)

    def _outside(self) -> tuple[dict[str, int], dict[str, tuple[int, str]]]:
        topics: dict[str, int] = {}
        for topic in self._topics:
            stats = self._broker.control.partitioned_stats(topic)
            for name, partition in stats.get("partitions", {}).items():
                topics[name] = int(partition["msgInCounter"])
        objects: dict[str, tuple[int, str]] = {}
        for bucket in self._s3.list_buckets().get("Buckets", []):
            name = bucket["Name"]
            with contextlib.suppress(self._s3.exceptions.NoSuchBucket):
                paginator = self._s3.get_paginator("list_objects_v2")
                for page in paginator.paginate(Bucket=name):
                    for item in page.get("Contents", []):
                        objects[f"{name}/{item['Key']}"] = (int(item["Size"]), str(item["ETag"]))
        return topics, objects
