"""ZooKeeper requests aiozk does not have, built on its protocol classes (part of the adapter).

- `createContainer` (opcode 19): aiozk sends containers as `create2` with the container flag,
  which the server silently turns into a PERSISTENT znode.
- `multiRead` (opcode 22, ZooKeeper ≥ 3.6): many `getData` reads in one round trip. The
  request body is a jute `MultiOperationRecord`: for each read a `MultiHeader` (type 4, done
  false, err -1) then a `GetDataRequest` (path, watch); then a closing header (type -1, done
  true, err -1). The reply is a `MultiResponse`: for each read a `MultiHeader` then either a
  `GetDataResponse` (data, stat) or, when that read failed, type -1 and an `ErrorResponse`
  (its error code); then the closing header. One failed read does not fail the others.
- `multi` (opcode 14, ZooKeeper ≥ 3.4) of conditional deletes, applied atomically: for each
  delete a `MultiHeader` (type 2, done false, err -1) then a `DeleteRequest` (path, version);
  then the closing header. The reply holds, per op, a `MultiHeader` then its result: type 2
  (no body) when the delete was applied, or type -1 and an `ErrorResponse` when the multi
  failed. A failed multi is rolled back as a whole and every op gets an error result: the
  ops before the failing one carry 0 (OK, rolled back), the failing one its real error, the
  ones after it -2 (RUNTIMEINCONSISTENCY). ZooKeeper 3.8 answers a failed multi with err 0
  in the reply header; the per-op results are the only account of what failed.
- `addWatch` (opcode 106, ZooKeeper ≥ 3.6): a watch that stays set after it fires. The body
  is the path and the mode (0 PERSISTENT, 1 PERSISTENT_RECURSIVE: every znode below the path
  too); the reply is an `ErrorResponse` (its code, 0) that carries nothing. Events arrive as
  ordinary `WatcherEvent`s with xid -1 naming the znode that changed (created, deleted, data
  changed; a recursive watch sends no child events), its path as the server knows it (the
  chroot included). The watch belongs to the connection: after a reconnect it must be added
  again, and what changed in between is not reported.

Defining a response class registers its opcode's decoder in aiozk's reader. A decoder that
raised would make aiozk abort the connection, so these decoders never raise: an undecodable
reply is reported as such to the caller.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from aiozk import protocol as zk_protocol
from aiozk.protocol.request import Request
from aiozk.protocol.response import Response

from services.metadata.store import Versioned

_HEADER = struct.Struct("!i?i")  # MultiHeader: type, done, err
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")  # czxid mzxid ctime mtime version cversion aversion
# ephemeralOwner dataLength numChildren pzxid
_DELETE = 2
_GET_DATA = 4
_ERROR = -1
_END = _HEADER.pack(-1, True, -1)
MULTI = 14
MULTI_READ = 22
ADD_WATCH = 106
PERSISTENT_RECURSIVE = 1


class CreateContainerRequest(zk_protocol.Create2Request):  # type: ignore[misc]
    """ZooKeeper's `createContainer` op (19)."""

    opcode = 19


class CreateContainerResponse(zk_protocol.Create2Response):  # type: ignore[misc]
    """Same body as create2 (path, stat); defining it registers opcode 19's decoder."""

    opcode = 19


class AddWatchRequest(Request):  # type: ignore[misc]
    """`addWatch` of `path` in `mode` (PERSISTENT_RECURSIVE by default)."""

    opcode = ADD_WATCH

    def __init__(self, path: str, mode: int = PERSISTENT_RECURSIVE) -> None:
        super().__init__()
        self.path = path
        self.mode = mode

    def serialize(self, xid: int | None = None) -> bytes:
        encoded = self.path.encode("utf-8")
        parts = [] if xid is None else [_INT.pack(xid)]
        parts += (_INT.pack(ADD_WATCH), _INT.pack(len(encoded)), encoded, _INT.pack(self.mode))
        return b"".join(parts)

    def __str__(self) -> str:
        return f"AddWatch[{self.path}, mode {self.mode}]"


class AddWatchResponse(Response):  # type: ignore[misc]
    """The reply carries nothing we use (a zero error code); decoding never fails."""

    opcode = ADD_WATCH

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> AddWatchResponse:
        return cls()

    def __str__(self) -> str:
        return "AddWatchResponse"


class MultiReadRequest(Request):  # type: ignore[misc]
    """`getData` of each path (no watches), answered in one reply."""

    opcode = MULTI_READ

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__()
        self.paths = list(paths)

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [_INT.pack(xid)]
        parts.append(_INT.pack(MULTI_READ))
        header = _HEADER.pack(_GET_DATA, False, -1)
        for path in self.paths:
            encoded = path.encode("utf-8")
            parts += (header, _INT.pack(len(encoded)), encoded, b"\x00")  # watch: false
        parts.append(_END)
        return b"".join(parts)

    def __str__(self) -> str:
        return f"MultiRead[{len(self.paths)} paths]"


