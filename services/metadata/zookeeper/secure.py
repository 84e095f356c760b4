"""Tombstone's znodes under digest authentication: the start-up check and its fix.

Znodes created before authentication was configured carry ZooKeeper's open ACL, and anyone
could then write a belief. With `TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER` set, every service
walks Tombstone's subtrees at start-up and refuses (exit 2) while any znode there lets
another identity change it; `tombstone zookeeper secure` sets the configured ACL on every one
of them (idempotent: znodes that already carry it are left alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import structlog

from services.core.zk_security import DIGEST_USER, ZooKeeperRefused, ZooKeeperSecurity
from services.metadata.acl import AclEntry, ZnodeAcl, digest_id, foreign_changes, tombstone_acl
from services.metadata.errors import NoNode, VersionConflict
from services.metadata.migration.guard import MigrationGuardedStore
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore

_log = structlog.get_logger(__name__)

TOMBSTONE_ROOT = "/tombstone"
"""Where Tombstone's znodes live (peer settings, follower, believed set by default)."""
FIX_COMMAND = "tombstone zookeeper secure"


def roots_of(*paths: str) -> tuple[str, ...]:
    """`TOMBSTONE_ROOT` and the configured paths that are not below it (a believed set
    moved elsewhere), without duplicates."""
    roots = [TOMBSTONE_ROOT]
    for path in paths:
        if not any(path == r or path.startswith(r + "/") for r in roots):
            roots.append(path)
    return tuple(roots)


WALK_CHUNK = 256
"""Znodes read at once during a walk (the believed set can hold thousands of batches)."""


async def _read(store: ZkMetadataStore, path: str) -> tuple[str, ZnodeAcl | None]:
    try:
        return path, await store.get_acl(path)
    except NoNode:  # deleted meanwhile
        return path, None


async def _children(store: ZkMetadataStore, path: str) -> list[str]:
    try:
        names = await store.get_children(path)
    except NoNode:
        return []
    return [f"{path.rstrip('/')}/{name}" for name in sorted(names)]


async def walk(store: ZkMetadataStore, roots: Iterable[str]) -> AsyncIterator[tuple[str, ZnodeAcl]]:
    """Every existing znode at or below `roots` with its ACL, level by level (parents
    first), each level read in parallel chunks; only znodes with children are listed."""
    level = list(roots)
    while level:
        parents = []
        for i in range(0, len(level), WALK_CHUNK):
            chunk = level[i : i + WALK_CHUNK]
            for path, acl in await asyncio.gather(*(_read(store, p) for p in chunk)):
                if acl is None:
                    continue
                yield path, acl
                if acl.num_children:
                    parents.append(path)
        listed = await asyncio.gather(*(_children(store, p) for p in parents))
        level = [child for children in listed for child in children]


async def unsecured(
    store: ZkMetadataStore, security: ZooKeeperSecurity, roots: Iterable[str]
) -> list[tuple[str, list[AclEntry]]]:
    """Tombstone's znodes that another identity may change, with the entries that allow it
    (none when no digest user is configured: the open ACL is then expected)."""
    if security.digest_user is None:
        return []
    own = digest_id(security.digest_user, security.digest_password)
    found = []
    async for path, acl in walk(store, roots):
        foreign = foreign_changes(acl.entries, own)
        if foreign:
            found.append((path, foreign))
    return found


async def refuse_unsecured(
    store: ZkMetadataStore, security: ZooKeeperSecurity, roots: Iterable[str] = (TOMBSTONE_ROOT,)
) -> None:
    """`ZooKeeperRefused` (one line, naming the fix) when a znode of Tombstone's may be
    changed by another identity while digest authentication is configured."""
    found = await unsecured(store, security, roots)
    if not found:
        return
    path, entries = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    shown = ", ".join(str(entry) for entry in entries)
    raise ZooKeeperRefused(
        f"{path}{more} may be changed by {shown}, not only by {DIGEST_USER.name}="
        f"{security.digest_user}: run `{FIX_COMMAND}` with the same settings"
    )


async def refuse_unsecured_if_zookeeper(
    store: MetadataStore,
    security: ZooKeeperSecurity,
    roots: Iterable[str] = (TOMBSTONE_ROOT,),
) -> None:
    """`refuse_unsecured` on a ZooKeeper store. ACLs are ZooKeeper's: on another store there is
    nothing of this kind to check (Tombstone does not configure that store's own
    authentication yet), which is logged once so the skip is never silent."""
    if isinstance(store, MigrationGuardedStore):
        store = store.inner
    if isinstance(store, ZkMetadataStore):
        await refuse_unsecured(store, security, roots)
        return
    _log.warning(
        "acl_check_skipped",
        store=type(store).__name__,
        reason="ZooKeeper ACLs do not apply to this metadata store; its own authentication "
        "is not configured by Tombstone",
    )


async def secure(
    store: ZkMetadataStore, security: ZooKeeperSecurity, roots: Iterable[str]
) -> list[str]:
    """Give every znode under `roots` the configured ACL; the paths changed. A znode whose
    ACL changed meanwhile is read and set again."""
    wanted = sorted(tombstone_acl(security), key=str)
    changed = []
    async for path, acl in walk(store, roots):
        current = acl
        for _attempt in range(3):
            if sorted(current.entries, key=str) == wanted:
                break
            try:
                await store.set_acl(path, wanted, version=current.version)
            except VersionConflict:  # changed meanwhile: read it again
                _path, reread = await _read(store, path)
                if reread is None:
                    break
                current = reread
                continue
            except NoNode:
                break
            changed.append(path)
            break
    return changed
