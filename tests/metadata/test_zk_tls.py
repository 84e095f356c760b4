"""TLS to ZooKeeper's secure client port (Netty, client certificates required), real server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.zk_tls import make_tls_files
from devstack.zookeeper import ZooKeeperServer
from services.core.zk_security import ZooKeeperSecurity, ZooKeeperTls
from services.metadata import StoreUnavailable, ZkMetadataStore

# The first TLS handshakes of a fresh JVM take seconds on a loaded machine.
CONNECT_TIMEOUT = 30.0
REFUSAL_TIMEOUT = 8.0
"""A refused handshake is retried until the connect timeout: long enough for one attempt."""


@pytest.fixture(scope="module")
def tls_zk() -> Iterator[ZooKeeperServer]:
    """A server whose certificate names `localhost` (and an address that is not its own),
    not 127.0.0.1: reached as localhost it verifies, as 127.0.0.1 it must not."""
    server = ZooKeeperServer(tls=True)
    server.tls_files = make_tls_files(server.data_dir / "tls", host="10.9.8.7")
    with server:
        yield server


def _local(server: ZooKeeperServer) -> str:
    return f"localhost:{server.secure_port}"


def _tls(server: ZooKeeperServer, **changes: object) -> ZooKeeperSecurity:
    files = server.tls_files
    assert files is not None
    settings: dict[str, object] = {
        "ca_file": str(files.ca),
        "cert_file": str(files.client_cert),
        "key_file": str(files.client_key),
        **changes,
    }
    return ZooKeeperSecurity(tls=ZooKeeperTls(**settings))  # type: ignore[arg-type]


def _connect(
    address: str, security: ZooKeeperSecurity, timeout: float = CONNECT_TIMEOUT
) -> contextlib.AbstractAsyncContextManager[ZkMetadataStore]:
    return ZkMetadataStore.connect(
        address, request_timeout=10.0, connect_timeout=timeout, security=security
    )


async def test_a_session_over_tls_reads_and_writes(tls_zk: ZooKeeperServer) -> None:
    """With the CA, a client certificate and hostname verification, the session works."""
    async with _connect(_local(tls_zk), _tls(tls_zk)) as store:
        await store.create("/tls-check", b"over tls")
        assert (await store.get("/tls-check")).data == b"over tls"
        await store.delete("/tls-check", version=0)


async def test_an_untrusted_server_is_refused_and_said_so(
    tls_zk: ZooKeeperServer, tmp_path: Path
) -> None:
    """A server whose certificate another CA signed opens no session; the error says TLS."""
    other_ca = make_tls_files(tmp_path).ca
    with pytest.raises(StoreUnavailable, match=r"TLS: .*CERTIFICATE_VERIFY_FAILED"):
        async with _connect(_local(tls_zk), _tls(tls_zk, ca_file=str(other_ca)), REFUSAL_TIMEOUT):
            pass


async def test_a_host_name_the_certificate_does_not_name_is_refused(
    tls_zk: ZooKeeperServer,
) -> None:
    """Reached by an address its certificate does not carry, the server is refused; with
    hostname verification off (an explicit setting) the same address is accepted."""
    address = f"127.0.0.1:{tls_zk.secure_port}"
    with pytest.raises(StoreUnavailable, match=r"TLS: .*(hostname|IP address) mismatch"):
        async with _connect(address, _tls(tls_zk), REFUSAL_TIMEOUT):
            pass
    async with _connect(address, _tls(tls_zk, verify_hostname=False)) as store:
        assert await store.exists("/") is not None


async def test_a_plain_client_cannot_use_the_tls_port(tls_zk: ZooKeeperServer) -> None:
    """Without TLS the secure port opens no session (nothing is sent in clear)."""
    with pytest.raises(StoreUnavailable):
        async with ZkMetadataStore.connect(
            tls_zk.secure_address, request_timeout=3.0, connect_timeout=5.0
        ):
            pass


async def test_digest_authentication_over_tls(tls_zk: ZooKeeperServer) -> None:
    """The recommended setup: digest authentication on a TLS session; the znode created
    carries the digest user's ACL."""
    tls = _tls(tls_zk).tls
    security = ZooKeeperSecurity(digest_user="tombstone", digest_password="t-pass", tls=tls)
    async with _connect(_local(tls_zk), security) as store:
        await store.create("/tls-auth", b"")
        acl = await store.get_acl("/tls-auth")
        assert [entry.scheme for entry in acl.entries] == ["digest", "world"]
        await store.delete("/tls-auth", version=0)
