"""The follower's compact index of every owner's references, as last published.

One entry per owner znode, handed in and out as an `array('q')` (no object per ledger) and
stored compactly (`OwnerIndex`: a record per topic, varint integers). An entry's integers:

    header   kind, version, czxid, seen (the version's modification time, ms; 0: unknown)
    ML       n, m, ledger ids (n), then per ledger with an offload context (m of them):
             position in the list, flags, uuid msb, uuid lsb, driver, timestamp
    CURSOR   cursorsLedgerId; when it names any, the compacted ledger (-1: none), then the
             bucket ledgers
    SCHEMA   the ledger ids of every version (the index and the latest)

`flags`: HAS_UUID (the context carries a uuid: its objects need an OFFLOAD_LEDGER intent),
COMPLETE, BK_DELETED (`bookkeeperDeleted`: the BookKeeper copy is unreferenced). `driver`
indexes a table of distinct (driver name, metadata) pairs shared by all owners (a cluster
has a handful), -1 when the context has none (Pulsar 2.1).

A cursor's compacted ledger is the `CompactedTopicLedger` property of a `__compaction`
cursor, and its bucket ledgers the ids of its `#pulsar.internal.delayed.bucket_*` properties
(`cursor_props`): the ids only. While an active cursor's znode omits the compacted ledger,
the entry keeps the last one it named (`diff.carried`). An entry written before these were
indexed, like that of a cursor whose properties name no ledger, holds the cursorsLedgerId
alone: it reads as naming neither.

A shadow topic's ML (`PULSAR.SHADOW_SOURCE`) references no ledgers: its list is a copy of
its source's, which alone unlinks them.

An entry says what the owner referenced at `version` of the znode created at `czxid`; a
znode deleted and created again under the same name is another owner (another czxid). `seen`
is when the store wrote that version (its `mtime`, the store's clock): a moment at which
every ledger the entry names was listed, and so existed (docs/follower.md, "When a ledger
was last seen"). Entries of checkpoints written before it was kept hold 0 there.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

from services.marker.follower.cursor_props import NO_LEDGER, bucket_ledgers, compacted_ledger
from services.marker.follower.owner_paths import Kind
from services.marker.owners import LedgerRef
from services.metadata import (
    Versioned,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
)
from services.metadata.pulsar_formats import SHADOW_SOURCE
from services.metadata.pulsar_names import MANAGED_LEDGERS_ROOT, PERSISTENT
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.v1 import pending_delete_pb2 as _pd

HAS_UUID, COMPLETE, BK_DELETED = 1, 2, 4
HEADER = 4
OFFLOAD_RECORD = 6
Driver = tuple[str, tuple[tuple[str, str], ...]]

KIND, VERSION, CZXID, SEEN = 0, 1, 2, 3
CURSOR_LEDGER, COMPACTED, BUCKETS = HEADER, HEADER + 1, HEADER + 2
"""Positions in a cursor's entry."""
_ML_PREFIX = MANAGED_LEDGERS_ROOT + "/"


class Drivers:
    """Distinct offload drivers (name and metadata), numbered in order of first sight."""

    def __init__(self) -> None:
        self.table: list[Driver] = []
        self._numbers: dict[Driver, int] = {}

    def number(self, driver: Driver) -> int:
        found = self._numbers.get(driver)
        if found is None:
            found = self._numbers[driver] = len(self.table)
            self.table.append(driver)
        return found

    def load(self, table: list[Driver]) -> None:
        self.table = list(table)
        self._numbers = {driver: n for n, driver in enumerate(self.table)}


def encode(kind: Kind, node: Versioned, path: str, drivers: Drivers) -> array[int]:
    """The entry of an owner znode as read; `CorruptMetadata` when it does not decode (the
    caller keeps what it knew: an unreadable owner is never "unreferenced")."""
    entry = array("q", (int(kind), node.version, node.czxid, max(node.mtime_ms, 0)))
    if kind is Kind.CURSOR:
        info = decode_cursor_info(node.data, path=path)
        entry.append(info.cursorsLedgerId)
        compacted = compacted_ledger(path.rpartition("/")[2], info)
        buckets = bucket_ledgers(info)
        if compacted >= 0 or buckets:  # most cursors name neither: no bytes for them
            entry.append(compacted)
            entry.extend(buckets)
    elif kind is Kind.SCHEMA:
        locator = decode_schema_locator(node.data, path=path)
        ids = {e.position.ledgerId for e in locator.index}
        ids.add(locator.info.position.ledgerId)
        entry.extend(sorted(ids))
    else:
        _encode_ml(entry, decode_managed_ledger_info(node.data, path=path), drivers)
    return entry


