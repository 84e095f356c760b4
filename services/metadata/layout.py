"""The ledgers root and its `LAYOUT`, as the verifier and the deleter see them.

Both services read `<root>/LAYOUT` at start and refuse to start when the root, `LAYOUT` or
`/managed-ledgers` is missing, or when the layout is one they do not support: under a wrong
root or chroot every ledger would look absent, and "absent" is acknowledged. While running,
`LayoutWatch` follows changes of `LAYOUT` so that the paths read are those of the layout in
force (formats reference §1.2; `LedgerLayout.serialize` writes `2\\n<factoryClass>:1`).
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from services.core.errors import InvalidArgument, StartupRefused
from services.metadata.errors import CorruptMetadata, NodeExists, NoNode, StoreUnavailable
from services.metadata.paths import (
    LedgerLayout,
    LedgerLocations,
    layout_text,
    normalize_root,
    parse_layout,
)
from services.metadata.pulsar_names import MANAGED_LEDGERS_ROOT
from services.metadata.store import MetadataStore, WatchEvent

_log = structlog.get_logger(__name__)
_RETRY_DELAY = 1.0


async def confirm_ledgers_root(
    store: MetadataStore, root: str, *, pulsar: MetadataStore | None = None
) -> LedgerLocations:
    """The ledger locations of `root` once the root, its `LAYOUT` and `/managed-ledgers` are
    confirmed to exist and the layout is supported; else `StartupRefused` saying which.

    `store` holds BookKeeper's metadata; `pulsar` is Pulsar's store, where `/managed-ledgers`
    is, when BookKeeper's metadata is in a store of its own (None: `store` is both)."""
    try:
        root = normalize_root(root)
    except InvalidArgument as e:
        raise StartupRefused(f"ledgers root: {e.problem}") from None
    if await store.exists(root) is None:
        raise StartupRefused(
            f"ledgers root {root} does not exist (check the ledgers root and the ZooKeeper chroot)"
        )
    locations = LedgerLocations(root)
    try:
        layout = parse_layout((await store.get(locations.layout_path)).data, path=root)
    except NoNode:
        raise StartupRefused(
            f"{locations.layout_path} does not exist: not a BookKeeper ledgers root"
        ) from None
    except CorruptMetadata as e:
        raise StartupRefused(f"{locations.layout_path}: {e.problem}") from None
    if await (pulsar or store).exists(MANAGED_LEDGERS_ROOT) is None:
        raise StartupRefused(
            f"{MANAGED_LEDGERS_ROOT} does not exist (check the ZooKeeper chroot or Pulsar's "
            "metadata store URL: not a Pulsar metadata store)"
        )
    return LedgerLocations(root, layout)


async def format_ledgers_root(
    store: MetadataStore,
    root: str = "/ledgers",
    layout: LedgerLayout = LedgerLayout.HIERARCHICAL,
) -> None:
    """What a new cluster's metadata holds before any topic: the ledgers root with `LAYOUT`
    (BookKeeper's `initNewCluster`) and `/managed-ledgers` (Pulsar's cluster metadata
    setup). For test clusters and benchmarks; existing znodes are left as they are."""
    locations = LedgerLocations(root, layout)
    for path, data in (
        (locations.layout_path, layout_text(layout)),
        (MANAGED_LEDGERS_ROOT, b""),
    ):
        if await store.exists(path) is None:
            with contextlib.suppress(NodeExists):  # created concurrently: fine
                await store.create(path, data, make_parents=True)


class LayoutWatch:
    """The current `LedgerLocations`, kept in step with `<root>/LAYOUT` by a watch.

    `current` keeps the last layout read while `LAYOUT` is missing or unreadable; callers that
    need proof of absence confirm `LAYOUT` in the same read as the ledger (the verifier does).
    `confirmed` is False while the last read of `LAYOUT` did not show a supported layout.
    """

    def __init__(self, store: MetadataStore, initial: LedgerLocations) -> None:
        self._store = store
        self.current = initial
        self.confirmed = True

    async def run(self) -> None:
        """Background loop: re-read `LAYOUT` whenever it changes; never returns."""
        path = self.current.layout_path
        while True:
            try:
                node, fired = await self._store.get_and_watch(path)
            except NoNode:
                await self._wait_for_creation(path)
                continue
            except StoreUnavailable as e:
                _log.info("layout_watch_unavailable", path=path, error=str(e))
                await asyncio.sleep(_RETRY_DELAY)
                continue
            self._adopt(node.data, path)
            if await fired is WatchEvent.CONNECTION_LOST:
                await asyncio.sleep(_RETRY_DELAY)

    def _adopt(self, data: bytes, path: str) -> None:
        try:
            layout = parse_layout(data, path=path)
        except CorruptMetadata as e:
            self.confirmed = False
            _log.error("layout_unsupported", path=path, error=e.problem)
            return
        self.confirmed = True
        if layout is not self.current.layout:
            old = self.current.layout.value
            _log.warning("layout_changed", path=path, old=old, new=layout.value)
            self.current = LedgerLocations(self.current.root, layout)

    async def _wait_for_creation(self, path: str) -> None:
        self.confirmed = False
        _log.error("layout_missing", path=path)
        try:
            stat, fired = await self._store.watch(path)
        except StoreUnavailable:
            await asyncio.sleep(_RETRY_DELAY)
            return
        if stat is None:
            await fired
