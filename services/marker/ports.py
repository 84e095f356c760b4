"""The marker's ports besides the system-topic publisher (`services.systopic`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class VersionedData(Protocol):
    @property
    def data(self) -> bytes: ...

    @property
    def version(self) -> int: ...


class OwnerStore(Protocol):
    """Versioned reads and compare-and-set writes of owner znodes; the subset of
    `services.metadata`'s `MetadataStore` the marker uses (its ZooKeeper store fits as is).

    Errors: `NotFound` (a successful read showed absence), `Conflict` (the version moved),
    `Unavailable` (unknown: for a write, it may or may not have been applied), `CorruptData`.
    """

    async def get(self, path: str) -> VersionedData:
        """The znode's data and version."""
        ...

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        """Set the data if the version is still `version`; returns the new version."""
        ...

    async def delete(self, path: str, *, version: int) -> None:
        """Delete the znode if the version is still `version`."""
        ...


class Believer(Protocol):
    """Reports unlinked ledgers to the verifier's believed set; never blocks, never raises."""

    def submit(self, payloads: Sequence[bytes]) -> None:
        """Report these serialized PDLIs (decoded off the Mark's path)."""
        ...
