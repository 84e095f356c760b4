"""The verifier's decision (docs/design.md §4), step by step. No gRPC here: PDLI in, `Verdict` out.

1. INVALID if the PDLI is malformed (`validation.parse_target`).
2. In use? The owner (ML list, cursor znode or schema locator) still references the ledger:
   RETRY while the owner's version is below the fence token, else SKIP IN_USE. A shadow
   topic that still lists a data ledger is RETRY: the shadow drops it later (PIP-180). A
   compacted ledger of an active `__compaction` cursor is RETRY unless the value the znode
   persisted is above it (`Owner.compaction_unknown`).
3. Believed? The marker reported this exact identity as unlinked: skip the metadata match.
4. Match? The ledger is the one the intent names: not created after the intent was recorded
   (`incarnation.py`: ledger ids are given again after a PIP-454 migration). BookKeeper
   custom metadata, or the offloaded objects' identity (`offload.py`).
   A ledger without Pulsar metadata (before Pulsar 2.2) needs a proof of ownership
   (`ownership.proves_unlink`). An OPEN ledger is decided as closed only by the OPEN rule
   (`open_rule.py`). A compacted ledger or bucket snapshot needs its Pulsar metadata, and
   must be older than the property-ledger age window. The ledger is looked for at every
   path the layouts in play give it; NOT_FOUND needs `LAYOUT` confirmed in the same read.
5. Any error on the way: RETRY, never DELETE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import structlog

from services.core.errors import CorruptData, InvalidArgument, TombstoneError, Unavailable
from services.core.tasks import is_cancelled
from services.metadata.ledger_metadata import (
    LedgerState,
    LedgerSummary,
    decode_ledger_summary,
)
from services.metadata.paths import LedgerLocations, parse_layout
from services.verifier.clusters import ClusterScope, PolicyReads
from services.verifier.incarnation import other_incarnation
from services.verifier.matching import has_pulsar_metadata, metadata_differences
from services.verifier.model import (
    BookKeeperEvidence,
    Component,
    SkipReason,
    Source,
    Target,
    Tier,
    Verdict,
    delete,
    retry,
    skip,
)
from services.verifier.offload import OffloadInspector
from services.verifier.open_rule import open_ledger_verdict
from services.verifier.owners import DECODERS, Owner, OwnerCache, decode_ml
from services.verifier.ownership import proves_unlink
from services.verifier.ports import Znode, ZnodeStore
from services.verifier.signatures import Forged, SignatureGate
from services.verifier.validation import parse_target
from tombstone.v1 import pending_delete_pb2 as _pb

_log = structlog.get_logger("tombstone.verifier")


class Believed(Protocol):
    """The believed set as the decision sees it."""

    def __contains__(self, key: int) -> bool: ...

    async def refresh(self) -> None: ...


class ShadowLookup(Protocol):
    """Which shadow MLs copy a source ML's ledger list (PIP-180)."""

    @property
    def ready(self) -> bool: ...

    def shadows_of(self, ml_name: str) -> Sequence[str]:
        """ML paths of the shadows of `ml_name`."""
        ...

    def fresh_since(self, ms: int) -> bool:
        """Whether the index comes from a scan that started at or after `ms` (epoch ms); if
        not, a scan is asked for."""
        ...


@dataclass(frozen=True)
class DecisionPolicy:
    locations: Callable[[], LedgerLocations] = LedgerLocations
    """The ledgers root and the layout `LAYOUT` names now (`layout.LayoutWatch.current`)."""
    reconciler_min_age: timedelta = timedelta(days=3)
    """RECONCILER PDLIs: the ledger (or object) must be at least this old at verification."""
    open_ledger_age: timedelta = timedelta(days=3)
    """An OPEN ledger older than this is not in creation (the reconciler's age window)."""
    schema_min_age: timedelta = timedelta(minutes=2)
    """A schema ledger younger than this is RETRY: Pulsar closes it before its locator names
    it (`BookkeeperSchemaStorage`), so a young unreferenced one may be in creation."""
    property_ledger_min_age: timedelta = timedelta(minutes=10)
    """A compacted ledger or bucket snapshot last written (closed) more recently than this is
    RETRY: `TwoPhaseCompactor` and `BookkeeperBucketSnapshotStorage` close the ledger before
    the cursor property names it, so a young unreferenced one may be in that window."""
    shadow_margin: timedelta = timedelta(seconds=2)
    """Clock allowance between the marker, ZooKeeper and the verifier when asking for a
    shadow scan that started after the ledger left its owner's list."""
    incarnation_allowance: timedelta = timedelta(0)
    """How far the store's (or a ledger client's) clock may run behind the marker's when
    judging whether a ledger was created after the intent naming it (`incarnation.py`)."""


