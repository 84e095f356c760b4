"""Digest authentication and ACLs against a real ZooKeeper with a super user.

Pulsar's znodes are modelled as a secured Pulsar writes them: BookKeeper's `ZkUtils.getACLs`
and Pulsar's `ZKMetadataStore` create with `ZooDefs.Ids.CREATOR_ALL_ACL` when ZooKeeper
authentication is on, so the identity that created them (the brokers') holds every
permission and nobody else any.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.core.zk_security import READ_OWNER, ZooKeeperRefused, ZooKeeperSecurity
from services.metadata import NoNode, StoreUnavailable, ZkMetadataStore
from services.metadata.acl import ALL, READ, AclEntry, digest_id
from services.metadata.errors import AuthenticationFailed, NotAuthorized
from services.metadata.zookeeper.secure import TOMBSTONE_ROOT, refuse_unsecured, secure, unsecured
from tests.helpers import assert_eventually

SUPER = "super-secret"
TOMBSTONE = ZooKeeperSecurity(digest_user="tombstone", digest_password="t-pass")
PULSAR = ZooKeeperSecurity(digest_user="pulsar", digest_password="p-pass")
INTRUDER = ZooKeeperSecurity(digest_user="mallory", digest_password="m-pass")


@pytest.fixture(scope="module")
def secured_zk() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(super_password=SUPER) as server:
        yield server


def _connect(
    server: ZooKeeperServer, security: ZooKeeperSecurity | None
) -> contextlib.AbstractAsyncContextManager[ZkMetadataStore]:
    return ZkMetadataStore.connect(
        server.address, session_timeout=5.0, request_timeout=5.0, security=security
    )


async def _wipe(store: ZkMetadataStore, path: str) -> None:
    for child in await store.get_children(path):
        if path == "/" and child == "zookeeper":
            continue
        child_path = f"{path.rstrip('/')}/{child}"
        await _wipe(store, child_path)
        with contextlib.suppress(NoNode):
            await store.delete(child_path, version=-1)


@pytest.fixture
async def server(secured_zk: ZooKeeperServer) -> ZooKeeperServer:
    """The module's secured ZooKeeper, running, with an empty tree (wiped as super)."""
    if not secured_zk.running:
        secured_zk.start()
    async with _connect(secured_zk, ZooKeeperSecurity("super", SUPER)) as admin:
        await _wipe(admin, "/")
    return secured_zk


@pytest.fixture
async def tombstone(server: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with _connect(server, TOMBSTONE) as store:
        yield store


def _own(security: ZooKeeperSecurity) -> AclEntry:
    assert security.digest_user is not None
    return AclEntry("digest", digest_id(security.digest_user, security.digest_password), ALL)


async def test_created_znodes_and_their_parents_carry_the_acl(
    tombstone: ZkMetadataStore,
) -> None:
    """Every znode Tombstone creates, parents made on the way included, is writable only by
    its digest user and readable by anyone (the default)."""
    await tombstone.create("/tombstone/follower/leader", b"m1", make_parents=True, ephemeral=True)
    await tombstone.create_sequential("/tombstone/believed/b-", b"x", make_parents=True)
    expected = [_own(TOMBSTONE), AclEntry("world", "anyone", READ)]
    for path in ("/tombstone", "/tombstone/follower", "/tombstone/follower/leader"):
        assert (await tombstone.get_acl(path))[0] == expected
    (batch,) = await tombstone.get_children("/tombstone/believed")
    assert (await tombstone.get_acl(f"/tombstone/believed/{batch}"))[0] == expected


async def test_owner_read_setting_hides_the_data_from_others(server: ZooKeeperServer) -> None:
    """With `owner` reads, the ACL holds Tombstone's identity alone: others cannot read."""
    owner_only = ZooKeeperSecurity("tombstone", "t-pass", read=READ_OWNER)
    async with _connect(server, owner_only) as store:
        await store.create("/tombstone/believed", b"", make_parents=True)
        assert (await store.get_acl("/tombstone/believed"))[0] == [_own(owner_only)]
    async with _connect(server, None) as anonymous:
        with pytest.raises(NotAuthorized):
            await anonymous.get("/tombstone/believed")


async def test_other_identities_cannot_write_tombstone_znodes(
    server: ZooKeeperServer, tombstone: ZkMetadataStore
) -> None:
    """Another digest user and an unauthenticated session get NoAuth on set, create below
    and delete below; they can still read (world-readable)."""
    await tombstone.create("/tombstone/believed/b-1", b"belief", make_parents=True)
    for security in (INTRUDER, None):
        async with _connect(server, security) as other:
            assert (await other.get("/tombstone/believed/b-1")).data == b"belief"
            with pytest.raises(NotAuthorized):
                await other.set("/tombstone/believed/b-1", b"forged", version=-1)
            with pytest.raises(NotAuthorized):
                await other.create("/tombstone/believed/b-2", b"forged")
            with pytest.raises(NotAuthorized):
                await other.delete("/tombstone/believed/b-1", version=-1)
    assert (await tombstone.get("/tombstone/believed/b-1")).data == b"belief"


async def test_pulsar_znodes_are_used_with_their_acl_unchanged(server: ZooKeeperServer) -> None:
    """Znodes a secured Pulsar created (creator-only ACL) are read, CASed and deleted by
    Tombstone under the brokers' identity, and their ACL is left as it was."""
    async with _connect(server, None) as setup:
        await setup.create("/managed-ledgers", b"")
    async with _connect(server, PULSAR) as broker:
        # Pulsar's creator-only ACL, as CREATOR_ALL_ACL resolves for a digest session.
        await broker.set_acl("/managed-ledgers", [_own(PULSAR)], version=0)
        await broker.create("/managed-ledgers/ml", b"owner-v0")
        await broker.set_acl("/managed-ledgers/ml", [_own(PULSAR)], version=0)
    same_identity = ZooKeeperSecurity("pulsar", "p-pass")
    async with _connect(server, same_identity) as tomb:
        assert (await tomb.get("/managed-ledgers/ml")).data == b"owner-v0"
        await tomb.set("/managed-ledgers/ml", b"owner-v1", version=0)
        assert (await tomb.get_acl("/managed-ledgers/ml"))[0] == [_own(PULSAR)]
        await tomb.delete("/managed-ledgers/ml", version=1)
    async with _connect(server, TOMBSTONE) as stranger:
        with pytest.raises(NotAuthorized):
            await stranger.get_children("/managed-ledgers")


async def test_wrong_password_is_refused_at_the_start_up_check(
    server: ZooKeeperServer, tombstone: ZkMetadataStore
) -> None:
    """ZooKeeper accepts any digest (it only names an identity); a wrong password is a
    different identity, which the start-up check names with the setting to fix."""
    await tombstone.create("/tombstone/settings", b"", make_parents=True)
    wrong = ZooKeeperSecurity("tombstone", "not-the-password")
    async with _connect(server, wrong) as store:
        with pytest.raises(ZooKeeperRefused, match="TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER"):
            await refuse_unsecured(store, wrong)
        with pytest.raises(NotAuthorized):
            await store.create("/tombstone/settings/x", b"")


async def test_refused_authentication_ends_the_connect(server: ZooKeeperServer) -> None:
    """AUTH_FAILED (here: a scheme the server has no provider for) ends the connect at once
    with `AuthenticationFailed`, not a retry loop nor a timeout."""
    from services.metadata.zookeeper import _security as _zk_security

    original = _zk_security.DigestAuth.__init__

    def unknown_scheme(self: _zk_security.DigestAuth, session: object, scheme: str, cred: bytes):
        original(self, session, "no-such-scheme", cred)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_zk_security.DigestAuth, "__init__", unknown_scheme)
        with pytest.raises(AuthenticationFailed, match="AUTH_FAILED"):
            async with _connect(server, TOMBSTONE):
                pass