class MultiReadResponse(Response):  # type: ignore[misc]
    """Per path, in request order: a `Versioned` or ZooKeeper's error code for that read.

    `malformed` is set (and `results` incomplete) when the reply could not be decoded.
    """

    opcode = MULTI_READ

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.results: list[Versioned | int] = []
        self.malformed: str | None = None

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> MultiReadResponse:
        instance = cls()
        try:
            instance.results = _parse(raw_bytes)
        except (struct.error, ValueError) as e:
            instance.malformed = f"undecodable multiRead reply: {e}"
        return instance

    def __str__(self) -> str:
        return f"MultiReadResponse[{len(self.results)} results]"


def _parse(raw: bytes) -> list[Versioned | int]:
    results: list[Versioned | int] = []
    op, done, _err = _HEADER.unpack_from(raw, 0)
    offset = _HEADER.size
    while not done:
        if op == _GET_DATA:
            (size,) = _INT.unpack_from(raw, offset)
            offset += _INT.size
            data = b"" if size < 0 else raw[offset : offset + size]
            offset += max(size, 0)
            stat = _STAT.unpack_from(raw, offset)
            offset += _STAT.size
            results.append(Versioned(data, stat[4], stat[2], stat[3], stat[0], stat[1], stat[5]))
        elif op == _ERROR:
            (code,) = _INT.unpack_from(raw, offset)
            offset += _INT.size
            results.append(code)
        else:
            raise ValueError(f"unexpected result type {op}")
        op, done, _err = _HEADER.unpack_from(raw, offset)
        offset += _HEADER.size
    return results


class MultiDeleteRequest(Request):  # type: ignore[misc]
    """ZooKeeper's `multi` (14) of conditional deletes: all are applied, or none."""

    # aiozk picks a reply's decoder by the request's `opcode` attribute only (`serialize`
    # writes the wire opcode). A key of our own leaves aiozk's decoder of opcode 14, used by
    # its own transactions, in place.
    opcode = "multi-delete"
    writes_data = True  # never resent after a connection loss (see zk_store)

    def __init__(self, deletes: Sequence[tuple[str, int]]) -> None:
        super().__init__()
        self.deletes = list(deletes)

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [_INT.pack(xid)]
        parts.append(_INT.pack(MULTI))
        header = _HEADER.pack(_DELETE, False, -1)
        for path, version in self.deletes:
            encoded = path.encode("utf-8")
            parts += (header, _INT.pack(len(encoded)), encoded, _INT.pack(version))
        parts.append(_END)
        return b"".join(parts)

    def __str__(self) -> str:
        return f"MultiDelete[{len(self.deletes)} paths]"


class MultiDeleteResponse(Response):  # type: ignore[misc]
    """Per delete, in request order: None when it was applied, else its error code (0 when
    it was rolled back because another op failed).

    `malformed` is set (and `results` incomplete) when the reply could not be decoded.
    """

    opcode = MultiDeleteRequest.opcode

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.results: list[int | None] = []
        self.malformed: str | None = None

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> MultiDeleteResponse:
        instance = cls()
        try:
            instance.results = _parse_multi_delete(raw_bytes)
        except (struct.error, ValueError) as e:
            instance.malformed = f"undecodable multi reply: {e}"
        return instance

    def failure(self, sent: int) -> tuple[int, int] | None:
        """None when each of the `sent` deletes was applied; else (position, error code) of
        the delete that failed the multi (then none was applied). `ValueError` when the reply
        does not say which: undecodable, a wrong count, or not what ZooKeeper sends."""
        results = self.results
        if self.malformed is not None:
            raise ValueError(self.malformed)
        if len(results) != sent:
            raise ValueError(f"{len(results)} results for {sent} deletes")
        if all(result is None for result in results):
            return None
        # A failed multi has an error result for every op; the first nonzero is the cause.
        codes = [result for result in results if result is not None]
        cause = next((n for n, code in enumerate(codes) if code != 0), None)
        if len(codes) != sent or cause is None:
            raise ValueError(f"inconsistent multi reply {results}")
        return cause, codes[cause]

    def __str__(self) -> str:
        return f"MultiDeleteResponse[{len(self.results)} results]"


def _parse_multi_delete(raw: bytes) -> list[int | None]:
    results: list[int | None] = []
    op, done, _err = _HEADER.unpack_from(raw, 0)
    offset = _HEADER.size
    while not done:
        if op == _DELETE:
            results.append(None)  # applied; a delete's result has no body
        elif op == _ERROR:
            (code,) = _INT.unpack_from(raw, offset)
            offset += _INT.size
            results.append(code)
        else:
            raise ValueError(f"unexpected result type {op}")
        op, done, _err = _HEADER.unpack_from(raw, offset)
        offset += _HEADER.size
    return results
