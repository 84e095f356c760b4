"""Tombstone's znodes under digest authentication: the start-up check and its fix.

Znodes created before authentication was configured carry ZooKeeper's open ACL, and anyone
could then write a belief. With `TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER` set, every service
walks Tombstone's subtrees at start-up and refuses (exit 2) while any znode there lets
another identity change it; `tombstone zookeeper secure` sets the configured ACL on every one
of them (idempotent: znodes that already carry it are left alone).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from services.core.zk_security import DIGEST_USER, ZooKeeperRefused, ZooKeeperSecurity
from services.metadata.acl import AclEntry, digest_id, foreign_changes, tombstone_acl
from services.metadata.errors import NoNode, VersionConflict
from services.metadata.zk_store import ZkMetadataStore

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


async def walk(store: ZkMetadataStore, roots: Iterable[str]) -> AsyncIterator[str]:
    """Every existing znode at or below `roots`, parents first."""
    pending = list(roots)
    while pending:
        path = pending.pop()
        try:
            children = await store.get_children(path)
        except NoNode:
            continue
        yield path
        pending.extend(f"{path.rstrip('/')}/{child}" for child in sorted(children, reverse=True))


async def unsecured(
    store: ZkMetadataStore, security: ZooKeeperSecurity, roots: Iterable[str]
) -> list[tuple[str, list[AclEntry]]]:
    """Tombstone's znodes that another identity may change, with the entries that allow it
    (none when no digest user is configured: the open ACL is then expected)."""
    if security.digest_user is None:
        return []
    own = digest_id(security.digest_user, security.digest_password)
    found = []
    async for path in walk(store, roots):
        try:
            acl, _version = await store.get_acl(path)
        except NoNode:
            continue
        foreign = foreign_changes(acl, own)
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


async def secure(
    store: ZkMetadataStore, security: ZooKeeperSecurity, roots: Iterable[str]
) -> list[str]:
    """Give every znode under `roots` the configured ACL; the paths changed. A znode whose
    ACL changed meanwhile is read and set again."""
    wanted = tombstone_acl(security)
    changed = []
    async for path in walk(store, roots):
        for _attempt in range(3):
            try:
                acl, version = await store.get_acl(path)
                if sorted(acl, key=str) == sorted(wanted, key=str):
                    break
                await store.set_acl(path, wanted, version=version)
                changed.append(path)
                break
            except VersionConflict:
                continue
            except NoNode:
                break
    return changed