async def test_authentication_survives_a_server_restart(
    server: ZooKeeperServer, tombstone: ZkMetadataStore
) -> None:
    """After the server restarts, the session's new connection is authenticated again:
    Tombstone still writes its own znodes."""
    await tombstone.create("/tombstone/follower", b"v0", make_parents=True)
    server.stop()
    server.start()
    await tombstone.wait_connected()

    async def written() -> None:
        try:
            await tombstone.set("/tombstone/follower", b"v1", version=0)
        except StoreUnavailable as e:  # still reconnecting; NotAuthorized fails the test
            raise AssertionError(str(e)) from e

    await assert_eventually(written, timeout=30)
    assert (await tombstone.get("/tombstone/follower")).data == b"v1"


async def test_world_writable_znodes_are_refused_until_secured(server: ZooKeeperServer) -> None:
    """Znodes left by a deployment without authentication make the start-up check refuse,
    naming the fix; the fix command's function secures them all and is idempotent."""
    async with _connect(server, None) as old:
        await old.create("/tombstone/believed/b-1", b"x", make_parents=True)
        await old.create("/tombstone/settings", b"", make_parents=True)
    async with _connect(server, TOMBSTONE) as store:
        with pytest.raises(ZooKeeperRefused, match="tombstone zookeeper secure") as refused:
            await refuse_unsecured(store, TOMBSTONE)
        assert "\n" not in str(refused.value)
        changed = await secure(store, TOMBSTONE, [TOMBSTONE_ROOT])
        assert sorted(changed) == [
            "/tombstone",
            "/tombstone/believed",
            "/tombstone/believed/b-1",
            "/tombstone/settings",
        ]
        assert await unsecured(store, TOMBSTONE, [TOMBSTONE_ROOT]) == []
        await refuse_unsecured(store, TOMBSTONE)
        assert await secure(store, TOMBSTONE, [TOMBSTONE_ROOT]) == []
    async with _connect(server, None) as anonymous:
        with pytest.raises(NotAuthorized):
            await anonymous.set("/tombstone/believed/b-1", b"forged", version=-1)


async def test_sasl_is_refused_before_connecting(server: ZooKeeperServer) -> None:
    """A configuration asking for SASL is refused, naming the setting; no session opens."""
    with pytest.raises(ZooKeeperRefused, match="TOMBSTONE_ZOOKEEPER_SASL"):
        async with _connect(server, ZooKeeperSecurity(sasl=True)):
            pass


async def _secure_cli(server: ZooKeeperServer, *args: str) -> tuple[int, str]:
    env = {
        **os.environ,
        "TOMBSTONE_ZOOKEEPER_SERVERS": server.address,
        "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER": "tombstone",
        "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD": "t-pass",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.cli",
        "zookeeper",
        "secure",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    return await process.wait(), out.decode()


async def test_secure_command_fixes_world_writable_znodes(server: ZooKeeperServer) -> None:
    """`tombstone zookeeper secure --check` lists the open znodes (exit 1); `secure` fixes
    them (exit 0), after which the check passes."""
    async with _connect(server, None) as old:
        await old.create("/tombstone/settings", b"", make_parents=True)
    code, out = await _secure_cli(server, "--check")
    assert (code, "unsecured /tombstone/settings: world:anyone:rwcda" in out) == (1, True)
    code, out = await _secure_cli(server)
    assert (code, "secured /tombstone/settings" in out) == (0, True)
    assert (await _secure_cli(server, "--check"))[0] == 0
