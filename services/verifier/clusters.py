"""Whose owner? (docs/design.md §3 S2, §4.2): other Pulsar clusters that share our BookKeeper.

Several clusters can share one ledgers root (`initialize-cluster-metadata
--existing-bk-metadata-service-uri`, Pulsar >= 2.6), each with its own metadata store. Ledger
ids are unique within the root, but owner names are not: another cluster's ledgers name MLs,
cursors and schemas that do not exist in ours, and a geo-replicated namespace has the same
topic names in each cluster. So "our owner does not reference it" proves nothing on its own:

- a PDLI naming another cluster is never acted on, on any tier (`check_cluster`);
- a declared neighbour (`TOMBSTONE_SHARED_CLUSTERS`) that references the ledger, or that has
  the owner we lack, makes the ledger its own (`elsewhere`);
- an owner absent here counts as absent only when its namespace exists here (its policies are
  in our configuration store) or the operator named the namespace as deleted: otherwise the
  owner may live in a cluster nobody declared;
- an owner name another cluster has too (a declared neighbour has an owner of that name, or
  the namespace replicates to a cluster nobody declared: a geo-replicated namespace has the
  same topic names in each cluster) names that cluster's ledgers as well, and their custom
  metadata matches our owner exactly. The `source` a PDLI claims proves nothing (anyone who
  can produce to the topic writes it), so such a ledger is acted on only when something else
  proves our owner listed it: the marker's belief, or a signed intent read from our owner
  whose unlink it reached. Reconciler and operator intents never are. A replication cluster
  the operator names as having a BookKeeper of its own (`TOMBSTONE_VERIFIER_UNSHARED_CLUSTERS`)
  has none of its ledgers here and does not count.

Each of these is SKIP FOREIGN: dead-lettered with its reason, never acknowledged.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from services.core.errors import InvalidArgument
from services.metadata.namespaces import (
    decode_policies,
    namespace_of_ml,
    namespace_of_schema,
    policies_path,
)
from services.verifier.model import Component, SkipReason, Target, Verdict, skip
from services.verifier.owners import DECODERS, Owner, OwnerCache, decode_ml
from services.verifier.ports import Znode, ZnodeStore


@dataclass(frozen=True)
class Neighbour:
    """A declared cluster sharing the ledgers root: its name and its owners, read through a
    watched cache on its own metadata store."""

    name: str
    owners: OwnerCache


#: A batch's reads of namespace policies znodes, by path: the znode, None when absent, or the
#: read's failure (raised again to the PDLI that uses it).
PolicyReads = Mapping[str, Znode | Exception | None]


def namespace_of(target: Target) -> str:
    if target.component is Component.SCHEMA:
        assert target.schema_id is not None
        return _namespace_of_schema(target.schema_id)
    assert target.ml_name is not None
    return _namespace_of_ml(target.ml_name)


# The namespace of a name is a pure function of it, and checking the name (its URL-encoding
# round trip) was the largest per-PDLI cost of a verdict left in the profile; the PDLIs of a
# batch mostly name a few topics. A name that fails its check raises each time (never cached).
_namespace_of_ml = functools.lru_cache(maxsize=4096)(namespace_of_ml)
_namespace_of_schema = functools.lru_cache(maxsize=4096)(namespace_of_schema)


class ClusterScope:
    """Our cluster among those that share the ledgers root."""

    def __init__(
        self,
        *,
        cluster: str | None,
        configuration: ZnodeStore,
        neighbours: Sequence[Neighbour] = (),
        deleted_namespaces: frozenset[str] = frozenset(),
        unshared_clusters: frozenset[str] = frozenset(),
    ) -> None:
        self.cluster = cluster
        self._configuration = configuration
        self.neighbours = tuple(neighbours)
        self._declared = frozenset(n.name for n in self.neighbours)
        self._unshared = unshared_clusters
        self._deleted = deleted_namespaces
        self._reading: dict[str, asyncio.Task[Znode | None]] = {}
        """Policies reads in flight, by path (`_read_policies`)."""

    def check_cluster(self, target: Target) -> Verdict | None:
        """SKIP FOREIGN for a PDLI of another cluster (ledger ids overlap across clusters'
        PDLIs once they share a root), on every tier."""
        if self.cluster is None or target.cluster == self.cluster:
            return None
        named = repr(target.cluster) if target.cluster else "no cluster"
        return _foreign(
            "other_cluster",
            f"the PDLI names {named}, this is cluster {self.cluster!r}: never acted on here",
        )

    async def elsewhere(
        self,
        target: Target,
        owner: Owner,
        *,
        topic_here: Callable[[], Awaitable[bool]],
        ours: Callable[[], Awaitable[bool]],
        policies: PolicyReads | None = None,
    ) -> Verdict | None:
        """SKIP FOREIGN when the ledger is, or may be, another cluster's; else None. Asked
        after our owner was read and found not referencing the ledger (never before).

        `ours` says whether anything but the PDLI's word proves our owner listed it (asked
        only for an owner name another cluster may have too). A proven ledger is ours, so no
        neighbour's owner can be creating it: the OPEN rule needs only our owner.

        `policies`: namespace policies already read by the caller's batch (`read_policies`),
        used instead of a read of their own."""
        neighbour_has_owner = False
        for neighbour in self.neighbours:
            theirs = await neighbour.owners.get(target.owner_path, DECODERS[target.component])
            if _may_reference(theirs, target):
                ref = theirs.refs.get(target.ledger_id)
                if target.offload is None or (ref is not None and ref.uuid == target.offload.uuid):
                    return _foreign(
                        "referenced_by_cluster",
                        f"cluster {neighbour.name!r} references ledger {target.ledger_id} "
                        f"at {target.owner_path} (version {theirs.version})",
                    )
            if theirs.exists:
                neighbour_has_owner = True
                if not owner.exists:
                    return _foreign(
                        "owner_in_cluster",
                        f"{target.owner_path} is absent here and exists in cluster "
                        f"{neighbour.name!r}: the ledger is that cluster's",
                    )
            elif await self._topic_there(neighbour, target) and not await topic_here():
                return _foreign(
                    "owner_in_cluster",
                    f"topic {target.ml_name} is absent here and exists in cluster "
                    f"{neighbour.name!r}: the ledger is that cluster's",
                )
        if not owner.exists:
            unknown = await self._namespace_unknown(target, policies)
            if unknown is not None:
                return unknown
        # Absent here proves nothing either where another cluster has the same names: an
        # undeclared one may still reference the ledger, a declared one may have leaked it.
        shared = await self._shared_name(target, has_owner=neighbour_has_owner, policies=policies)
        if shared is not None and not await ours():
            return shared
        return None

    async def _topic_there(self, neighbour: Neighbour, target: Target) -> bool:
        """For a ledger a cursor znode owns: whether the cursor's topic exists in the
        neighbour (a new cursor's ledger exists before its cursor znode does)."""
        if not target.component.cursor_owned or target.ml_path is None:
            return False
        return (await neighbour.owners.get(target.ml_path, decode_ml)).exists

    async def _namespace_unknown(
        self, target: Target, policies: PolicyReads | None
    ) -> Verdict | None:
        namespace = namespace_of(target)
        if namespace in self._deleted:
            return None
        path = policies_path(namespace)
        node = await self._policies(path, policies)
        if node is not None:
            return None
        return _foreign(
            "namespace_unknown",
            f"{target.owner_path} is absent and namespace {namespace} has no policies here "
            f"({path}): the owner may be another cluster's sharing this BookKeeper (declare "
            "it, or name the namespace as deleted)",
        )

    async def read_policies(self, targets: Iterable[Target]) -> dict[str, Znode | Exception | None]:
        """The policies znode of each namespace `targets` name, read now (the reads in flight
        joined), by path; a failed read is that path's value. For a batch, read after its
        ledger reads and before its owner lookups: each PDLI then uses the read its batch
        made instead of joining one of its own after its owner lookup. Such a read is sent
        at most the owner's read before the one the PDLI would have joined (the owner is
        read only on a cache miss), the order `_read_policies` already allows for."""
        paths = []
        for target in targets:
            try:
                paths.append(policies_path(namespace_of(target)))
            except InvalidArgument:
                continue  # not one namespace: the decision names the problem, if it gets here
        unique = list(dict.fromkeys(paths))
        read = await asyncio.gather(
            *(self._read_policies(path) for path in unique), return_exceptions=True
        )
        got: dict[str, Znode | Exception | None] = {}
        for path, node in zip(unique, read, strict=True):
            if isinstance(node, BaseException) and not isinstance(node, Exception):
                raise node  # cancellation
            got[path] = node
        return got

    async def _policies(self, path: str, policies: PolicyReads | None) -> Znode | None:
        """The batch's read of `path` when it made one, else a read (joined)."""
        if policies is None or path not in policies:
            return await self._read_policies(path)
        node = policies[path]
        if isinstance(node, Exception):
            raise node
        return node

    async def _read_policies(self, path: str) -> Znode | None:
        """The namespace's policies znode, the read in flight for `path` joined if there is
        one. The PDLIs of a VerifyBatch mostly share a few namespaces and reach this together:
        one read per namespace instead of one per PDLI (a round trip each, and a place under
        the read limit each). A joined read may have been sent before the caller's own owner
        read, by another PDLI of the batch, and at most one round trip before the caller's own
        would have been. That is safe for this check: an absent namespace only ever gives
        SKIP FOREIGN, and a present one what a read a moment earlier would have given. Its
        failure is each joiner's own: `Unavailable`, a RETRY."""
        reading = self._reading.get(path)
        if reading is None:
            reading = asyncio.create_task(self._configuration.read(path))
            self._reading[path] = reading
            reading.add_done_callback(lambda done: self._read_finished(path, done))
        # A cancelled caller must not cancel the read the others wait for.
        return await asyncio.shield(reading)

    def _read_finished(self, path: str, done: asyncio.Task[Znode | None]) -> None:
        if self._reading.get(path) is done:
            del self._reading[path]
        if not done.cancelled():
            done.exception()  # retrieved here too: every joiner may have been cancelled

    async def _shared_name(
        self,
        target: Target,
        *,
        has_owner: bool,
        policies: PolicyReads | None,
    ) -> Verdict | None:
        """SKIP FOREIGN unless proven ours, when another cluster may have an owner of this
        name: a declared neighbour has one (`has_owner`), or the namespace replicates to
        another cluster (declared or not: one that deleted the topic keeps its leaked
        ledgers, named as ours)."""
        namespace = namespace_of(target)
        path = policies_path(namespace)
        node = await self._policies(path, policies)
        clusters: set[str] = set()
        if node is not None:
            clusters = set(decode_policies(node.data, path=path).replication_clusters)
        others = clusters - {self.cluster or ""} - self._unshared
        if self.cluster is None and len(others) <= 1:
            others = set()  # one cluster, which must be ours
        undeclared = others - self._declared
        if undeclared:
            return _foreign(
                "replicated_undeclared",
                f"namespace {namespace} replicates to {', '.join(sorted(undeclared))}, not "
                "declared as sharing this BookKeeper: a ledger of the same topic there would "
                "match this owner, and nothing but this intent says our owner listed it",
            )
        if has_owner or others:
            names = ", ".join(
                sorted(others | ({n.name for n in self.neighbours} if has_owner else set()))
            )
            return _foreign(
                "owner_shared",
                f"{target.owner_path} may exist in {names} too (namespace {namespace}): the "
                "ledger's metadata matches either, and nothing but this intent says our owner "
                "listed it",
            )
        return None


def _may_reference(theirs: Owner, target: Target) -> bool:
    """Whether a neighbour's owner references the ledger, or may (its active `__compaction`
    cursor's live value is unreadable: that counts as a reference)."""
    if theirs.references(target.ledger_id):
        return True
    return target.component is Component.COMPACTED and theirs.compaction_unknown(target.ledger_id)


def _foreign(code: str, reason: str) -> Verdict:
    """The code leads the reason (as `unavailable_<dependency>` does for RETRY), so the dead
    letter's reason names which case it is."""
    return skip(SkipReason.FOREIGN, code, f"{code}: {reason}")
