"""In-memory fakes behind the verifier's ports, for property tests that run thousands of
decisions in seconds. They model the worst case for aliasing: a path or key is a plain
string, so any spelling that is not exactly the live one reads as absent (a real ZooKeeper
would refuse some of them, a filesystem would resolve them)."""

from __future__ import annotations

from collections.abc import Sequence

from services.core.s3_locations import S3Location
from services.verifier.ports import ObjectHead, WatchCallback, Znode


class MemoryZnodes:
    """`ZnodeStore` over a dict of path → znode; nothing changes it during a test, so watches
    are accepted and never fire."""

    def __init__(self) -> None:
        self.nodes: dict[str, Znode] = {}

    def put(self, path: str, data: bytes, *, version: int = 0, ctime_ms: int = 1) -> None:
        self.nodes[path] = Znode(data, version, ctime_ms)

    async def read(self, path: str, *, watch: WatchCallback | None = None) -> Znode | None:
        return self.nodes.get(path)

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        return [self.nodes.get(path) for path in paths]

    def unwatch(self, path: str, watch: WatchCallback) -> None:
        return None

    async def watch_node(self, path: str, watch: WatchCallback) -> bool:
        return path in self.nodes

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str] | None:
        if path not in self.nodes:
            return None
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    async def create(self, path: str, data: bytes) -> str:
        if path in self.nodes:
            raise FileExistsError(path)
        self.put(path, data)
        return path

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        path = f"{prefix}{len(self.nodes):010d}"
        self.put(path, data)
        return path

    async def delete(self, path: str) -> None:
        self.nodes.pop(path, None)

    async def delete_all(self, paths: Sequence[str]) -> None:
        for path in paths:
            self.nodes.pop(path, None)

    def epoch(self) -> int:
        return 0


class MemoryObjects:
    """`ObjectStore` over a dict of (bucket, key) → head."""

    def __init__(self) -> None:
        self.heads: dict[tuple[str, str], ObjectHead] = {}

    async def head(
        self, *, bucket: str, key: str, location: S3Location | None = None
    ) -> ObjectHead | None:
        return self.heads.get((bucket, key))

    async def read_range(
        self,
        *,
        bucket: str,
        key: str,
        start: int,
        length: int,
        location: S3Location | None = None,
    ) -> bytes | None:
        # No object bodies are modelled: an index that cannot be read proves no owner.
        return None if (bucket, key) not in self.heads else b""


class NothingBelieved:
    """An empty believed set: every decision runs the full metadata match."""

    def __contains__(self, key: int) -> bool:
        return False

    async def refresh(self) -> None:
        return None