def _encode_ml(entry: array[int], info: _ml.ManagedLedgerInfo, drivers: Drivers) -> None:
    if any(p.key == SHADOW_SOURCE for p in info.properties):
        # A shadow topic's list is a copy of its source's (PIP-180): the ledgers are the
        # source's, and neither the copy dropping one nor the shadow's deletion unlinks
        # anything. Its cursors are its own and are followed as any cursor.
        entry.extend((0, 0))
        return
    ledgers = info.ledgerInfo
    offloaded = [(n, li) for n, li in enumerate(ledgers) if li.HasField("offloadContext")]
    entry.extend((len(ledgers), len(offloaded)))
    entry.extend(li.ledgerId for li in ledgers)
    for position, li in offloaded:
        ctx = li.offloadContext
        flags = (
            (HAS_UUID if ctx.HasField("uidMsb") else 0)
            | (COMPLETE if ctx.complete else 0)
            | (BK_DELETED if ctx.bookkeeperDeleted else 0)
        )
        driver = -1
        if ctx.HasField("driverMetadata"):
            meta = ctx.driverMetadata
            props = tuple(sorted((kv.key, kv.value) for kv in meta.properties))
            driver = drivers.number((meta.name, props))
        entry.extend((position, flags, ctx.uidMsb, ctx.uidLsb, driver, ctx.timestamp))


def seen_of(entry: array[int]) -> int:
    """When the store wrote the version the entry holds, ms (0: unknown)."""
    return entry[SEEN]


def kind_of(entry: array[int]) -> Kind:
    return Kind(entry[KIND])


def ledger_ids(entry: array[int]) -> array[int]:
    """Every ledger id the entry references (one copy, in list order; for a cursor, its
    cursor ledger, compacted ledger and bucket ledgers)."""
    kind = entry[KIND]
    if kind == Kind.ML:
        n = entry[HEADER]
        return entry[HEADER + 2 : HEADER + 2 + n]
    ids = entry[HEADER:]
    return array("q", (i for i in ids if i >= 0))


def cursor_ledger(entry: array[int]) -> int:
    """A cursor entry's cursorsLedgerId (-1: none)."""
    return entry[CURSOR_LEDGER]


def compacted_of(entry: array[int]) -> int:
    """A cursor entry's compacted ledger (-1: none, or an entry from before they were kept)."""
    return entry[COMPACTED] if len(entry) > COMPACTED else NO_LEDGER


def buckets_of(entry: array[int]) -> array[int]:
    """A cursor entry's bucket snapshot ledgers (sorted)."""
    return entry[BUCKETS:]


def ml_refs(entry: array[int], drivers: Drivers) -> dict[int, LedgerRef]:
    """An ML entry's ledgers with the tiers each needs (as `owners.tiers_of` decides)."""
    n, m = entry[HEADER], entry[HEADER + 1]
    ids = entry[HEADER + 2 : HEADER + 2 + n]
    refs = {ledger_id: LedgerRef(ledger_id) for ledger_id in ids}
    base = HEADER + 2 + n
    for k in range(m):
        position, flags, msb, lsb, driver, stamp = entry[
            base + k * OFFLOAD_RECORD : base + (k + 1) * OFFLOAD_RECORD
        ]
        ledger_id = ids[position]
        refs[ledger_id] = offloaded_ref(ledger_id, flags, msb, lsb, driver, stamp, drivers)
    return refs


