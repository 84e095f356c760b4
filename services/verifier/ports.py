"""The verifier's ports: what it needs from the metadata store and the object store.

The decision and the caches talk only to these Protocols. The adapters (`_zk.py` for aiozk,
`_s3.py` for aiobotocore) are the only modules that import those libraries; unit tests put
fakes behind the same Protocols. Every method raises `services.core.errors.Unavailable` when
the answer is unknown (timeout, lost connection): only a returned `None` means "absent".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.core.s3_locations import S3Location

WatchCallback = Callable[[str], None]
"""Called (on the event loop) with the path when a watched znode changes or disappears."""


@dataclass(frozen=True, slots=True)
class Znode:
    """A znode's data with the two parts of its stat the verifier uses."""

    data: bytes
    version: int
    ctime_ms: int
    cversion: int = 0
    """Changes to the children: the number the next sequential child gets (`read_many`)."""
    mtime_ms: int = 0
    """When the znode was last written (the ZooKeeper server's clock); 0 when unknown."""


class ZnodeStore(Protocol):
    """Reads (with one-shot watches) and the few writes the believed set needs.

    A watch also fires when the connection or session is lost (then the epoch changes too).
    """

    async def read(self, path: str, *, watch: WatchCallback | None = None) -> Znode | None:
        """The znode, or None when a successful read showed it absent.

        With `watch`, a one-shot data watch is set by the same read: `watch(path)` runs once
        when the znode changes or is deleted. No watch is left when the znode is absent.
        """
        ...

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        """Each znode (no watches), read in as few round trips as the store allows.

        Per path, in order: the znode, None when a successful read showed it absent, or the
        error (`Unavailable` when unknown) that `read` would have raised for it.
        """
        ...

    def unwatch(self, path: str, watch: WatchCallback) -> None:
        """Forget a callback registered by `read` (the server-side watch fires harmlessly)."""
        ...

    async def watch_node(self, path: str, watch: WatchCallback) -> bool:
        """Watch `path` itself (create, data change, delete); True when it exists now."""
        ...

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str] | None:
        """Child names, or None when the znode is absent.

        With `watch`, a one-shot children watch is set by the same read: `watch(path)` runs
        once when a child is created or deleted, or the znode is deleted.
        """
        ...

    async def create(self, path: str, data: bytes) -> str:
        """Create `path` (parents as needed); return it. Fails if it exists."""
        ...

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        """Create `<prefix><10-digit sequence number>` (parents as needed); return its path.
        An unanswered create is not resent: `Unavailable` (it may or may not exist)."""
        ...

    async def delete(self, path: str) -> None:
        """Delete unconditionally; an absent znode is not an error."""
        ...

    async def delete_all(self, paths: Sequence[str]) -> None:
        """Delete each path unconditionally, many per round trip; absent ones are not an
        error. Raises the first other failure (the others may or may not be deleted)."""
        ...

    def epoch(self) -> int:
        """Changes whenever watches may have been lost (reconnection, session expiry).

        A cache must not serve entries read under another epoch: their watches may be gone.
        """
        ...


async def read_each(store: ZnodeStore, paths: Sequence[str]) -> list[Znode | Exception | None]:
    """`read_many` as one `read` per path: for stores without a batch read."""
    results: list[Znode | Exception | None] = []
    for path in paths:
        try:
            results.append(await store.read(path))
        except Exception as e:
            results.append(e)
    return results


@dataclass(frozen=True, slots=True)
class ObjectHead:
    """What a HEAD of an existing object tells: user metadata (lowercase keys) and age."""

    user_metadata: Mapping[str, str]
    last_modified_ms: int
    size: int | None = None
    """Content-Length in bytes; None when the store did not say."""


class ObjectStore(Protocol):
    """HEAD and ranged reads on offloaded objects."""

    async def head(
        self, *, bucket: str, key: str, location: S3Location | None = None
    ) -> ObjectHead | None:
        """The object's head, or None when S3 answered 404 (and only then)."""
        ...

    async def read_range(
        self,
        *,
        bucket: str,
        key: str,
        start: int,
        length: int,
        location: S3Location | None = None,
    ) -> bytes | None:
        """Up to `length` bytes from offset `start` (fewer at the object's end), or None when
        S3 answered 404 (and only then). Used for an index object's header and metadata."""
        ...
