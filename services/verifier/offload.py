"""The offload inspector: where an offloaded copy lives and whether the objects are Pulsar's.

The keys are always computed from the PDLI's uuid and ledger id (`services.metadata`), never
taken as strings from a request. The bucket comes from the driver metadata (or the configured
default for ledgers offloaded before driver metadata existed) and must be on the allow-list.
So does the endpoint (`serviceEndpoint`, `endpoint` before 2.7) with the region: the objects
are read there, and the verdict names that location for the deleter. A record naming no
endpoint or region is at the configured ones; a named endpoint must be on the endpoint
allow-list (the configured credentials go to no other host).

One HEAD per ledger is enough to know whose the objects are: the data object's, or the
index object's when the data object is absent (both only for the reconciler's age check).
Both objects come from the one upload their uuid names, with one metadata map
(docs/verifier.md, "Offloaded copies: what one delete needs to know").

Objects written before Pulsar 2.10 carry no `managedledgername`: they are deleted only with a
proof of ownership, either the index object's own segment metadata naming the PDLI's ML, or
an intent the owner vouches for (signed and unlinked, `ownership.proves_unlink`, or reported
by the marker into the believed set). Objects or an index naming another owner are MISMATCH.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.core.config import S3_DRIVERS
from services.core.errors import InvalidArgument
from services.core.s3_locations import (
    UNCONFIGURED,
    EndpointNotAllowed,
    LocationRefused,
    S3Location,
    resolve_location,
)
from services.metadata.errors import CorruptMetadata
from services.metadata.ledger_metadata import KEY_MANAGED_LEDGER
from services.metadata.offload import (
    INDEX_HEADER_SIZE,
    PROP_STORAGE_BASE_PATH,
    data_object_key,
    filesystem_offload_path,
    index_managed_ledger,
    index_object_key,
    index_segment_length,
    is_legacy_context,
    legacy_location,
    offload_location,
)
from services.metadata.pulsar_names import managed_ledger_path, topic_from_managed_ledger_name
from services.verifier.model import (
    Difference,
    OffloadEvidence,
    OffloadTarget,
    SkipReason,
    Target,
    Verdict,
    delete,
    retry,
    skip,
)
from services.verifier.owners import Owner
from services.verifier.ownership import proves_unlink
from services.verifier.ports import ObjectHead, ObjectStore

FILESYSTEM_DRIVER = "filesystem"
META_ML_NAME = "managedledgername"
META_CLUSTER = "pulsarclustername"
# The first ranged read of an index object: its header and, nearly always, all of the
# segment metadata (a ledger's metadata is well under a kilobyte).
_FIRST_READ = 4096
# Segment metadata longer than this is not something Pulsar wrote: no proof from it.
_MAX_SEGMENT_METADATA = 1 << 20


class _NotRead(enum.Enum):
    """An object the verifier did not HEAD: it may or may not exist."""

    NOT_READ = "not read"


NOT_READ = _NotRead.NOT_READ


@dataclass(frozen=True)
class OffloadPolicy:
    """What the operator allows the verifier to approve in tiered storage."""

    allowed_buckets: frozenset[str] = frozenset()
    default_bucket: str | None = None
    """The offloader's bucket for ledgers whose driver metadata is empty (Pulsar 2.1)."""
    default_driver: str = "aws-s3"
    """The offloader's driver for contexts without driver metadata (with `default_bucket`)."""
    allowed_filesystem_bases: frozenset[str] = frozenset()
    """Storage base paths (fs.defaultFS) of the filesystem offloader that may be deleted in."""
    filesystem_base: str | None = None
    """The offloader's current fs.defaultFS; None takes the ledger's `storageBasePath`."""
    cluster_name: str | None = None
    """This Pulsar cluster's name; objects naming another cluster are MISMATCH."""
    default_location: S3Location = UNCONFIGURED
    """The configured endpoint and region: where records naming none of their own live.
    The service sets both from its `S3Config` (`app.located`)."""
    allowed_endpoints: frozenset[str] = frozenset()
    """Canonical endpoints a record may name besides the configured one."""


