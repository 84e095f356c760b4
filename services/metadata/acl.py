"""ZooKeeper ACLs of the znodes Tombstone creates, as plain data.

A belief lets a deletion skip the metadata match, so whoever can write Tombstone's znodes
can make it delete. With digest authentication configured, every znode Tombstone creates
carries `digest:<user>:<hash>` with every permission, plus `world:anyone` read when
`TOMBSTONE_ZOOKEEPER_ACL_READ=world`. Without it they stay world-writable (ZooKeeper's open
ACL), as before. Pulsar's own znodes are never given an ACL by Tombstone: it only reads, sets
and deletes them, and neither changes an ACL.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import NamedTuple

from services.core.zk_security import READ_WORLD, ZooKeeperSecurity

READ = 1
WRITE = 2
CREATE = 4
DELETE = 8
ADMIN = 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN
CHANGES = WRITE | CREATE | DELETE | ADMIN
"""The permissions that let someone change a znode, its children or its ACL."""


@dataclass(frozen=True)
class AclEntry:
    """One ACL entry: `scheme:id` holds `perms` (a bit set of READ..ADMIN)."""

    scheme: str
    id: str
    perms: int

    def __str__(self) -> str:
        bits = zip((READ, WRITE, CREATE, DELETE, ADMIN), "rwcda", strict=True)
        letters = "".join(letter for bit, letter in bits if self.perms & bit)
        return f"{self.scheme}:{self.id}:{letters or '-'}"


class ZnodeAcl(NamedTuple):
    """A znode's ACL as read: its entries, its ACL version (for a conditional set) and how
    many children it has (a walk lists only parents)."""

    entries: list[AclEntry]
    version: int
    num_children: int


OPEN = (AclEntry("world", "anyone", ALL),)
"""ZooKeeper's `OPEN_ACL_UNSAFE`: what Tombstone creates without authentication."""


def digest_id(user: str, password: str) -> str:
    """The id ZooKeeper's DigestAuthenticationProvider gives `user:password`:
    `user:base64(sha1("user:password"))`."""
    digest = hashlib.sha1(f"{user}:{password}".encode()).digest()  # ZooKeeper's choice
    return f"{user}:{base64.b64encode(digest).decode()}"


def tombstone_acl(security: ZooKeeperSecurity) -> tuple[AclEntry, ...]:
    """The ACL of every znode Tombstone creates under `security`."""
    if security.digest_user is None:
        return OPEN
    own = AclEntry("digest", digest_id(security.digest_user, security.digest_password), ALL)
    if security.read == READ_WORLD:
        return (own, AclEntry("world", "anyone", READ))
    return (own,)


def foreign_changes(acl: list[AclEntry] | tuple[AclEntry, ...], own: str) -> list[AclEntry]:
    """The entries of `acl` that let someone other than the digest id `own` change the znode
    (super users are ZooKeeper's own and not listed in ACLs)."""
    return [
        entry
        for entry in acl
        if entry.perms & CHANGES and not (entry.scheme == "digest" and entry.id == own)
    ]