def offloaded_ref(
    ledger_id: int, flags: int, msb: int, lsb: int, driver: int, stamp: int, drivers: Drivers
) -> LedgerRef:
    context = _pd.OffloadContext(
        uuid_msb=msb,
        uuid_lsb=lsb,
        complete=bool(flags & COMPLETE),
        bookkeeper_deleted=bool(flags & BK_DELETED),
        timestamp_ms=stamp,
    )
    if driver >= 0:
        name, props = drivers.table[driver]
        context.driver_name = name
        context.driver_metadata.update(dict(props))
    tiers: list[_pd.LedgerType.ValueType] = []
    if not flags & BK_DELETED:
        tiers.append(_pd.LEDGER)
    if flags & HAS_UUID:
        tiers.append(_pd.OFFLOAD_LEDGER)
    return LedgerRef(ledger_id, tuple(tiers), context)


class OwnerIndex:
    """Every owner's entry by znode path, and the driver table they share.

    Entries are handed in and out as arrays, but stored compactly, because the index holds
    every owner of the cluster (docs/follower.md has the figures):
    - one record per topic, holding its ML's entry and every cursor's (a cursor is a child
      of its ML's znode): one dict slot, key and bytes object per topic instead of per owner;
    - the key is the number of the owner's parent znode (a namespace, plus the domain for an
      ML) followed by the topic's local name, so each parent path is stored once;
    - the integers as zigzag varints of their differences (a topic's ledger ids are close
      together: most take one byte instead of eight).
    The counts of owners and references are kept as entries change (gauges read them).
    """

    def __init__(self) -> None:
        self._records: dict[bytes, bytes] = {}
        self._parents: list[str] = []
        self._parent_numbers: dict[str, int] = {}
        self.drivers = Drivers()
        self._owners = 0
        self._references = 0
        self.entries = OwnerPaths(self)
        """Every owner's path: `in`, iteration and `len`, without decoding entries."""

    def __len__(self) -> int:
        return self._owners

    def get(self, path: str) -> array[int] | None:
        key, name = self._key(path, create=False)
        record = None if key is None else self._records.get(key)
        payload = None if record is None else _parts(record).get(name)
        return None if payload is None else unpack_ints(payload)

    def put(self, path: str, entry: array[int] | None) -> None:
        key, name = self._key(path, create=entry is not None)
        if key is None:
            return
        record = self._records.get(key)
        parts = {} if record is None else _parts(record)
        old = parts.pop(name, None)
        if old is not None:
            self._owners -= 1
            self._references -= references(unpack_ints(old))
        if entry is not None:
            parts[name] = pack_ints(entry)
            self._owners += 1
            self._references += references(entry)
        if parts:
            self._records[key] = _record(parts)
        elif record is not None:
            del self._records[key]

    def replace(self, entries: dict[str, array[int]]) -> None:
        """Take `entries` (a full read) as the whole index."""
        self._records.clear()
        self._owners = self._references = 0
        for path, entry in entries.items():
            self.put(path, entry)

    def items(self) -> Iterator[tuple[str, array[int]]]:
        for topic, name, payload in self._owners_of():
            yield (f"{topic}/{name}" if name else topic), unpack_ints(payload)

    def ledger_count(self) -> int:
        """References held (a ledger listed by an ML and named by a cursor counts twice)."""
        return self._references

    # --- raw records, for the checkpoint ---------------------------------------------------

    def records(self) -> Iterator[tuple[str, str, bytes]]:
        """(parent path, topic's local name, record) of every topic, as stored."""
        for key, record in self._records.items():
            number, at = _varint(key, 0)
            yield self._parents[number], key[at:].decode("utf-8"), record

    def load_record(self, parent: str, local: str, record: bytes) -> None:
        """Add a record `records` gave (checked: a malformed one raises ValueError)."""
        parts = _parts(record)
        entries = [unpack_ints(payload) for payload in parts.values()]
        prefix = self._parent_key(parent, create=True)
        assert prefix is not None
        self._records[prefix + local.encode("utf-8")] = record
        self._owners += len(entries)
        self._references += sum(references(entry) for entry in entries)

    # --- keys ------------------------------------------------------------------------------

    def _key(self, path: str, *, create: bool) -> tuple[bytes | None, str]:
        """The record key of `path`'s topic, and the owner's name in the record: a cursor's
        name, or "" for the ML or schema itself."""
        topic, name = _topic_of(path)
        parent, _, local = topic.rpartition("/")
        prefix = self._parent_key(parent, create=create)
        return (None if prefix is None else prefix + local.encode("utf-8")), name

    def _parent_key(self, parent: str, *, create: bool) -> bytes | None:
        number = self._parent_numbers.get(parent)
        if number is None:
            if not create:
                return None
            number = self._parent_numbers[parent] = len(self._parents)
            self._parents.append(parent)
        return _encode_varint(number)

    def _owners_of(self) -> Iterator[tuple[str, str, bytes]]:
        """(topic path, owner name, payload) of every owner; a name "" is the topic itself."""
        for parent, local, record in self.records():
            topic = f"{parent}/{local}"
            for name, payload in _parts(record).items():
                yield topic, name, payload

    def _paths(self) -> Iterator[str]:
        for topic, name, _payload in self._owners_of():
            yield f"{topic}/{name}" if name else topic


