"""The `bk_ledgers` rows of one task, built as columns (one list per column, then Arrow).

Ledger znodes are the bulk of a scan: a task reads up to 10,000 of them, and a dict per
ledger plus a `LedgerMetadata` with its segments cost more than the multiRead that fetched
them. Here a v3 znode (BookKeeper's binary `LedgerMetadataFormat`, what every current
bookie and broker writes) is parsed once and only the fields the contract has are read
from it: no segments, no digest, no password. Anything else (the v2 TextFormat and v1 text
of old ledgers, and every znode the fast path does not accept as it is) goes through
`decode_ledger_metadata`, so old formats are still read and a bad znode gets the same
`decode_error` as before. Values are those `rows.ledger_row` gives for the same znode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from google.protobuf import message as _message

from services.metadata import CorruptMetadata, LedgerMetadata, Versioned, decode_ledger_metadata
from services.metadata.ledger_metadata import (
    APPLICATION_PULSAR,
    HEADER_PREFIX,
    KEY_APPLICATION,
    LedgerState,
)
from services.scan.extract.rows import CUSTOM_COLUMNS, Row, recorded_version
from services.scan.schema import BK_LEDGERS
from tombstone.formats import bookkeeper_pb2 as _bk

_V3_HEADER = HEADER_PREFIX + b"3\n"
_V3_BODY = len(_V3_HEADER)
_STATE_NAMES = {state.value: state.name for state in LedgerState}
_CLOSED = LedgerState.CLOSED.value
_CUSTOM_KEYS = tuple(CUSTOM_COLUMNS)
_APPLICATION = _CUSTOM_KEYS.index(KEY_APPLICATION)
_parse: Callable[[bytes], _bk.LedgerMetadataFormat] = _bk.LedgerMetadataFormat.FromString

#: The contract's columns, in its order (`services.scan.schema.BK_LEDGERS`).
COLUMNS: tuple[str, ...] = tuple(BK_LEDGERS.fieldNames())
#: Columns that are null on a row whose znode did not decode.
_CONTENT = (
    "state",
    "length",
    "last_entry_id",
    "ensemble_size",
    "ctime_ms",
    "metadata_format_version",
    "custom_metadata",
    "has_pulsar_metadata",
    *CUSTOM_COLUMNS.values(),
)


class LedgerColumns:
    """The `bk_ledgers` rows of one subtree, column by column, in the order they were added."""

    def __init__(self, subtree: str) -> None:
        self.subtree = subtree
        """The `subtree` column: the unit's subtree as a path (`/ledgers/00/0000`)."""
        self.columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        c = self.columns
        # Bound methods, looked up once: `add` runs for every ledger of the scan.
        self._ids, self._ctimes = c["ledger_id"].append, c["znode_ctime_ms"].append
        self._mtimes, self._versions = c["znode_mtime_ms"].append, c["znode_version"].append
        self._states, self._lengths = c["state"].append, c["length"].append
        self._last_entries, self._ensembles = c["last_entry_id"].append, c["ensemble_size"].append
        self._meta_ctimes = c["ctime_ms"].append
        self._formats = c["metadata_format_version"].append
        self._customs = c["custom_metadata"].append
        self._pulsar, self._errors = c["has_pulsar_metadata"].append, c["decode_error"].append
        self._texts = tuple(c[column].append for column in CUSTOM_COLUMNS.values())

    def __len__(self) -> int:
        return len(self.columns["ledger_id"])

    def add(self, ledger_id: int, path: str, node: Versioned) -> None:
        """One ledger znode: decoded, or a row with `decode_error` when it does not decode."""
        version = recorded_version(node)  # raises before anything is appended
        data = node.data
        fmt = _fast_v3(data) if data.startswith(_V3_HEADER) else None
        if fmt is None:
            self._add_slow(ledger_id, path, node, version)
            return
        self._znode(ledger_id, node, version)
        state = fmt.state
        closed = state == _CLOSED
        self._states(_STATE_NAMES[state])
        self._lengths(fmt.length if closed else 0)
        self._last_entries(fmt.lastEntryId if closed and fmt.HasField("lastEntryId") else -1)
        self._ensembles(fmt.ensembleSize)
        self._meta_ctimes(fmt.ctime if fmt.HasField("ctime") else None)
        self._formats(3)
        self._custom({entry.key: entry.value for entry in fmt.customMetadata})

    def _znode(self, ledger_id: int, node: Versioned, version: int) -> None:
        self._ids(ledger_id)
        self._ctimes(node.ctime_ms)
        self._mtimes(node.mtime_ms)
        self._versions(version)

    def _custom(self, custom: dict[str, bytes]) -> None:
        self._customs(custom)
        texts = [
            None if (value := custom.get(key)) is None else value.decode("utf-8", "replace")
            for key in _CUSTOM_KEYS
        ]
        for append, text in zip(self._texts, texts, strict=True):
            append(text)
        self._pulsar(texts[_APPLICATION] == APPLICATION_PULSAR)
        self._errors(None)

    def _add_slow(self, ledger_id: int, path: str, node: Versioned, version: int) -> None:
        """Every format and every error, through the full decoder."""
        try:
            metadata: LedgerMetadata | None = decode_ledger_metadata(
                node.data, ledger_id=ledger_id, path=path
            )
        except CorruptMetadata as e:
            metadata, problem = None, e.problem
        self._znode(ledger_id, node, version)
        if metadata is None:
            for column in _CONTENT:
                self.columns[column].append(None)
            self._errors(problem or "undecodable")
            return
        self._states(metadata.state.name)
        self._lengths(metadata.length)
        self._last_entries(metadata.last_entry_id)
        self._ensembles(metadata.ensemble_size)
        self._meta_ctimes(metadata.ctime)
        self._formats(metadata.format_version)
        self._custom(dict(metadata.custom_metadata))

    def arrow(self, struct: pa.StructType) -> pa.StructArray:
        """The rows as one Arrow struct array of `struct` (the contract's `bk_ledgers` type)."""
        n = len(self)
        fields = [struct.field(i) for i in range(struct.num_fields)]
        arrays = []
        for field in fields:
            if field.name == "subtree":
                arrays.append(pa.array([self.subtree] * n, field.type))
            elif field.name in self.columns:
                arrays.append(pa.array(self.columns[field.name], field.type))
            else:  # a column the contract has and this table never fills
                arrays.append(pa.nulls(n, field.type))
        return pa.StructArray.from_arrays(arrays, fields=fields)

    def rows(self) -> list[Row]:
        """The same rows as dicts (the shape `run_unit` returns to its callers)."""
        names = [name for name in COLUMNS if name != "subtree"]
        values = zip(*(self.columns[name] for name in names), strict=True)
        return [{"subtree": self.subtree, **dict(zip(names, row, strict=True))} for row in values]


def _fast_v3(data: bytes) -> _bk.LedgerMetadataFormat | None:
    """The parsed message of a well-formed v3 znode; None for anything the full decoder
    should look at (a length prefix of 3+ bytes, a short body, garbage, missing fields)."""
    first = data[_V3_BODY] if len(data) > _V3_BODY else 0x80
    if first < 0x80:
        size, start = first, _V3_BODY + 1
    elif len(data) > _V3_BODY + 1 and data[_V3_BODY + 1] < 0x80:
        size, start = (first & 0x7F) | (data[_V3_BODY + 1] << 7), _V3_BODY + 2
    else:
        return None
    if len(data) - start < size:
        return None
    try:
        fmt = _parse(data[start : start + size])
    except _message.DecodeError:
        return None
    return fmt if fmt.IsInitialized() else None
