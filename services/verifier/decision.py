"""The verifier's decision (DESIGN §4), step by step. No gRPC here: PDLI in, `Verdict` out.

1. INVALID if the PDLI is malformed (`validation.parse_target`).
2. In use? The owner (ML list, cursor znode or schema locator) still references the ledger:
   RETRY while the owner's version is below the fence token, else SKIP IN_USE.
3. Believed? The marker reported this exact identity as unlinked: skip the metadata match.
4. Match? BookKeeper custom metadata, or the offloaded objects' identity (`offload.py`).
5. Any error on the way: RETRY, never DELETE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

import structlog

from services.core.errors import CorruptData, InvalidArgument, TombstoneError, Unavailable
from services.core.tasks import is_cancelled
from services.metadata.ledger_metadata import (
    LedgerMetadata,
    LedgerState,
    decode_ledger_metadata,
)
from services.metadata.paths import LedgerPaths
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
from services.verifier.owners import DECODERS, Owner, OwnerCache, decode_ml
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


@dataclass(frozen=True)
class DecisionPolicy:
    ledger_paths: LedgerPaths = field(default_factory=LedgerPaths)
    allow_without_pulsar_metadata: bool = False
    """Opt-in: approve BookKeeper ledgers that carry no Pulsar custom metadata at all."""
    reconciler_min_age: timedelta = timedelta(days=3)
    """RECONCILER PDLIs: the ledger (or object) must be at least this old at verification."""


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
        paths = list(
            dict.fromkeys(
                self._policy.ledger_paths.ledger_path(target.ledger_id)
                for target in parsed
                if isinstance(target, Target) and target.tier is Tier.BOOKKEEPER
            )
        )
        ledgers = dict(zip(paths, await self._read_many(paths), strict=True))
        pairs = zip(pdlis, parsed, strict=True)
        return list(await asyncio.gather(*(self._verify(p, t, ledgers) for p, t in pairs)))

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
        ledgers: Mapping[str, Znode | Exception | None] | None,
    ) -> Verdict:
        target: Target | None = None
        try:
            if isinstance(parsed, Exception):
                raise parsed
            target = parsed
            verdict = await self._decide(target, ledgers)
        except Forged as e:
            verdict = e.verdict
        except InvalidArgument as e:
            verdict = skip(SkipReason.INVALID, "invalid", str(e))
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

    async def _decide(
        self, target: Target, ledgers: Mapping[str, Znode | Exception | None] | None
    ) -> Verdict:
        ledger: tuple[str, Znode | None] | None = None
        if target.tier is Tier.BOOKKEEPER:
            # Read the ledger first: the owner looked up next is then at least this new.
            path = self._policy.ledger_paths.ledger_path(target.ledger_id)
            ledger = (path, await self._read_ledger(path, ledgers))
        owner = await self._owners.get(target.owner_path, DECODERS[target.component])
        in_use = _in_use(target, owner) or await self._in_shadow(target)
        if in_use is not None:
            return in_use
        believed = target.source is not Source.RECONCILER and target.believed_key in self._believed
        verdict = await self._match(target, owner, ledger, believed)
        if verdict.skip_reason is SkipReason.MISMATCH and not believed:
            verdict = await self._recheck_believed(target, owner, ledger, verdict)
        return verdict

    async def _read_ledger(
        self, path: str, ledgers: Mapping[str, Znode | Exception | None] | None
    ) -> Znode | None:
        """The prefetched read of `path` (raising its error, as `read` would), else a read."""
        if ledgers is None or path not in ledgers:
            return await self._store.read(path)
        got = ledgers[path]
        if isinstance(got, Exception):
            raise got
        return got

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
        self, target: Target, owner: Owner, ledger: tuple[str, Znode | None] | None, believed: bool
    ) -> Verdict:
        now_ms = int(self._clock() * 1000)
        min_age = self._min_age_ms(target)
        if ledger is None:
            return await self._offload.judge(
                target, owner=owner, believed=believed, min_age_ms=min_age, now_ms=now_ms
            )
        path, node = ledger
        if node is None:
            return skip(SkipReason.NOT_FOUND, "ledger_absent", f"{path} does not exist")
        metadata = decode_ledger_metadata(node.data, ledger_id=target.ledger_id, path=path)
        if metadata.state is not LedgerState.CLOSED and await self._topic_exists(target, owner):
            state = metadata.state.name
            return skip(SkipReason.IN_USE, "open_ledger", f"ledger is {state} and its topic exists")
        if not believed:
            mismatch = self._metadata_mismatch(target, metadata)
            if mismatch is not None:
                return mismatch
        ctime = metadata.ctime if metadata.ctime is not None else node.ctime_ms
        if min_age is not None and now_ms - ctime < min_age:
            return skip(
                SkipReason.IN_USE, "too_young", "ledger younger than the reconciler age window"
            )
        evidence = BookKeeperEvidence(path=path, version=node.version)
        return delete(
            "ledger",
            f"delete {path} at version {node.version}",
            bookkeeper=evidence,
            believed=believed,
        )

    def _metadata_mismatch(self, target: Target, metadata: LedgerMetadata) -> Verdict | None:
        if not has_pulsar_metadata(metadata):
            if self._policy.allow_without_pulsar_metadata:
                return None
            return skip(
                SkipReason.MISMATCH,
                "no_pulsar_metadata",
                "ledger has no Pulsar custom metadata (deletion not opted in)",
            )
        differences = metadata_differences(target, metadata)
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
        if target.component is Component.CURSOR and target.ml_path is not None:
            return (await self._owners.get(target.ml_path, decode_ml)).exists
        return owner.exists

    async def _in_shadow(self, target: Target) -> Verdict | None:
        if self._shadows is None or target.component is not Component.MANAGED_LEDGER:
            return None
        if not self._shadows.ready:
            return retry("shadow_index_not_ready", "the shadow-topic index is still loading")
        assert target.ml_name is not None
        for path in self._shadows.shadows_of(target.ml_name):
            shadow = await self._owners.get(path, decode_ml)
            verdict = _in_use(target, shadow, fence=False)
            if verdict is not None:
                return verdict
        return None


def _parse(pdli: _pb.PendingDeleteLedgerInfo) -> Target | Exception:
    """The validated target, or the error that `verify` turns into its verdict."""
    try:
        return parse_target(pdli)
    except Exception as e:
        return e


def _in_use(target: Target, owner: Owner, *, fence: bool = True) -> Verdict | None:
    """Step 2 against one owner; None when the owner does not reference this copy."""
    if not owner.exists or target.ledger_id not in owner.refs:
        return None
    ref = owner.refs[target.ledger_id]
    if target.tier is Tier.OFFLOAD:
        assert target.offload is not None
        if ref is None or ref.uuid != target.offload.uuid:
            return None  # objects of another (abandoned) upload are not referenced
    elif ref is not None and ref.complete and ref.bookkeeper_deleted:
        return None  # Pulsar reads the offloaded copy; the BookKeeper copy is a leftover
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
