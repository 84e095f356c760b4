"""BookKeeper delete through the metadata store: the ledger znode at the verified version.

This is what BookKeeper's own ledger manager does (`removeLedgerMetadata` then removal of
empty parents), except that the delete is conditional: if the metadata changed since the
verifier read it, nothing is deleted and the PDLI is retried.
"""

from __future__ import annotations

from services.core.errors import InvalidArgument
from services.deleter.backends.limits import BackendLimits
from services.deleter.ports import DeleteFailed, DeleteResult, Tier
from services.metadata.errors import MetadataError, NoNode, NotEmpty, VersionConflict
from services.metadata.paths import LedgerPaths
from services.metadata.store import ANY_VERSION, MetadataStore


class ZooKeeperLedgerDeleter:
    """`BookKeeperDeleter` on a `MetadataStore` (the cluster's ZooKeeper)."""

    def __init__(self, store: MetadataStore, *, paths: LedgerPaths, limits: BackendLimits):
        self._store = store
        self._paths = paths
        self._limits = limits

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        self._check(ledger_id, path, version)
        try:
            async with self._limits.operation():
                await self._store.delete(path, version=version)
        except NoNode:
            return _result(path, version, removed=False)
        except VersionConflict as exc:
            raise DeleteFailed(Tier.BOOKKEEPER, f"metadata changed since verified: {exc}") from exc
        except MetadataError as exc:  # StoreUnavailable and the rest: the outcome is unknown
            raise DeleteFailed(Tier.BOOKKEEPER, str(exc)) from exc
        await self._remove_empty_parents(path)
        return _result(path, version, removed=True)

    def _check(self, ledger_id: int, path: str, version: int) -> None:
        """The evidence must name this ledger under our root, at a real version."""
        try:
            named = self._paths.ledger_id(path)
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

    async def _remove_empty_parents(self, path: str) -> None:
        """Best effort, as BookKeeper does; any failure just leaves an empty parent behind."""
        parent = path.rsplit("/", 1)[0]
        while parent.startswith(self._paths.root + "/"):
            try:
                async with self._limits.operation():
                    # Any version is safe: ZooKeeper never deletes a znode with children.
                    await self._store.delete(parent, version=ANY_VERSION)
            except (NotEmpty, NoNode, MetadataError):
                return
            parent = parent.rsplit("/", 1)[0]


def _result(path: str, version: int, *, removed: bool) -> DeleteResult:
    return DeleteResult(Tier.BOOKKEEPER, removed, {"znode_path": path, "znode_version": version})
