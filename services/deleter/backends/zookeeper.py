"""BookKeeper delete through the metadata store: the ledger znode at the verified version.

This is what BookKeeper's own ledger manager does (`removeLedgerMetadata` then removal of
empty parents), except that the delete is conditional: if the metadata changed since the
verifier read it, nothing is deleted and the PDLI is retried. Concurrent deletes are
coalesced into `delete_many` calls (ZooKeeper multi); each delete still counts once against
the rate limit and takes one place under the adaptive concurrency limit (so the limit bounds
the deletes queued at ZooKeeper, ahead of every other client's requests, and a multi is as
large as the places free; a delete the server did not answer cuts it), and each caller gets
its own outcome. A server that refuses multi gets one delete per request from then on. Empty
parents are swept a moment later for many ledgers at once: thousands of ledgers share one
parent, and trying it after every delete would double the load on ZooKeeper for nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import structlog

from services.core.adaptive import Signal
from services.core.errors import InvalidArgument
from services.deleter.backends.limits import BackendLimits
from services.deleter.batching import Batcher, BatcherClosed
from services.deleter.ports import DeleteFailed, DeleteResult, Tier
from services.metadata.errors import (
    MetadataError,
    NoNode,
    NotEmpty,
    StoreUnavailable,
    Unsupported,
    VersionConflict,
)
from services.metadata.migration import guarded_write_refusal
from services.metadata.paths import LedgerLocations, LedgerPaths
from services.metadata.store import ANY_VERSION, MetadataStore

_log = structlog.get_logger(__name__)

MAX_PENDING_PARENTS = 100_000
"""Parents waiting for a sweep; beyond that an empty parent may stay (harmless)."""
DEFAULT_DELETE_BATCH = 256


class ZooKeeperLedgerDeleter:
    """`BookKeeperDeleter` on a `MetadataStore` (the cluster's ZooKeeper)."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        paths: LedgerPaths | None = None,
        locations: Callable[[], LedgerLocations] | None = None,
        limits: BackendLimits,
        parent_sweep_delay: float = 1.0,
        batch_max: int = DEFAULT_DELETE_BATCH,
    ) -> None:
        """`locations` gives the root and the layout in force (`LayoutWatch.current`); a fixed
        `paths` stands for one layout."""
        self._store = store
        fixed = LedgerLocations(paths.root, paths.layout) if paths else LedgerLocations()
        self._locations: Callable[[], LedgerLocations] = locations or (lambda: fixed)
        self._limits = limits
        self._sweep_delay = parent_sweep_delay
        self._pending_parents: set[str] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._batcher: Batcher[tuple[str, int], MetadataError | None] = Batcher(
            self._delete_batch,
            max_batch=batch_max,
            limiter=limits.limiter,
            judge=_judge,
            weighted=True,
        )
        self._multi = True

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        self.check(ledger_id, path, version)
        await self._limits.pace()  # each delete counts once against the rate, batched or not
        try:
            outcome = await self._delete(path, version)
        except BatcherClosed as exc:
            raise DeleteFailed(Tier.BOOKKEEPER, f"{path}: not sent, deleter closing") from exc
        if outcome is None:
            self._schedule_parent_sweep(path)
            return _result(path, version, removed=True)
        if isinstance(outcome, NoNode):
            return _result(path, version, removed=False)
        if isinstance(outcome, VersionConflict):
            reason = f"metadata changed since verified: {outcome}"
            raise DeleteFailed(Tier.BOOKKEEPER, reason) from outcome
        # StoreUnavailable (ZooKeeper did not answer: an outage, the outcome is unknown) and
        # the rest (the delete failed).
        outage = isinstance(outcome, StoreUnavailable)
        raise DeleteFailed(Tier.BOOKKEEPER, str(outcome), outage=outage) from outcome

    async def probe(self) -> None:
        """One read of the ledgers root: returns once ZooKeeper answers (outage probe). A
        store that answers reads but pauses writes (a PIP-454 migration copying the data)
        is not back: the probe fails while it refuses writes, else every delete would meet
        the refusal again and the message be retried, then dead-lettered."""
        await self._store.exists(self._locations().root)
        refusal = guarded_write_refusal(self._store)
        if refusal is not None:
            raise refusal

    async def _delete(self, path: str, version: int) -> MetadataError | None:
        """None when deleted now, else why not: in a multi with concurrent deletes, or alone
        where the server refuses multi (a refused multi applied nothing)."""
        if self._multi:
            outcome = await self._batcher.submit((path, version))
            if not isinstance(outcome, Unsupported):
                return outcome
        async with self._limits.slot():
            try:
                await self._store.delete(path, version=version)
            except MetadataError as exc:
                return exc
        return None

    async def _delete_batch(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        """One multi per round with each path at most once. Two deletes of one path in a multi
        (the same PDLI delivered twice, or two PDLIs of one ledger, verified at once) would
        judge the second against the first one's removal: `NoNode`, which ZooKeeper then rolls
        back with the failed multi. That is no proof of absence, yet it reads as "already
        deleted" and the PDLI would be acknowledged with the ledger still there. So identical
        items share one outcome, and another version of a path waits for the next round."""
        outcomes: dict[tuple[str, int], MetadataError | None] = {}
        pending = list(dict.fromkeys(items))
        while pending:
            paths: set[str] = set()
            now: list[tuple[str, int]] = []
            later: list[tuple[str, int]] = []
            for item in pending:
                (later if item[0] in paths else now).append(item)
                paths.add(item[0])
            # One request per round, whatever its size: already paced, and the batcher holds
            # the places of every item in it.
            outcomes.update(zip(now, await self._store.delete_many(now), strict=True))
            pending = later
        if self._multi and any(isinstance(outcome, Unsupported) for outcome in outcomes.values()):
            self._multi = False
            _log.warning("zookeeper_multi_unsupported", fallback="one delete per request")
        return [outcomes[item] for item in items]

    def check(self, ledger_id: int, path: str, version: int) -> None:
        """`DeleteFailed` unless the evidence may be deleted; no I/O (a preview runs it too).
        The evidence must name this ledger at one of its paths under our root and the
        layouts in play (`LAYOUT`'s and Pulsar's hybrid one), at a real version."""
        try:
            named = self._locations().ledger_id(path)
        except InvalidArgument as exc:
            raise DeleteFailed(Tier.BOOKKEEPER, str(exc), permanent=True) from exc
        if named != ledger_id:
            raise DeleteFailed(
                Tier.BOOKKEEPER,
                f"evidence path {path} names ledger {named}, not {ledger_id}",
                permanent=True,
            )
        if version < 0:
            raise DeleteFailed(Tier.BOOKKEEPER, f"evidence version {version}", permanent=True)

    def _schedule_parent_sweep(self, path: str) -> None:
        if len(self._pending_parents) < MAX_PENDING_PARENTS:
            self._pending_parents.add(path)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_later(), name="parent-sweep")

    async def _sweep_later(self) -> None:
        await asyncio.sleep(self._sweep_delay)
        await self.sweep_parents()

    async def sweep_parents(self) -> None:
        """Remove the empty parents of deleted ledgers, deepest first, upwards: each
        directory once per sweep, however many of its ledgers were deleted (a delete of a
        parent that still has children costs the store as much as a ledger's delete)."""
        while self._pending_parents:
            chains: dict[str, tuple[str, ...]] = {}
            for path in self._pending_parents:
                chain = self._parents(path)
                if chain:  # the ledgers of one directory share its chain of parents
                    chains.setdefault(chain[0], chain)
            self._pending_parents.clear()
            for chain in sorted(chains.values(), key=lambda c: -c[0].count("/")):
                await self._remove_upwards(chain)

    def _parents(self, path: str) -> tuple[str, ...]:
        """The ledger's own directory levels only (its layout's depth): never the root, never
        a special znode or anything above the root."""
        try:
            return self._locations().parents(path)
        except InvalidArgument:
            return ()  # the layout changed since: leave the parents (harmless)

    async def _remove_upwards(self, parents: tuple[str, ...]) -> None:
        for parent in parents:
            try:
                async with self._limits.operation():
                    # Any version is safe: ZooKeeper never deletes a znode with children.
                    await self._store.delete(parent, version=ANY_VERSION)
            except (NotEmpty, NoNode, MetadataError):
                return

    async def aclose(self) -> None:
        """Stop batching, run the last sweep (bounded by the store's timeouts) and stop the
        sweeper."""
        await self._batcher.aclose()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self.sweep_parents()


def _judge(outcomes: Sequence[MetadataError | None]) -> Signal:
    """A multi whose outcome is unknown for some delete went unanswered."""
    if any(isinstance(outcome, StoreUnavailable) for outcome in outcomes):
        return Signal.UNANSWERED
    return Signal.ANSWERED


def _result(path: str, version: int, *, removed: bool) -> DeleteResult:
    return DeleteResult(Tier.BOOKKEEPER, removed, {"znode_path": path, "znode_version": version})
