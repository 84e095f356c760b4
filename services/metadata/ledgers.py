"""BookKeeper ledger metadata in the store: read, create, conditional delete, iteration."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator

from services.core.errors import InvalidArgument
from services.metadata.errors import MetadataError, NoNode, NotEmpty, StoreUnavailable
from services.metadata.ledger_metadata import (
    CURRENT_FORMAT_VERSION,
    LedgerMetadata,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from services.metadata.paths import (
    LAYOUT_ZNODE,
    LedgerLayout,
    LedgerLocations,
    LedgerPaths,
    parse_layout,
)
from services.metadata.records import LedgerRecord
from services.metadata.store import ANY_VERSION, MetadataStore, Versioned, WatchEvent

log = logging.getLogger(__name__)

_DIR = re.compile(r"\d{4}")
_LEAF = re.compile(r"L\d{4}")
_FLAT_LEAF = re.compile(r"L\d+")
DEFAULT_LIST_CONCURRENCY = 32


class BookKeeperLedgers:
    """Ledger znodes of one ledgers root, in one layout (hybrid hierarchical by default)."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        paths: LedgerPaths | None = None,
        list_concurrency: int = DEFAULT_LIST_CONCURRENCY,
    ) -> None:
        self._store = store
        self.paths = paths or LedgerPaths()
        self._list_slots = asyncio.Semaphore(list_concurrency)

    def path(self, ledger_id: int) -> str:
        return self.paths.ledger_path(ledger_id)

    async def read(self, ledger_id: int) -> LedgerRecord:
        """The ledger's metadata and version; `NoNode` if absent, `CorruptMetadata` if bad."""
        path = self.path(ledger_id)
        return _record(path, ledger_id, await self._store.get(path))

    async def read_and_watch(
        self, ledger_id: int
    ) -> tuple[LedgerRecord, asyncio.Future[WatchEvent]]:
        """Like `read`, plus a future fired on change, delete or connection loss."""
        path = self.path(ledger_id)
        versioned, fired = await self._store.get_and_watch(path)
        try:
            return _record(path, ledger_id, versioned), fired
        except BaseException:
            fired.cancel()
            raise

    async def create(
        self,
        metadata: LedgerMetadata,
        *,
        format_version: int = CURRENT_FORMAT_VERSION,
        container_parents: bool = False,
    ) -> int:
        """Write a new ledger znode (parents as needed); returns its version (0)."""
        data = encode_ledger_metadata(metadata, format_version=format_version)
        stat = await self._store.create(
            self.path(metadata.ledger_id),
            data,
            make_parents=True,
            container_parents=container_parents,
        )
        return stat.version

    async def write(
        self,
        metadata: LedgerMetadata,
        *,
        version: int,
        format_version: int = CURRENT_FORMAT_VERSION,
    ) -> int:
        """Compare-and-set the ledger's metadata (e.g. to close it); returns the new version."""
        data = encode_ledger_metadata(metadata, format_version=format_version)
        return await self._store.set(self.path(metadata.ledger_id), data, version=version)

    async def delete(self, ledger_id: int, *, version: int) -> None:
        """Delete the ledger znode at `version`, then empty parents best-effort (as BK does).

        `VersionConflict` if the metadata changed, `NoNode` if already gone.
        """
        if version < 0:
            raise MetadataError(self.path(ledger_id), "a ledger delete must name a version")
        path = self.path(ledger_id)
        await self._store.delete(path, version=version)
        await self._remove_empty_parents(path)

    async def _remove_empty_parents(self, path: str) -> None:
        # Only the ledger's own directory levels, as deep as its layout: never the root.
        for parent in LedgerLocations(self.paths.root, self.paths.layout).parents(path):
            try:
                # Any version is safe here: ZooKeeper never deletes a znode with children.
                await self._store.delete(parent, version=ANY_VERSION)
            except (NotEmpty, NoNode):
                return
            except StoreUnavailable as e:
                log.info("empty parent %s left in place: %s", parent, e)
                return

    async def top_level_nodes(self) -> list[str]:
        """The root's children that hold ledgers, short (2-digit) trees first, then long."""
        try:
            children = await self._store.get_children(self.paths.root)
        except NoNode:
            return []
        if self.paths.layout is LedgerLayout.FLAT:
            return [""]
        parents = [name for name in children if self.paths.is_ledger_parent(name)]
        return sorted(parents, key=lambda name: (len(name), name))

    async def subtrees(self, *, level: int = 1) -> list[str]:
        """Relative prefixes `level` deep, short trees first: independent units of listing work.

        Level 1 gives the top-level nodes (`00`, `000`); level 2 their children (`00/0000`),
        and so on, never reaching the leaves. The flat layout has one unit, `""`.
        """
        tops = await self.top_level_nodes()
        if self.paths.layout is LedgerLayout.FLAT or level <= 1:
            return tops
        prefixes: list[str] = []
        for top in tops:
            prefixes.extend(await self._prefixes(top, level - 1, self.paths.depth(top)))
        return prefixes

    async def ledger_ids_under(self, subtree: str) -> list[int]:
        """Every ledger id below one subtree (a prefix from `subtrees`), sorted."""
        if self.paths.layout is LedgerLayout.FLAT:
            return await self._flat_ids()
        parts = subtree.split("/")
        depth = self.paths.depth(parts[0])
        valid = self.paths.is_ledger_parent(parts[0]) and len(parts) < depth
        if not valid or not all(_DIR.fullmatch(part) for part in parts[1:]):
            raise InvalidArgument("subtree", f"{subtree!r} is not a ledger subtree of this layout")
        ids: list[int] = []
        await self._walk(f"{self.paths.root}/{subtree}", depth - len(parts), ids)
        return sorted(ids)

    async def _prefixes(self, prefix: str, more: int, depth: int) -> list[str]:
        if more == 0 or prefix.count("/") + 2 >= depth:
            return [prefix]
        names = sorted(
            n for n in await self._children(f"{self.paths.root}/{prefix}") if _DIR.fullmatch(n)
        )
        nested = await asyncio.gather(
            *(self._prefixes(f"{prefix}/{n}", more - 1, depth) for n in names)
        )
        return [p for group in nested for p in group]

    async def read_layout(self) -> LedgerLayout:
        """The layout named by `<root>/LAYOUT`; `NoNode` if absent, `CorruptMetadata` if odd."""
        path = f"{self.paths.root}/{LAYOUT_ZNODE}"
        return parse_layout((await self._store.get(path)).data, path=path)

    async def iter_ledger_ids(self) -> AsyncIterator[int]:
        """Every ledger id of the root, skipping special znodes and foreign names."""
        for top_level in await self.top_level_nodes():
            for ledger_id in await self.ledger_ids_under(top_level):
                yield ledger_id

    async def _children(self, path: str) -> list[str]:
        async with self._list_slots:
            try:
                return await self._store.get_children(path)
            except NoNode:
                return []  # removed while we listed: nothing below it any more

    async def _walk(self, path: str, levels_left: int, out: list[int]) -> None:
        children = await self._children(path)
        if levels_left == 1:
            for name in children:
                if _LEAF.fullmatch(name):
                    with contextlib.suppress(InvalidArgument):  # beyond 2^63-1: not a ledger
                        out.append(self.paths.ledger_id(f"{path}/{name}"))
            return
        subdirs = [name for name in children if _DIR.fullmatch(name)]
        await asyncio.gather(*(self._walk(f"{path}/{n}", levels_left - 1, out) for n in subdirs))

    async def _flat_ids(self) -> list[int]:
        names = await self._children(self.paths.root)
        ids = []
        for name in names:
            if _FLAT_LEAF.fullmatch(name):
                with contextlib.suppress(ValueError):
                    ids.append(self.paths.ledger_id(f"{self.paths.root}/{name}"))
        return sorted(ids)


def _record(path: str, ledger_id: int, versioned: Versioned) -> LedgerRecord:
    metadata = decode_ledger_metadata(versioned.data, ledger_id=ledger_id, path=path)
    return LedgerRecord(
        path=path,
        metadata=metadata,
        version=versioned.version,
        ctime_ms=metadata.ctime if metadata.ctime is not None else versioned.ctime_ms,
        znode_ctime_ms=versioned.ctime_ms,
        mzxid=versioned.mzxid,
    )
