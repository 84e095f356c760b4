"""`tombstone zookeeper secure [--check]`: give Tombstone's znodes the ACL its settings ask for.

Exit codes: 0 every znode carries it (now); 1 `--check` found znodes another identity may
change; 2 the settings cannot be honoured or ZooKeeper refused (authentication, permission);
3 ZooKeeper cannot be reached.
"""

from __future__ import annotations

import asyncio
import sys
from typing import NoReturn

import click

from services.core.config import ZooKeeperConfig
from services.core.errors import ConfigError, Unavailable
from services.core.metadata_stores import METADATA_STORE_URL
from services.core.shared_clusters import ZOOKEEPER
from services.core.zk_security import DIGEST_USER, ZooKeeperRefused
from services.metadata.connect import connect_store, zookeeper_session
from services.metadata.zookeeper.secure import TOMBSTONE_ROOT, roots_of, secure, unsecured

EXIT_UNSECURED = 1
EXIT_REFUSED = 2
EXIT_UNAVAILABLE = 3


@click.group("zookeeper")
def zookeeper() -> None:
    """Tombstone's znodes in ZooKeeper."""


@zookeeper.command("secure")
@click.option("--check", is_flag=True, help="Only list the znodes others may change; exit 1.")
@click.option(
    "--root",
    "roots",
    multiple=True,
    metavar="PATH",
    help=f"Another subtree of Tombstone's besides {TOMBSTONE_ROOT} (a "
    "TOMBSTONE_VERIFIER_BELIEVED_PATH outside it). Repeatable.",
)
def secure_command(check: bool, roots: tuple[str, ...]) -> None:
    """Set the ACL of every znode under /tombstone to the one Tombstone creates with
    (TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER with every permission, plus world read when
    TOMBSTONE_ZOOKEEPER_ACL_READ=world). Idempotent. Run it with the services' ZooKeeper
    settings after turning digest authentication on, before the services start. The
    znodes are in Pulsar's metadata store (TOMBSTONE_METADATA_STORE_URL), which must then
    be ZooKeeper."""
    try:
        zk = ZooKeeperConfig.from_env()
    except ConfigError as e:
        _fail(EXIT_REFUSED, str(e))
    if zk.security.digest_user is None:
        _fail(EXIT_REFUSED, f"{DIGEST_USER.name} is not set: there is no identity to secure for")
    if zk.stores.pulsar.kind != ZOOKEEPER:
        # Tombstone's znodes live in Pulsar's metadata store; ACLs are ZooKeeper's.
        _fail(
            EXIT_REFUSED,
            f"{METADATA_STORE_URL.name} names {zk.stores.pulsar}: ZooKeeper ACLs do not apply "
            "to it, and Tombstone does not configure its own authentication",
        )
    try:
        lines, code = asyncio.run(_run(zk, roots_of(*roots), check=check))
    except ZooKeeperRefused as e:
        _fail(EXIT_REFUSED, str(e))
    except Unavailable as e:
        _fail(EXIT_UNAVAILABLE, f"ZooKeeper unavailable: {e}")
    for line in lines:
        click.echo(line)
    sys.exit(code)


async def _run(
    zk: ZooKeeperConfig, roots: tuple[str, ...], *, check: bool
) -> tuple[list[str], int]:
    async with connect_store(zk, zk.stores.pulsar) as session:
        # Checked above: Pulsar's store is ZooKeeper, so the session is ZooKeeper's.
        store = zookeeper_session(session)
        assert store is not None
        if check:
            found = await unsecured(store, zk.security, roots)
            lines = [f"unsecured {path}: {', '.join(map(str, acl))}" for path, acl in found]
            return lines or ["ok: every znode is secured"], EXIT_UNSECURED if found else 0
        changed = await secure(store, zk.security, roots)
        acl = ", ".join(map(str, store.create_acl))
        return [f"secured {path}" for path in changed] + [f"ok: {acl}"], 0


def _fail(code: int, line: str) -> NoReturn:
    sys.stderr.write(f"tombstone zookeeper secure: {line}\n")
    sys.exit(code)
