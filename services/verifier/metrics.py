"""The verifier's metrics and its verdict log lines (every verdict, and MISMATCH as security).

Metric names (Prometheus adds `_total` to counters):
- `tombstone_verifier_verdicts_total{decision,code}`: every verdict by decision and reason code;
- `tombstone_verifier_mismatches_total{code,tier,component}`: MISMATCH verdicts (a burst of
  forged or stale PDLIs shows here first);
- `tombstone_verifier_metadata_reads_total{kind}`: store reads (owner, ledger, believed, other)
  and object HEADs (`object_head`);
- `tombstone_verifier_owner_cache_lookups_total{result}`: hit or miss (the hit ratio is the
  recording rule `tombstone:verifier_owner_cache_hit_ratio:rate5m`, a ratio of rates, never a
  gauge averaged since start); `..._owner_cache_entries`;
- `tombstone_verifier_believed_entries`, `tombstone_verifier_believed_batches`,
  `tombstone_verifier_believed_buckets`;
- `tombstone_verifier_signatures_total{result}`: signature checks by result (valid, unsigned,
  unknown_key, bad_signature; `signatures.py` writes the security line of a rejection);
- `tombstone_verifier_concurrency_limit{resource}`: the adaptive limit of reads at once on
  ZooKeeper and on S3 (`limited.py`).
"""

from __future__ import annotations

import logging
from collections import Counter as _Tally
from collections.abc import Callable, Sequence

import structlog
from prometheus_client import Counter

from services.core.metrics import Metrics
from services.core.s3_locations import S3Location
from services.core.signing import SignatureStatus
from services.verifier.model import SkipReason, Target, Verdict
from services.verifier.ports import ObjectHead, ObjectStore, WatchCallback, Znode, ZnodeStore
from tombstone.v1 import pending_delete_pb2 as _pb

_log = structlog.get_logger("tombstone.verifier")
_security = structlog.get_logger("tombstone.security")


class VerifierMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.verdicts = metrics.counter(
            "verifier_verdicts", "Verdicts by decision and reason code.", ["decision", "code"]
        )
        self.mismatches = metrics.counter(
            "verifier_mismatches",
            "MISMATCH verdicts: PDLIs whose stored identity differs.",
            ["code", "tier", "component"],
        )
        self.reads = metrics.counter(
            "verifier_metadata_reads", "Metadata-store reads and object HEADs.", ["kind"]
        )
        self.cache = metrics.counter(
            "verifier_owner_cache_lookups", "Owner-cache lookups by result.", ["result"]
        )
        self.cache_entries = metrics.gauge("verifier_owner_cache_entries", "Cached owners.")
        self.believed_entries = metrics.gauge("verifier_believed_entries", "Believed-set size.")
        self.believed_batches = metrics.gauge("verifier_believed_batches", "Batch znodes held.")
        self.believed_buckets = metrics.gauge(
            "verifier_believed_buckets", "Bucket znodes of the believed set held."
        )
        self.signatures = metrics.counter(
            "verifier_signatures", "PDLI signature checks by result.", ["result"]
        )
        self.concurrency_limit = metrics.gauge(
            "verifier_concurrency_limit",
            "Current adaptive limit of reads at once, by dependency (zookeeper, s3).",
            ["resource"],
        )
        self._signature_children = {s: self.signatures.labels(s.value) for s in SignatureStatus}
        self._hit = self.cache.labels("hit")
        self._miss = self.cache.labels("miss")
        # Label children looked up once: `labels()` takes a lock and builds a key each call.
        self._verdict_children: dict[tuple[str, str], Counter] = {}

    def on_signature(self, status: SignatureStatus, _pdli: _pb.PendingDeleteLedgerInfo) -> None:
        self._signature_children[status].inc()

    def on_cache_lookup(self, _path: str, hit: bool) -> None:
        (self._hit if hit else self._miss).inc()

    def observe(
        self, verdict: Verdict, target: Target | None, pdli: _pb.PendingDeleteLedgerInfo
    ) -> None:
        """Count and log one verdict; a MISMATCH also writes a security line."""
        key = (verdict.decision.value, verdict.code)
        child = self._verdict_children.get(key)
        if child is None:
            child = self._verdict_children[key] = self.verdicts.labels(*key)
        child.inc()
        mismatch = verdict.skip_reason is SkipReason.MISMATCH
        verbose = _log.is_enabled_for(logging.INFO)
        if not (mismatch or verbose):
            return  # the verdict line is filtered out: do not even build it
        fields = _log_fields(verdict, target, pdli)
        if mismatch:
            tier = target.tier.value if target else "?"
            component = target.component.value if target else "?"
            self.mismatches.labels(verdict.code, tier, component).inc()
            differences = [
                {"field": d.field, "expected": d.expected, "actual": d.actual}
                for d in verdict.differences
            ]
            _security.warning("verify_mismatch", differences=differences, **fields)
        if verbose:
            _log.info("verdict", **fields)


