"""What `zk_store` adds to an aiozk session for `ZooKeeperSecurity` (part of the ZooKeeper
adapter): the `addauth digest` packet on every connection, TLS connections, and ACLs in
aiozk's form.

aiozk defines the auth packet (xid -4, opcode 100) but never sends it, and ZooKeeper forgets
authentication with the connection. `DigestAuth` therefore wraps the session's
`establish_session`: right after the connect handshake of every connection, before the read
loop starts and before any request (the re-registered watches included), it sends the
packet and reads the answer itself. ZooKeeper answers AUTH_FAILED and closes the connection
when it refuses; that is final: the repair loop ends and every waiter fails with
`AuthFailed`, never a retry loop and never "absent".
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable
from typing import Any

from aiozk import exc as zk_exc
from aiozk import protocol as zk_protocol
from aiozk.connection import Connection, size_struct
from aiozk.protocol.acl import ACL, ID
from aiozk.states import States

from services.core.zk_security import ZooKeeperTls
from services.metadata.acl import AclEntry

AUTH_READ_TIMEOUT = 10.0


def zk_acl(entries: Iterable[AclEntry]) -> list[Any]:
    """aiozk's ACL objects for `entries`."""
    out = []
    for entry in entries:
        acl = ACL(id=ID(scheme=entry.scheme, id=entry.id))
        acl.perms = entry.perms
        out.append(acl)
    return out


def acl_entries(raw: Iterable[Any]) -> list[AclEntry]:
    return [AclEntry(acl.id.scheme, acl.id.id, int(acl.perms)) for acl in raw]


class DigestAuth:
    """Sends `addauth <scheme> <credential>` on every connection of `session`.

    `failure` is set once ZooKeeper refused: from then on the session is dead."""

    def __init__(self, session: Any, scheme: str, credential: bytes) -> None:
        self._session = session
        self._scheme = scheme
        self._credential = credential
        self.failure: zk_exc.AuthFailed | None = None
        original = session.establish_session

        async def establish() -> None:
            await original()
            await self._authenticate(session.conn)

        session.establish_session = establish

    async def _authenticate(self, conn: Connection) -> None:
        request = zk_protocol.AuthRequest(type=0, scheme=self._scheme, auth=self._credential)
        payload = request.serialize(zk_protocol.AUTH_XID)
        conn.opcode_xref[zk_protocol.AUTH_XID] = request.opcode
        conn.writer.write(size_struct.pack(len(payload)) + payload)
        try:
            async with asyncio.timeout(AUTH_READ_TIMEOUT):
                response = await self._auth_reply(conn)
        except (TimeoutError, ConnectionAbortedError, OSError, zk_exc.UnfinishedRead) as e:
            # No answer: like a failed handshake, the session loop tries another connection.
            conn.abort(zk_exc.SessionLost)
            raise zk_exc.SessionLost from e
        if isinstance(response, Exception):
            self._refused(conn, response)

    @staticmethod
    async def _auth_reply(conn: Connection) -> Any:
        while True:
            xid, _zxid, response = await conn.read_response()
            if xid == zk_protocol.WATCH_XID:
                conn.watch_handler(response)
                continue
            if xid == zk_protocol.AUTH_XID:
                return response
            raise ConnectionAbortedError(f"reply xid {xid} before the auth reply")

    def _refused(self, conn: Connection, error: Exception) -> None:
        """Fail every waiter for a connected session and end the repair loop."""
        failure = error if isinstance(error, zk_exc.AuthFailed) else zk_exc.AuthFailed()
        self.failure = failure
        conn.closing = True
        conn.abort(zk_exc.AuthFailed)
        if conn.writer is not None:
            conn.writer.close()
        futures = self._session.state.futures
        for state in (States.CONNECTED, States.READ_ONLY):
            for future in list(futures[state]):
                futures[state].discard(future)
                if not future.done():
                    future.set_exception(zk_exc.AuthFailed())
        raise failure


def tls_context(tls: ZooKeeperTls) -> ssl.SSLContext:
    """The client context: the CA (or the system's trust store), the client certificate,
    and hostname verification as configured."""
    context = ssl.create_default_context(cafile=tls.ca_file)
    context.check_hostname = tls.verify_hostname
    if tls.cert_file is not None:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    return context


class TlsConnection(Connection):  # type: ignore[misc]
    """aiozk's connection over TLS: the same two connects (the `srvr` probe, then the
    session's), each wrapped in `context`."""

    def __init__(self, *args: Any, context: ssl.SSLContext, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._context = context

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(self.read_timeout):
                return await asyncio.open_connection(
                    self.host, self.port, ssl=self._context, server_hostname=self.host
                )
        except TimeoutError:
            raise TimeoutError(f"TLS connection to {self.host}:{self.port} timed out") from None

    async def connect(self) -> None:
        self.reader, self.writer = await self._open()
        try:
            await self._make_handshake()
        finally:
            self.writer.close()
        self.reader, self.writer = await self._open()


class TlsDialer:
    """Makes every connection of `session` a `TlsConnection`; remembers the last failure
    (an untrusted certificate, a wrong host name) so that a connect that timed out can say
    why."""

    def __init__(self, session: Any, context: ssl.SSLContext) -> None:
        self._session = session
        self._context = context
        self.last_error: str | None = None
        session.make_connection = self.make_connection

    async def make_connection(self, host: str, port: int) -> Connection | None:
        conn = TlsConnection(
            host,
            port,
            watch_handler=self._session.event_dispatch,
            read_timeout=self._session.read_timeout,
            context=self._context,
        )
        try:
            await conn.connect()
        except Exception as e:  # as aiozk's own make_connection: try the next server
            self.last_error = f"{host}:{port}: {type(e).__name__}: {e}"
            return None
        return conn