@dataclass(frozen=True)
class _Prefetched:
    """What `verify_batch` read for the whole batch, before any of its decisions."""

    locations: LedgerLocations
    """The locations the reads were made under; a decision under others reads afresh."""
    paths: Mapping[int, tuple[str, ...]]
    """Each BookKeeper-tier ledger id's paths under `locations`."""
    nodes: Mapping[str, Znode | Exception | None]
    """Each of those paths, and `LAYOUT`'s, as read."""
    policies: PolicyReads | None = None
    """The namespace policies of the batch's targets (`ClusterScope.read_policies`)."""


class _Undecided(Exception):
    """Nothing proves the answer either way: RETRY with this code."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code


Observer = Callable[[Verdict, Target | None, _pb.PendingDeleteLedgerInfo], None]


class DecisionEngine:
    def __init__(
        self,
        *,
        store: ZnodeStore,
        owners: OwnerCache,
        believed: Believed,
        offload: OffloadInspector,
        shadows: ShadowLookup | None = None,
        policy: DecisionPolicy = DecisionPolicy(),
        observe: Observer = lambda verdict, target, pdli: None,
        clock: Callable[[], float] = time.time,
        signatures: SignatureGate | None = None,
        scope: ClusterScope | None = None,
    ) -> None:
        self._store = store
        self._owners = owners
        self._believed = believed
        self._offload = offload
        self._shadows = shadows
        self._policy = policy
        self._observe = observe
        self._clock = clock
        self._signatures = signatures
        self._scope = scope

    async def verify(self, pdli: _pb.PendingDeleteLedgerInfo) -> Verdict:
        """The verdict for one PDLI; never raises except on cancellation."""
        return await self._verify(pdli, self._parse(pdli), None)

    async def verify_batch(self, pdlis: Sequence[_pb.PendingDeleteLedgerInfo]) -> list[Verdict]:
        """The verdicts for many PDLIs, in order: exactly what `verify` gives for each.

        The ledger znodes of all BookKeeper-tier PDLIs are read first, together (one
        `read_many`: a multiRead per chunk), and each decision then uses its prefetched read.
        Every owner lookup comes after that read, as in `verify`, so the owner view is at
        least as new as the ledger read. Never raises except on cancellation.
        """
        parsed = [self._parse(pdli) for pdli in pdlis]
        locations = self._policy.locations()
        paths_of = {
            target.ledger_id: locations.paths(target.ledger_id)
            for target in parsed
            if isinstance(target, Target) and target.tier is Tier.BOOKKEEPER
        }
        wanted = [path for paths in paths_of.values() for path in paths]
        paths = list(dict.fromkeys([*wanted, locations.layout_path] if wanted else []))
        nodes = dict(zip(paths, await self._read_many(paths), strict=True))
        # One yield for the whole batch, where `verify` yields once per PDLI before trusting
        # a cached owner (`OwnerCache.get`): a change event that came in with the batch's
        # read runs its callbacks before any decision below looks at the cache.
        await asyncio.sleep(0)
        policies = None
        if self._scope is not None:
            # Read once for the batch, not joined by each PDLI after its owner lookup (a
            # suspension and a shield each): `ClusterScope.read_policies` says why the order
            # stays the one a joined read allows.
            targets = [t for t in parsed if isinstance(t, Target)]
            policies = await self._scope.read_policies(
                t for t in targets if self._scope.check_cluster(t) is None
            )
        batch = _Prefetched(locations, paths_of, nodes, policies)
        pairs = zip(pdlis, parsed, strict=True)
        return list(await asyncio.gather(*(self._verify(p, t, batch) for p, t in pairs)))

    def _parse(self, pdli: _pb.PendingDeleteLedgerInfo) -> Target | Exception:
        """The validated target, then its signature checked (`signatures.py`)."""
        parsed = _parse(pdli)
        return parsed if self._signatures is None else self._signatures.apply(pdli, parsed)

    async def _read_many(self, paths: list[str]) -> list[Znode | Exception | None]:
        """`read_many`, with an unexpected failure of the whole call given to every path
        (each of those PDLIs then gets the RETRY a failed single read would give)."""
        try:
            return await self._store.read_many(paths)
        except Exception as e:
            return [e] * len(paths)

    async def _verify(
        self,
        pdli: _pb.PendingDeleteLedgerInfo,
        parsed: Target | Exception,
        batch: _Prefetched | None,
    ) -> Verdict:
        target: Target | None = None
        try:
            if isinstance(parsed, Exception):
                raise parsed
            target = parsed
            verdict = await self._decide(target, batch)
        except Forged as e:
            verdict = e.verdict
        except InvalidArgument as e:
            verdict = skip(SkipReason.INVALID, "invalid", str(e))
        except _Undecided as e:
            verdict = retry(e.code, str(e))
        except CorruptData as e:
            verdict = retry("corrupt", f"unreadable metadata: {e}")
        except Unavailable as e:
            # Name the dependency that did not answer (the ZooKeeper and S3 adapters tag their
            # errors) at the start of the reason: the deleter pauses on it, spending no retry.
            dependency = getattr(e, "dependency", "")
            code = f"unavailable_{dependency}" if dependency else "unavailable"
            verdict = retry(code, f"{code}: unknown state: {e}")
        except BaseException as e:
            if is_cancelled(e) or not isinstance(e, Exception):
                raise
            _log.exception("verify_failed", ledger_id=pdli.ledger_id)
            kind = "error" if not isinstance(e, TombstoneError) else type(e).__name__
            verdict = retry(kind, f"{type(e).__name__}: {e}")
        self._observe(verdict, target, pdli)
        return verdict

    async def _decide(self, target: Target, batch: _Prefetched | None) -> Verdict:
        if self._scope is not None:
            foreign = self._scope.check_cluster(target)
            if foreign is not None:
                return foreign
        ledger: tuple[str, Znode | None] | None = None
        yielded = False
        if target.tier is Tier.BOOKKEEPER:
            # Read the ledger first: the owner looked up next is then at least this new.
            ledger, yielded = await self._locate(target.ledger_id, batch)
        owner = await self._owners.get(
            target.owner_path, DECODERS[target.component], yielded=yielded
        )
        if owner.shadow_source is not None and target.component is Component.MANAGED_LEDGER:
            # PIP-180: a shadow's list is a copy of its source's. The shadow no longer listing
            # a ledger proves nothing (for a ledger with no custom metadata it would be the
            # only proof of ownership), and the source may list it still.
            return skip(
                SkipReason.MISMATCH,
                "owner_is_shadow",
                f"{target.owner_path} is a shadow topic of {owner.shadow_source}: it owns no "
                "ledgers, its source does",
            )
        in_use = _in_use(target, owner)
        if in_use is not None:
            return in_use
        if ledger is not None and ledger[1] is None:
            # Absent at every path: nothing is left to delete, whoever else names it.
            return await self._match(target, owner, ledger, False)
        if target.component is Component.COMPACTED and owner.compaction_unknown(target.ledger_id):
            # Unknown, never "not referenced": the live value is in the cursor ledger.
            return retry(
                "reference_unknown",
                f"{owner.path} is active (its properties are in its cursor ledger) and the "
                f"CompactedTopicLedger it persisted ({owner.compacted_ledger}) is not above "
                f"ledger {target.ledger_id}: the ledger may be the live compacted ledger",
            )
        in_shadow = await self._in_shadow(target, owner)
        if in_shadow is not None:
            return in_shadow
        believed = target.source is not Source.RECONCILER and target.believed_key in self._believed
        if self._scope is not None:
            foreign = await self._scope.elsewhere(
                target,
                owner,
                topic_here=lambda: self._topic_exists(target, owner),
                ours=lambda: self._proven_ours(target, owner, believed),
                policies=batch.policies if batch is not None else None,
            )
            if foreign is not None:
                return foreign
        verdict = await self._match(target, owner, ledger, believed)
        if verdict.skip_reason is SkipReason.MISMATCH and not believed:
            verdict = await self._recheck_believed(target, owner, ledger, verdict)
        return verdict

    async def _locate(
        self, ledger_id: int, batch: _Prefetched | None
    ) -> tuple[tuple[str, Znode | None], bool]:
        """Where the ledger is: (its path, its znode), or (the paths read, None) when it is
        absent from every path the layouts in play give it and `LAYOUT` was confirmed by a
        read no older than those. Anything less raises (RETRY). The flag: whether every read
        used was the batch's, after which the batch has yielded once (`verify_batch`)."""
        locations = self._policy.locations()
        paths: list[str] | tuple[str, ...] | None = None
        if batch is not None and batch.locations is locations:
            paths = batch.paths.get(ledger_id)
        if paths is None:
            paths = locations.paths(ledger_id)
        got, prefetched = await self._reads(paths, batch)
        found = [(path, node) for path, node in zip(paths, got, strict=True) if node is not None]
        if len(found) > 1:
            where = ", ".join(path for path, _ in found)
            raise _Undecided("ledger_at_two_paths", f"ledger {ledger_id} exists at {where}")
        if found:
            return found[0], prefetched
        # Absent everywhere: only proof under a confirmed root and layout (a wrong root or
        # chroot would make every ledger look absent, and NOT_FOUND is acknowledged).
        (layout,), layout_prefetched = await self._reads([locations.layout_path], batch)
        if layout is None:
            raise _Undecided("layout_absent", f"{locations.layout_path} is absent")
        if parse_layout(layout.data, path=locations.layout_path) is not locations.layout:
            raise _Undecided("layout_changed", f"{locations.layout_path} names another layout")
        return (" and ".join(paths), None), prefetched and layout_prefetched

    async def _reads(
        self, paths: Sequence[str], batch: _Prefetched | None
    ) -> tuple[list[Znode | None], bool]:
        """The prefetched reads of `paths` when all are there, else fresh ones; an error of
        any path is raised, as `read` would. The flag: whether they were the prefetched."""
        ledgers = batch.nodes if batch is not None else None
        prefetched = ledgers is not None and all(path in ledgers for path in paths)
        if ledgers is not None and prefetched:
            got = [ledgers[path] for path in paths]
        elif len(paths) == 1:
            got = [await self._store.read(paths[0])]
        else:
            got = await self._store.read_many(paths)
        for result in got:
            if isinstance(result, Exception):
                raise result
        return [result for result in got if not isinstance(result, Exception)], prefetched

    async def _proven_ours(self, target: Target, owner: Owner, believed: bool) -> bool:
        """Whether something other than the PDLI's own word shows that our owner listed this
        copy: the marker's belief (re-read once, as before a MISMATCH), or a signed intent
        read from our owner whose unlink it reached (`proves_unlink`)."""
        if believed or proves_unlink(target, owner):
            return True
        if target.source is Source.RECONCILER:
            return False
        await self._believed.refresh()
        return target.believed_key in self._believed

    async def _recheck_believed(
        self,
        target: Target,
        owner: Owner,
        ledger: tuple[str, Znode | None] | None,
        verdict: Verdict,
    ) -> Verdict:
        """Before a MISMATCH, make sure no replica could answer otherwise: re-read the set."""
        if target.source is Source.RECONCILER:
            return verdict
        await self._believed.refresh()
        if target.believed_key not in self._believed:
            return verdict
        return await self._match(target, owner, ledger, True)

    async def _match(
        self,
        target: Target,
        owner: Owner,
        ledger: tuple[str, Znode | None] | None,
        believed: bool,
    ) -> Verdict:
        now_ms = int(self._clock() * 1000)
        min_age = self._min_age_ms(target)
        if ledger is None:
            return await self._offload.judge(
                target, owner=owner, believed=believed, min_age_ms=min_age, now_ms=now_ms
            )
        path, node = ledger
        if node is None:
            return skip(SkipReason.NOT_FOUND, "ledger_absent", f"absent at {path}")
        # Only what the rules below read (state, length, ctime, custom metadata).
        metadata = decode_ledger_summary(node.data, ledger_id=target.ledger_id, path=path)
        ctime = metadata.ctime if metadata.ctime is not None else node.ctime_ms
        # First, and whatever the belief: a ledger id given again names another ledger, which
        # nothing this intent says (its owner, its token, its belief) is about.
        allowance = _ms(self._policy.incarnation_allowance)
        later = other_incarnation(target, created_ms=ctime, allowance_ms=allowance)
        if later is not None:
            return later
        mismatch = self._metadata_mismatch(target, owner, metadata, believed)
        if mismatch is not None:
            return mismatch
        if metadata.state is not LedgerState.CLOSED:
            undecided = open_ledger_verdict(
                target,
                owner,
                state=metadata.state,
                topic_exists=await self._topic_exists(target, owner),
                age_ms=now_ms - ctime,
                max_age_ms=_ms(self._policy.open_ledger_age),
                believed=believed,
            )
            if undecided is not None:
                return undecided
        if min_age is not None and now_ms - ctime < min_age:
            # Undecided, not settled: retried, then dead-lettered if it stays young.
            return retry("too_young", "ledger younger than the reconciler age window")
        schema_age = _ms(self._policy.schema_min_age)
        if target.component is Component.SCHEMA and now_ms - ctime < schema_age:
            # putSchema creates, writes and closes the ledger, then writes the locator: a
            # CLOSED schema ledger its locator does not name yet may be that window.
            return retry("schema_too_young", "schema ledger younger than the schema age window")
        if target.component.by_property:
            # The compactor and the bucket tracker close the ledger, then write the property
            # that names it: a ledger last written (closed) within the window may be that.
            written = max(ctime, node.mtime_ms)
            if now_ms - written < _ms(self._policy.property_ledger_min_age):
                return retry(
                    "property_ledger_too_young",
                    "ledger written more recently than the property-ledger age window: its "
                    "cursor property may not name it yet",
                )
        # Only a CLOSED ledger's length is final; an open one's is unknown, never guessed.
        length = metadata.length if metadata.state is LedgerState.CLOSED else None
        evidence = BookKeeperEvidence(path=path, version=node.version, length_bytes=length)
        return delete(
            "ledger",
            f"delete {path} at version {node.version}",
            bookkeeper=evidence,
            believed=believed,
        )

    def _metadata_mismatch(
        self, target: Target, owner: Owner, metadata: LedgerSummary, believed: bool
    ) -> Verdict | None:
        if not has_pulsar_metadata(metadata) and target.component.by_property:
            # Nothing but the metadata can show whose compacted ledger or bucket this is: a
            # cursor property names no owner a signed intent could have read it from.
            return skip(
                SkipReason.MISMATCH,
                "no_owner_proof",
                "ledger has no Pulsar custom metadata: a property-owned ledger needs it",
            )
        if not has_pulsar_metadata(metadata):
            # Before Pulsar 2.2, or not Pulsar's at all (DistributedLog keeps such ledgers in
            # the same cluster): only a signed intent whose owner unlinked it proves it. The
            # believed set does not: it is best-effort and says nothing about ownership.
            if proves_unlink(target, owner):
                return None
            return skip(
                SkipReason.MISMATCH,
                "no_owner_proof",
                "ledger has no Pulsar custom metadata and no signed intent proves its owner",
            )
        differences = metadata_differences(target, metadata)
        if believed:
            # A belief vouches for a ledger whose metadata leaves a key out, never for one
            # whose metadata names another owner: a ledger id used again after the belief was
            # recorded carries its new owner's name (found by the simulation), just as objects
            # naming another ML are MISMATCH whatever the belief.
            differences = [d for d in differences if d.actual is not None]
        if differences:
            return skip(
                SkipReason.MISMATCH,
                "mismatch",
                "custom metadata names another owner",
                differences=tuple(differences),
            )
        return None

    def _min_age_ms(self, target: Target) -> int | None:
        if target.source is not Source.RECONCILER:
            return None
        return int(self._policy.reconciler_min_age.total_seconds() * 1000)

    async def _topic_exists(self, target: Target, owner: Owner) -> bool:
        """Whether something may still reference the ledger: the ML (data and cursor
        ledgers); for a schema ledger its locator, since an ML need not exist for it."""
        if target.component.cursor_owned and target.ml_path is not None:
            return (await self._owners.get(target.ml_path, decode_ml)).exists
        return owner.exists

    async def _in_shadow(self, target: Target, owner: Owner) -> Verdict | None:
        if self._shadows is None or target.component is not Component.MANAGED_LEDGER:
            return None
        if not self._shadows.ready:
            return retry("shadow_index_not_ready", "the shadow-topic index is still loading")
        # A shadow created after the last scan copies its source's list as it was then: the
        # view must come from a scan that started after the ledger left the source's list,
        # which is no later than the intent or the owner's last write, whichever is later.
        left = max(target.marked_at_ms, owner.mtime_ms)
        if not self._shadows.fresh_since(left + _ms(self._policy.shadow_margin)):
            return retry(
                "shadow_view_stale",
                "no shadow-topic scan has started since the ledger left its owner's list",
            )
        assert target.ml_name is not None
        for path in self._shadows.shadows_of(target.ml_name):
            shadow = await self._owners.get(path, decode_ml)
            if _in_use(target, shadow, fence=False) is not None:
                # Not SKIP: a shadow keeps a copy of its source's list and drops the ledger
                # later (ShadowManagedLedgerImpl), so "listed" here means "not yet".
                return retry("shadow_listed", f"shadow {path} still lists the ledger")
        return None