def _log_fields(
    verdict: Verdict, target: Target | None, pdli: _pb.PendingDeleteLedgerInfo
) -> dict[str, object]:
    return {
        "ledger_id": pdli.ledger_id if pdli.HasField("ledger_id") else None,
        "tier": target.tier.value if target else _tier_name(pdli.ledger_type),
        "owner": target.owner_path if target else None,
        "source": target.source.value if target else None,
        "marker_id": pdli.marker_id,
        "request_id": pdli.request_id,
        "decision": verdict.label,
        "code": verdict.code,
        "reason": verdict.reason,
        "believed": verdict.believed,
    }


def _tier_name(ledger_type: int) -> str:
    """The PDLI's tier for a log line; proto3 enums are open, so a number may have no name."""
    if ledger_type in _pb.LedgerType.values():
        return _pb.LedgerType.Name(ledger_type)  # type: ignore[arg-type]
    return str(ledger_type)


_READ_KINDS = ("ledger", "owner", "believed", "children", "other")


def _read_kind(path: str, ledgers_root: str, believed_root: str) -> str:
    if path.startswith(ledgers_root):
        return "ledger"
    if path.startswith(("/managed-ledgers/", "/schemas/")):
        return "owner"
    if path.startswith(believed_root):
        return "believed"
    return "other"


class CountingZnodeStore:
    """Counts reads by kind on the way to the real store."""

    def __init__(
        self, inner: ZnodeStore, metrics: VerifierMetrics, *, ledgers_root: str, believed_root: str
    ) -> None:
        self._inner = inner
        children = {kind: metrics.reads.labels(kind) for kind in _READ_KINDS}
        self._children = children
        self._count: Callable[[str], None] = lambda kind: children[kind].inc()
        self._ledgers = ledgers_root.rstrip("/") + "/"
        self._believed = believed_root

    async def read(self, path: str, *, watch: WatchCallback | None = None) -> Znode | None:
        self._count(_read_kind(path, self._ledgers, self._believed))
        return await self._inner.read(path, watch=watch)

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        # One increment per kind, not per path: a batch reads hundreds of ledger paths.
        counts = _Tally(_read_kind(path, self._ledgers, self._believed) for path in paths)
        for kind, count in counts.items():
            self._children[kind].inc(count)
        return await self._inner.read_many(paths)

    def unwatch(self, path: str, watch: WatchCallback) -> None:
        self._inner.unwatch(path, watch)

    async def watch_node(self, path: str, watch: WatchCallback) -> bool:
        return await self._inner.watch_node(path, watch)

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str] | None:
        self._count("children")
        return await self._inner.children(path, watch=watch)

    async def create(self, path: str, data: bytes) -> str:
        return await self._inner.create(path, data)

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        return await self._inner.create_sequential(prefix, data)

    async def delete(self, path: str) -> None:
        await self._inner.delete(path)

    async def delete_all(self, paths: Sequence[str]) -> None:
        await self._inner.delete_all(paths)

    def epoch(self) -> int:
        return self._inner.epoch()


class CountingObjectStore:
    def __init__(self, inner: ObjectStore, metrics: VerifierMetrics) -> None:
        self._inner = inner
        self._heads = metrics.reads.labels("object_head")
        self._ranges = metrics.reads.labels("object_range")

    async def head(
        self, *, bucket: str, key: str, location: S3Location | None = None
    ) -> ObjectHead | None:
        self._heads.inc()
        return await self._inner.head(bucket=bucket, key=key, location=location)

    async def read_range(
        self,
        *,
        bucket: str,
        key: str,
        start: int,
        length: int,
        location: S3Location | None = None,
    ) -> bytes | None:
        self._ranges.inc()
        return await self._inner.read_range(
            bucket=bucket, key=key, start=start, length=length, location=location
        )
