"""What the typed stores return: a decoded value with the znode version and times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from services.metadata.ledger_metadata import LedgerMetadata

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Record(Generic[T]):
    """A decoded znode: `version` is the CAS token for the next write or delete."""

    path: str
    value: T
    version: int
    ctime_ms: int
    mtime_ms: int
    mzxid: int


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """A ledger's metadata, its znode version and its creation time."""

    path: str
    metadata: LedgerMetadata
    version: int
    ctime_ms: int
    """The ledger's creation time: its stored `ctime` if any, else the znode's (BK's rule)."""
    znode_ctime_ms: int
    mzxid: int

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id