def _ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)


def _parse(pdli: _pb.PendingDeleteLedgerInfo) -> Target | Exception:
    """The validated target, or the error that `verify` turns into its verdict."""
    try:
        return parse_target(pdli)
    except Exception as e:
        return e


def _offload_frees(target: Target, owner: Owner) -> bool:
    """Whether a listed ledger's offload context leaves this copy unreferenced (a property
    reference has no offload context: it always holds the BookKeeper copy)."""
    ref = owner.refs.get(target.ledger_id)
    if target.tier is Tier.OFFLOAD:
        assert target.offload is not None
        # Objects of another (abandoned) upload are not referenced.
        return ref is None or ref.uuid != target.offload.uuid
    # Pulsar reads the offloaded copy: the BookKeeper copy is a leftover.
    return ref is not None and ref.complete and ref.bookkeeper_deleted


def _in_use(target: Target, owner: Owner, *, fence: bool = True) -> Verdict | None:
    """Step 2 against one owner; None when the owner does not reference this copy. A ledger
    a cursor property names is in use whatever kind the PDLI says it is."""
    if not owner.references(target.ledger_id):
        return None
    if target.ledger_id not in owner.property_refs and _offload_frees(target, owner):
        return None
    token = target.fence_token
    if fence and token is not None and owner.version < token:
        return retry(
            "marking_in_progress",
            f"{owner.path} lists the ledger at version {owner.version} < fence token {token}",
        )
    return skip(
        SkipReason.IN_USE,
        "listed",
        f"{owner.path} (version {owner.version}) references ledger {target.ledger_id}",
    )
