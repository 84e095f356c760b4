"""The offload inspector: where an offloaded copy lives and whether the objects are Pulsar's.

The keys are always computed from the PDLI's uuid and ledger id (`services.metadata`), never
taken as strings from a request. The bucket comes from the driver metadata (or the configured
default for ledgers offloaded before driver metadata existed) and must be on the allow-list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.core.errors import InvalidArgument
from services.metadata.offload import (
    PROP_STORAGE_BASE_PATH,
    data_object_key,
    filesystem_offload_path,
    index_object_key,
    offload_location,
)
from services.metadata.pulsar_names import managed_ledger_path, topic_from_managed_ledger_name
from services.verifier.model import (
    Difference,
    OffloadEvidence,
    SkipReason,
    Target,
    Verdict,
    delete,
    skip,
)
from services.verifier.ports import ObjectHead, ObjectStore

FILESYSTEM_DRIVER = "filesystem"
META_ML_NAME = "managedledgername"
META_CLUSTER = "pulsarclustername"


@dataclass(frozen=True)
class OffloadPolicy:
    """What the operator allows the verifier to approve in tiered storage."""

    allowed_buckets: frozenset[str] = frozenset()
    default_bucket: str | None = None
    """The offloader's bucket for ledgers whose driver metadata is empty (Pulsar 2.1)."""
    allowed_filesystem_bases: frozenset[str] = frozenset()
    """Storage base paths (fs.defaultFS) of the filesystem offloader that may be deleted in."""
    filesystem_base: str | None = None
    """The offloader's current fs.defaultFS; None takes the ledger's `storageBasePath`."""
    cluster_name: str | None = None
    """This Pulsar cluster's name; objects naming another cluster are MISMATCH."""


class OffloadInspector:
    def __init__(self, objects: ObjectStore, policy: OffloadPolicy) -> None:
        self._objects = objects
        self._policy = policy

    async def judge(
        self, target: Target, *, believed: bool, min_age_ms: int | None, now_ms: int
    ) -> Verdict:
        """Step 4 for an OFFLOAD_LEDGER target (after the in-use step passed)."""
        assert target.offload is not None
        if target.offload.driver_name == FILESYSTEM_DRIVER:
            return self._filesystem(target)
        return await self._blob(target, believed=believed, min_age_ms=min_age_ms, now_ms=now_ms)

    def _filesystem(self, target: Target) -> Verdict:
        """The MapFile directory of exactly the owner the in-use check read.

        The path is rebuilt from the canonical parts of the target's ML name, and that name
        must be the one whose znode (`owner_path`) was checked: an alias (`t/ns/./persistent/x`)
        would otherwise pass the check on a missing owner and resolve to a live directory.
        An `InvalidArgument` raised here is a SKIP INVALID verdict.
        """
        assert target.offload is not None
        ml_name = _canonical_owner_ml(target)
        stored = target.offload.driver_metadata.get(PROP_STORAGE_BASE_PATH)
        base = self._policy.filesystem_base or (None if stored in (None, "", "null") else stored)
        if (base or "") not in self._policy.allowed_filesystem_bases:
            diff = Difference("storageBasePath", "an allowed base", base)
            return _mismatch("storage base path not allowed", [diff])
        path = filesystem_offload_path(base, ml_name, target.ledger_id, target.offload.uuid)
        evidence = OffloadEvidence(driver_name=FILESYSTEM_DRIVER, filesystem_path=path)
        return delete("offload_filesystem", f"offloaded copy at {path}", offload=evidence)

    async def _blob(
        self, target: Target, *, believed: bool, min_age_ms: int | None, now_ms: int
    ) -> Verdict:
        assert target.offload is not None
        bucket = offload_location(
            target.offload.driver_metadata, default_bucket=self._policy.default_bucket
        ).bucket
        if bucket is None:
            return skip(SkipReason.INVALID, "no_bucket", "driver metadata names no bucket")
        if bucket not in self._policy.allowed_buckets:
            diff = Difference("bucket", "an allowed bucket", bucket)
            return _mismatch(f"bucket {bucket!r} is not allowed", [diff])
        keys = (
            data_object_key(target.offload.uuid, target.ledger_id),
            index_object_key(target.offload.uuid, target.ledger_id),
        )
        heads = await asyncio.gather(*(self._objects.head(bucket=bucket, key=k) for k in keys))
        present = [h for h in heads if h is not None]
        if not present:
            return skip(
                SkipReason.NOT_FOUND, "objects_absent", f"no object {keys[0]}[-index] in {bucket}"
            )
        if not believed:
            differences = self._identity_differences(target, present)
            if differences:
                return _mismatch("offloaded object of another owner", differences)
        if min_age_ms is not None and any(
            now_ms - h.last_modified_ms < min_age_ms for h in present
        ):
            return skip(
                SkipReason.IN_USE, "too_young", "object younger than the reconciler age window"
            )
        evidence = OffloadEvidence(driver_name=target.offload.driver_name, bucket=bucket, keys=keys)
        return delete(
            "offload_objects",
            f"{len(present)} object(s) in {bucket}",
            offload=evidence,
            believed=believed,
        )

    def _identity_differences(self, target: Target, heads: list[ObjectHead]) -> list[Difference]:
        expected_cluster = self._policy.cluster_name or target.cluster or None
        out: list[Difference] = []
        if (
            self._policy.cluster_name
            and target.cluster
            and target.cluster != self._policy.cluster_name
        ):
            out.append(Difference("cluster", self._policy.cluster_name, target.cluster))
        for head in heads:
            meta: Mapping[str, str] = head.user_metadata
            ml = meta.get(META_ML_NAME)
            if ml is not None and ml != target.ml_name:
                out.append(Difference(META_ML_NAME, target.ml_name, ml))
            cluster = meta.get(META_CLUSTER)
            if cluster is not None and expected_cluster is not None and cluster != expected_cluster:
                out.append(Difference(META_CLUSTER, expected_cluster, cluster))
        return out


def _canonical_owner_ml(target: Target) -> str:
    """The target's ML name rebuilt from its parsed parts; it must be the name as given and
    the owner whose znode the in-use check read."""
    if target.ml_name is None:
        raise InvalidArgument("managed_ledger_name", "missing (required for an offloaded copy)")
    rebuilt = topic_from_managed_ledger_name(target.ml_name).managed_ledger_name
    if rebuilt != target.ml_name or managed_ledger_path(rebuilt) != target.owner_path:
        raise InvalidArgument(
            "managed_ledger_name", f"{target.ml_name!r} is not the owner {target.owner_path!r}"
        )
    return rebuilt


def _mismatch(reason: str, differences: Sequence[Difference]) -> Verdict:
    return skip(SkipReason.MISMATCH, "mismatch", reason, differences=tuple(differences))
