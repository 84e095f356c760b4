"""The follower's compact index of every owner's references, as last published.

One `array('q')` per owner znode (no object per ledger; stored as its bytes), keyed by the
znode's path:

    header   kind, version, czxid
    ML       n, m, ledger ids (n), then per ledger with an offload context (m of them):
             position in the list, flags, uuid msb, uuid lsb, driver, timestamp
    CURSOR   cursorsLedgerId
    SCHEMA   the ledger ids of every version (the index and the latest)

`flags`: HAS_UUID (the context carries a uuid: its objects need an OFFLOAD_LEDGER intent),
COMPLETE, BK_DELETED (`bookkeeperDeleted`: the BookKeeper copy is unreferenced). `driver`
indexes a table of distinct (driver name, metadata) pairs shared by all owners (a cluster
has a handful), -1 when the context has none (Pulsar 2.1). An ML without offloaded ledgers
costs 8 bytes per ledger.

An entry says what the owner referenced at `version` of the znode created at `czxid`; a
znode deleted and created again under the same name is another owner (another czxid).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

from services.marker.follower.owner_paths import Kind
from services.marker.owners import LedgerRef
from services.metadata import (
    Versioned,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
)
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.v1 import pending_delete_pb2 as _pd

HAS_UUID, COMPLETE, BK_DELETED = 1, 2, 4
HEADER = 3
OFFLOAD_RECORD = 6
Driver = tuple[str, tuple[tuple[str, str], ...]]

KIND, VERSION, CZXID = 0, 1, 2


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
    entry = array("q", (int(kind), node.version, node.czxid))
    if kind is Kind.CURSOR:
        entry.append(decode_cursor_info(node.data, path=path).cursorsLedgerId)
    elif kind is Kind.SCHEMA:
        locator = decode_schema_locator(node.data, path=path)
        ids = {e.position.ledgerId for e in locator.index}
        ids.add(locator.info.position.ledgerId)
        entry.extend(sorted(ids))
    else:
        _encode_ml(entry, decode_managed_ledger_info(node.data, path=path), drivers)
    return entry


def _encode_ml(entry: array[int], info: _ml.ManagedLedgerInfo, drivers: Drivers) -> None:
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


def kind_of(entry: array[int]) -> Kind:
    return Kind(entry[KIND])


def ledger_ids(entry: array[int]) -> array[int]:
    """Every ledger id the entry references (one copy, in list order)."""
    kind = entry[KIND]
    if kind == Kind.ML:
        n = entry[HEADER]
        return entry[HEADER + 2 : HEADER + 2 + n]
    ids = entry[HEADER:]
    return array("q", (i for i in ids if i >= 0))


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

    Entries are kept as the bytes of their arrays (an immutable bytes object holds its data
    inline: about half the overhead of an array per owner) and turned back into arrays when
    read. The count of references is kept as entries change (a gauge reads it every round).
    """

    def __init__(self) -> None:
        self.entries: dict[str, bytes] = {}
        self.drivers = Drivers()
        self._references = 0

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, path: str) -> array[int] | None:
        raw = self.entries.get(path)
        return None if raw is None else unpack(raw)

    def put(self, path: str, entry: array[int] | None) -> None:
        old = self.entries.pop(path, None) if entry is None else self.entries.get(path)
        if old is not None:
            self._references -= references(unpack(old))
        if entry is not None:
            self.entries[path] = entry.tobytes()
            self._references += references(entry)

    def replace(self, entries: dict[str, array[int]]) -> None:
        """Take `entries` (a full read) as the whole index."""
        self.entries = {path: entry.tobytes() for path, entry in entries.items()}
        self._references = sum(references(entry) for entry in entries.values())

    def items(self) -> Iterator[tuple[str, array[int]]]:
        return ((path, unpack(raw)) for path, raw in self.entries.items())

    def ledger_count(self) -> int:
        """References held (a ledger listed by an ML and named by a cursor counts twice)."""
        return self._references


def unpack(raw: bytes) -> array[int]:
    entry = array("q")
    entry.frombytes(raw)
    return entry


def references(entry: array[int]) -> int:
    if entry[KIND] == Kind.ML:
        return entry[HEADER]
    return sum(1 for ledger_id in entry[HEADER:] if ledger_id >= 0)
