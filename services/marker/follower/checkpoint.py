"""The follower's durable checkpoint: its index, compressed, in ZooKeeper.

    /tombstone/follower/checkpoint             pointer: JSON {generation, chunks, size,
                                               sha256, written_ms, owners, references}
    /tombstone/follower/checkpoints/<gen>/<n>  the compressed index, in chunks < 1 MB

Why ZooKeeper: the follower already holds a session there (its watch and its leader lock),
so a follower started on another host finds the checkpoint with nothing else to configure,
and no second store (a bucket, a volume) has to be reachable for the follower to be safe.
The size stays modest: the index's records are written as stored (ids as varint differences,
most a byte), about 2 MB per million referenced ledgers after zlib (figures in
docs/follower.md); each chunk is below ZooKeeper's 1 MB `jute.maxbuffer`.

A new generation is written in full, then the pointer is switched with one compare-and-set
(only the follower that read the pointer's version can move it: a follower that lost its
leadership and kept writing would conflict), then the old generation is deleted. A reader
follows the pointer and checks the digest, so a half-written checkpoint is never read.

Format (after zlib): b"TSFC4", then the drivers (u32 count; per driver its name and its
sorted metadata as u16-prefixed UTF-8 strings), then the parent paths (u32 count, each a
u16-prefixed UTF-8 string), then the topics' records as the index stores them (u64 count; per
record the u32 number of its parent, its local name as a u16-prefixed UTF-8 string, u32 length,
the record's bytes: see `index.OwnerIndex`). Writing it copies the records as they are, so a
checkpoint of a million topics decodes nothing. b"TSFC3" is the same layout from before
entries held `seen` (the owner version's modification time): its entries are read with 0
there, unknown, so the intents of a diff against it carry no `seen_at_ms`, as before. The
pointer's `written_ms` is not put in its place: a checkpoint can hold an entry older than the
owner at the time it was written (a change not read yet, or one whose intents failed), so
its ledgers need not have been listed then. b"TSFC2" is TSFC3 from before cursor entries held
their properties' ledgers (each such entry holds the cursorsLedgerId
alone, which the index reads as naming no property ledger); b"TSFC1" (every owner's path, u32
length, then that many little-endian int64) is still read. The magic changed with the
cursor entries so that an older follower refuses a checkpoint whose cursor entries it
would misread (it would take their property ledgers for cursor ledgers).
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

import structlog

from services.marker.follower.index import (
    Driver,
    OwnerIndex,
    record_with_unknown_seen,
    with_unknown_seen,
)
from services.metadata import (
    ANY_VERSION,
    MetadataError,
    MetadataStore,
    NodeExists,
    NoNode,
    VersionConflict,
)

_log = structlog.get_logger(__name__)

POINTER = "/tombstone/follower/checkpoint"
GENERATIONS = "/tombstone/follower/checkpoints"
CHUNK_BYTES = 900_000
"""Below ZooKeeper's default 1 MB `jute.maxbuffer`, with room for the request's framing."""
MAGIC = b"TSFC4"
MAGIC_V3 = b"TSFC3"
MAGIC_V2 = b"TSFC2"
MAGIC_V1 = b"TSFC1"
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")


@dataclass(frozen=True)
class Pointer:
    generation: int
    chunks: int
    size: int
    sha256: str
    written_ms: int
    owners: int
    references: int


class CheckpointUnreadable(Exception):
    """The pointer names a checkpoint that is missing or does not match its digest."""


def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _U16.pack(len(raw)) + raw


def _serialized(index: OwnerIndex) -> Iterator[bytes]:
    yield MAGIC
    yield _U32.pack(len(index.drivers.table))
    for name, props in index.drivers.table:
        yield _text(name) + _U16.pack(len(props))
        for key, value in props:
            yield _text(key) + _text(value)
    records = list(index.records())
    parents: dict[str, int] = {}
    for parent, _local, _record in records:
        parents.setdefault(parent, len(parents))
    yield _U32.pack(len(parents))
    for parent in parents:
        yield _text(parent)
    yield _U64.pack(len(records))
    for parent, local, record in records:
        yield _U32.pack(parents[parent]) + _text(local) + _U32.pack(len(record)) + record


def compress(index: OwnerIndex) -> bytes:
    packer = zlib.compressobj(6)
    parts = [packer.compress(piece) for piece in _serialized(index)]
    parts.append(packer.flush())
    return b"".join(parts)


class _Reader:
    def __init__(self, raw: bytes) -> None:
        self.raw, self.at = raw, 0

    def take(self, size: int) -> bytes:
        piece = self.raw[self.at : self.at + size]
        if len(piece) != size:
            raise CheckpointUnreadable("truncated")
        self.at += size
        return piece

    def number(self, shape: struct.Struct) -> int:
        (value,) = shape.unpack(self.take(shape.size))
        return int(value)

    def text(self) -> str:
        return self.take(self.number(_U16)).decode("utf-8")


def decompress(blob: bytes) -> OwnerIndex:
    try:
        reader = _Reader(zlib.decompress(blob))
    except zlib.error as e:
        raise CheckpointUnreadable(f"not zlib: {e}") from e
    magic = reader.take(len(MAGIC))
    if magic not in (MAGIC, MAGIC_V3, MAGIC_V2, MAGIC_V1):
        raise CheckpointUnreadable("unknown format")
    index = OwnerIndex()
    drivers: list[Driver] = []
    for _ in range(reader.number(_U32)):
        name = reader.text()
        props = tuple((reader.text(), reader.text()) for _ in range(reader.number(_U16)))
        drivers.append((name, props))
    index.drivers.load(drivers)
    if magic == MAGIC_V1:
        _read_v1_entries(reader, index)
        return index
    parents = [reader.text() for _ in range(reader.number(_U32))]
    for _ in range(reader.number(_U64)):
        number, local = reader.number(_U32), reader.text()
        record = reader.take(reader.number(_U32))
        if number >= len(parents):
            raise CheckpointUnreadable(f"record names parent {number} of {len(parents)}")
        try:
            if magic != MAGIC:
                record = record_with_unknown_seen(record)
            index.load_record(parents[number], local, record)
        except ValueError as e:
            raise CheckpointUnreadable(f"record {parents[number]}/{local}: {e}") from e
    return index


def _read_v1_entries(reader: _Reader, index: OwnerIndex) -> None:
    for _ in range(reader.number(_U64)):
        path = reader.text()
        entry = array("q")
        entry.frombytes(reader.take(8 * reader.number(_U32)))
        if sys.byteorder != "little":
            entry.byteswap()
        index.put(path, with_unknown_seen(entry))


class CheckpointStore:
    """Writes and reads the checkpoint through a metadata-store session."""

    def __init__(
        self, store: MetadataStore, pointer: str = POINTER, generations: str = GENERATIONS
    ) -> None:
        self._store = store
        self._root = pointer
        self._generations = generations
        self._version: int | None = None
        """The pointer's version as this follower last read or wrote it (None: absent)."""
        self.pointer: Pointer | None = None

    async def load(self) -> OwnerIndex | None:
        """The last checkpoint, or None when there is none or it is the one this store last
        wrote or read (the caller's index is at least as new). `CheckpointUnreadable` when
        the pointer names one that cannot be read back whole."""
        try:
            node = await self._store.get(self._root)
        except NoNode:
            self._version, self.pointer = None, None
            return None
        self._version = node.version
        if not node.data:
            return None
        try:
            pointer = Pointer(**json.loads(node.data))
        except (ValueError, TypeError) as e:
            raise CheckpointUnreadable(f"pointer: {e}") from e
        if self.pointer is not None and pointer.generation == self.pointer.generation:
            return None
        paths = [self._chunk(pointer.generation, n) for n in range(pointer.chunks)]
        pieces = await self._store.get_many(paths)
        if any(not hasattr(piece, "data") for piece in pieces):
            raise CheckpointUnreadable(f"generation {pointer.generation}: a chunk is missing")
        blob = b"".join(piece.data for piece in pieces)  # type: ignore[union-attr]
        if hashlib.sha256(blob).hexdigest() != pointer.sha256:
            raise CheckpointUnreadable(f"generation {pointer.generation}: digest mismatch")
        self.pointer = pointer
        return decompress(blob)

    async def save(self, index: OwnerIndex) -> Pointer:
        """Write `index` as a new generation and point at it. `VersionConflict` when another
        follower moved the pointer since this one last read or wrote it."""
        blob = compress(index)
        generation = time.time_ns()
        chunks = [blob[i : i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)] or [b""]
        for n, chunk in enumerate(chunks):
            await self._store.create(self._chunk(generation, n), chunk, make_parents=True)
        pointer = Pointer(
            generation=generation,
            chunks=len(chunks),
            size=len(blob),
            sha256=hashlib.sha256(blob).hexdigest(),
            written_ms=time.time_ns() // 1_000_000,
            owners=len(index),
            references=index.ledger_count(),
        )
        data = json.dumps(pointer.__dict__).encode()
        try:
            if self._version is None:
                await self._store.create(self._root, data, make_parents=True)
                self._version = 0
            else:
                self._version = await self._store.set(self._root, data, version=self._version)
        except (NodeExists, VersionConflict):
            await self._drop(str(generation))
            self.pointer = None  # the next load reads the other writer's pointer and version
            version = self._version if self._version is not None else -1
            raise VersionConflict(self._root, version) from None
        self.pointer = pointer
        for name in await self._store.get_children(self._generations):
            if name != str(generation):
                await self._drop(name)  # earlier generations, and any a crash left behind
        return pointer

    async def _drop(self, generation: str) -> None:
        """Delete a generation's chunks, best effort (a leftover only costs space, and the
        next save retries)."""
        folder = f"{self._generations}/{generation}"
        try:
            names = await self._store.get_children(folder)
            for name in names:
                await self._store.delete(f"{folder}/{name}", version=ANY_VERSION)
            await self._store.delete(folder, version=ANY_VERSION)
        except MetadataError as e:
            _log.info("checkpoint_generation_not_deleted", path=folder, error=str(e))

    def _chunk(self, generation: int, n: int) -> str:
        return f"{self._generations}/{generation}/{n}"