class OffloadInspector:
    def __init__(self, objects: ObjectStore, policy: OffloadPolicy) -> None:
        self._objects = objects
        self._policy = policy

    async def judge(
        self,
        target: Target,
        *,
        owner: Owner,
        believed: bool,
        min_age_ms: int | None,
        now_ms: int,
    ) -> Verdict:
        """Step 4 for an OFFLOAD_LEDGER target (after the in-use step passed).

        `owner` is the successful read of the target's owner (for the signed-intent proof).
        """
        assert target.offload is not None
        if target.offload.driver_name == FILESYSTEM_DRIVER:
            return self._filesystem(target)
        return await self._blob(
            target, owner, believed=believed, min_age_ms=min_age_ms, now_ms=now_ms
        )

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
        self, target: Target, owner: Owner, *, believed: bool, min_age_ms: int | None, now_ms: int
    ) -> Verdict:
        assert target.offload is not None
        located = self._locate(target.offload)
        if isinstance(located, Verdict):
            return located
        driver, bucket, properties = located
        if bucket not in self._policy.allowed_buckets:
            diff = Difference("bucket", "an allowed bucket", bucket)
            return _mismatch(f"bucket {bucket!r} is not allowed", [diff])
        try:
            location = record_location(
                properties,
                default=self._policy.default_location,
                allowed_endpoints=self._policy.allowed_endpoints,
            )
        except EndpointNotAllowed as e:
            # As a bucket off the allow-list: not this verifier's to approve, dead-lettered.
            diff = Difference("endpoint", "an allowed endpoint", e.endpoint)
            return _mismatch(f"endpoint {e.endpoint!r} is not allowed", [diff])
        except LocationRefused as e:
            return skip(SkipReason.INVALID, "bad_location", f"offload location: {e}")
        # The evidence names only what the record names: a record naming no endpoint (or
        # region) is at each service's configured one, and a deleter may reach the same store
        # by another address (its own proxy or private endpoint) than the verifier.
        named = offload_location(properties)
        said = (
            (location.endpoint or "") if named.endpoint else "",
            location.region if named.region else "",
        )
        return await self._objects_at(
            target,
            owner,
            driver,
            bucket,
            location,
            said,
            believed=believed,
            min_age_ms=min_age_ms,
            now_ms=now_ms,
        )

    async def _objects_at(
        self,
        target: Target,
        owner: Owner,
        driver: str,
        bucket: str,
        location: S3Location,
        said: tuple[str, str],
        *,
        believed: bool,
        min_age_ms: int | None,
        now_ms: int,
    ) -> Verdict:
        """The verdict on the objects of `target` in `bucket` at `location` (allowed);
        `said` is the (endpoint, region) the evidence names, empty where the record names
        none."""
        assert target.offload is not None
        keys = (
            data_object_key(target.offload.uuid, target.ledger_id),
            index_object_key(target.offload.uuid, target.ledger_id),
        )
        heads = await self._heads(bucket, keys, location, both=min_age_ms is not None)
        present = [h for h in heads if isinstance(h, ObjectHead)]
        if not present:
            return skip(
                SkipReason.NOT_FOUND, "objects_absent", f"no object {keys[0]}[-index] in {bucket}"
            )
        # Objects naming another owner are never this PDLI's, believed or signed alike.
        differences = self._identity_differences(target, present)
        if differences:
            return _mismatch("offloaded object of another owner", differences)
        if any(META_ML_NAME not in h.user_metadata for h in present):
            index_key = None if heads[1] is None else keys[1]
            refused = await self._owner_proof(target, owner, bucket, location, index_key, believed)
            if refused is not None:
                return refused
        if min_age_ms is not None and any(
            now_ms - h.last_modified_ms < min_age_ms for h in present
        ):
            # Undecided, not settled: retried, then dead-lettered if it stays young.
            return retry("too_young", "object younger than the reconciler age window")
        sizes = [h.size for h in present]
        size = None if None in sizes else sum(s for s in sizes if s is not None)
        evidence = OffloadEvidence(
            driver_name=driver,
            bucket=bucket,
            keys=keys,
            size_bytes=size,
            endpoint=said[0],
            region=said[1],
        )
        return delete(
            "offload_objects",
            f"{len(present)} object(s) in {bucket} at {location.describe()}",
            offload=evidence,
            believed=believed,
        )

    async def _heads(
        self, bucket: str, keys: tuple[str, str], location: S3Location, *, both: bool
    ) -> tuple[ObjectHead | None, ObjectHead | _NotRead | None]:
        """The HEADs of (data, index): the data object's first, the index's only when the data
        object is absent, both at once with `both` (the reconciler's age check needs the
        index, the youngest). One upload wrote both with one metadata map, so one present
        object names the owner of both (docs/verifier.md, "what one delete needs to know")."""
        if both:
            data, index = await asyncio.gather(
                *(self._objects.head(bucket=bucket, key=k, location=location) for k in keys)
            )
            return data, index
        data = await self._objects.head(bucket=bucket, key=keys[0], location=location)
        if data is not None:
            return data, NOT_READ
        return None, await self._objects.head(bucket=bucket, key=keys[1], location=location)

    def _locate(self, offload: OffloadTarget) -> tuple[str, str, Mapping[str, str]] | Verdict:
        """(driver, bucket, driver properties) of a blob-store copy, or the verdict that it
        cannot be placed."""
        driver, properties = offload.driver_name, offload.driver_metadata
        default = self._policy.default_bucket
        if is_legacy_context(driver, properties):
            if default is None:
                return skip(
                    SkipReason.UNSUPPORTED,
                    "no_default_offload",
                    "offload context without driver metadata (Pulsar 2.1) and no "
                    "TOMBSTONE_OFFLOAD_DEFAULT_BUCKET configured",
                )
            driver, properties = legacy_location(self._policy.default_driver, default)
        if driver.lower() not in S3_DRIVERS:
            return skip(
                SkipReason.UNSUPPORTED,
                "unsupported_driver",
                f"offload driver {driver!r} is not an S3 or filesystem offloader",
            )
        if not properties and default is None:
            # Pulsar deletes these from its currently configured bucket: the default's job.
            return skip(
                SkipReason.UNSUPPORTED,
                "no_default_offload",
                "driver metadata names no bucket and no TOMBSTONE_OFFLOAD_DEFAULT_BUCKET is set",
            )
        bucket = offload_location(properties, default_bucket=default).bucket
        if bucket is None:
            return skip(SkipReason.INVALID, "no_bucket", "driver metadata names no bucket")
        return driver, bucket, properties

    async def _owner_proof(
        self,
        target: Target,
        owner: Owner,
        bucket: str,
        location: S3Location,
        index_key: str | None,
        believed: bool,
    ) -> Verdict | None:
        """For objects without owner metadata (written before Pulsar 2.10): None when a proof
        of ownership holds, else the MISMATCH verdict. The index object's own metadata is read
        first, so an index naming another owner refuses even a signed or believed intent."""
        if index_key is not None:
            named = await self._index_owner(bucket, location, index_key, target.ledger_id)
            if named is not None and named != target.ml_name:
                diff = Difference(f"{index_key} {KEY_MANAGED_LEDGER}", target.ml_name, named)
                return _mismatch("the index object names another managed ledger", [diff])
            if named is not None:
                return None
        if believed or proves_unlink(target, owner):
            return None
        return skip(
            SkipReason.MISMATCH,
            "no_owner_proof",
            "objects written before Pulsar 2.10 name no owner, and neither their index object "
            "nor a signed intent whose owner unlinked them proves whose they are",
        )

    async def _index_owner(
        self, bucket: str, location: S3Location, key: str, ledger_id: int
    ) -> str | None:
        """The ML the index object's segment metadata names; None when it names none or is
        not an index object. Read with ranged GETs: the header, then the metadata."""
        data = await self._objects.read_range(
            bucket=bucket, key=key, start=0, length=_FIRST_READ, location=location
        )
        if data is None:
            return None
        try:
            need = INDEX_HEADER_SIZE + index_segment_length(data)
        except InvalidArgument:
            return None
        if need > INDEX_HEADER_SIZE + _MAX_SEGMENT_METADATA:
            return None
        if len(data) < need:
            rest = await self._objects.read_range(
                bucket=bucket,
                key=key,
                start=len(data),
                length=need - len(data),
                location=location,
            )
            data += rest or b""
        try:
            return index_managed_ledger(data[:need], ledger_id=ledger_id, key=key)
        except (InvalidArgument, CorruptMetadata):
            return None

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


def record_location(
    driver_metadata: Mapping[str, str],
    *,
    default: S3Location,
    allowed_endpoints: frozenset[str],
) -> S3Location:
    """`resolve_location` for an offload record's driver metadata (`serviceEndpoint`, or the
    pre-2.7 `endpoint`, and `region`); empty metadata (Pulsar 2.1) is the configured location."""
    found = offload_location(driver_metadata)
    return resolve_location(
        found.endpoint, found.region, default=default, allowed_endpoints=allowed_endpoints
    )