class OwnerPaths:
    """The paths of an index's owners (a read-only view)."""

    def __init__(self, index: OwnerIndex) -> None:
        self._index = index

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        index = self._index
        key, name = index._key(path, create=False)
        record = None if key is None else index._records.get(key)
        return record is not None and name in _parts(record)

    def __iter__(self) -> Iterator[str]:
        return self._index._paths()

    def __len__(self) -> int:
        return len(self._index)


def _topic_of(path: str) -> tuple[str, str]:
    """(the topic's owner path, the cursor name or ""), from the path's shape alone, by the
    rules of `owner_paths.classify` (a cursor is the child of an ML's znode)."""
    if path.startswith(_ML_PREFIX):
        parts = path[len(_ML_PREFIX) :].split("/")
        cursor = (len(parts) == 5 and parts[2] == PERSISTENT) or (
            len(parts) == 6 and parts[3] == PERSISTENT
        )
        if cursor:
            topic, _, name = path.rpartition("/")
            return topic, name
    return path, ""


# --- the record format ----------------------------------------------------------------------
# A record is a sequence of owners: varint name length, the name (UTF-8), varint payload length,
# the payload. A payload is the entry's integers, each as the zigzag varint of its difference
# from the previous one (the first from 0).


def _parts(record: bytes) -> dict[str, bytes]:
    """The owners of a record: name → payload (ValueError when malformed)."""
    parts: dict[str, bytes] = {}
    at = 0
    while at < len(record):
        size, at = _varint(record, at)
        name = record[at : at + size].decode("utf-8")
        at += size
        size, at = _varint(record, at)
        if at + size > len(record):
            raise ValueError("record truncated")
        parts[name] = record[at : at + size]
        at += size
    return parts


def _record(parts: dict[str, bytes]) -> bytes:
    out = bytearray()
    for name, payload in parts.items():
        raw = name.encode("utf-8")
        out += _encode_varint(len(raw)) + raw + _encode_varint(len(payload)) + payload
    return bytes(out)


def with_unknown_seen(entry: array[int]) -> array[int]:
    """An entry of the layout before `seen` was kept (a three-integer header), with 0 there."""
    return entry[:SEEN] + array("q", (0,)) + entry[SEEN:]


def record_with_unknown_seen(record: bytes) -> bytes:
    """A record of entries without `seen` (checkpoints before it was kept), as stored now."""
    parts = {
        name: pack_ints(with_unknown_seen(unpack_ints(payload)))
        for name, payload in _parts(record).items()
    }
    return _record(parts)


def pack_ints(entry: array[int]) -> bytes:
    out = bytearray()
    previous = 0
    for value in entry:
        delta = value - previous
        previous = value
        zigzag = delta * 2 if delta >= 0 else -delta * 2 - 1
        while zigzag >= 0x80:
            out.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        out.append(zigzag)
    return bytes(out)


def unpack_ints(payload: bytes) -> array[int]:
    entry = array("q")
    previous = 0
    at, end = 0, len(payload)
    while at < end:
        zigzag, at = _varint(payload, at)
        previous += zigzag >> 1 if not zigzag & 1 else -((zigzag + 1) >> 1)
        entry.append(previous)
    return entry


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint(raw: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(raw):
            raise ValueError("varint truncated")
        byte = raw[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def references(entry: array[int]) -> int:
    if entry[KIND] == Kind.ML:
        return entry[HEADER]
    return sum(1 for ledger_id in entry[HEADER:] if ledger_id >= 0)
