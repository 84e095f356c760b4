"""Settings the services must agree on, published to ZooKeeper and checked at start.

The marker, the verifier and the deleter run as separate processes, possibly on separate
hosts; a setting that is safe in each alone can leak in combination (a marker that sends
offload-tier intents to a verifier that allows no bucket dead-letters every one, and the
objects stay). Every instance publishes its safety-relevant settings as JSON in an
*ephemeral* znode `<root>/<service>/<instance>` (gone when the instance stops or its session
expires), reads its peers', and refuses to start on a leaking combination: `UnsafeSettings`
names the two instances and the variables to change. Publishing comes first and the check
after it, so of two instances starting together at least one sees the other. A peer that
publishes a conflicting combination later is reported by `watch` (a warning log line and the
`tombstone_settings_conflicts` gauge), since a running service cannot take back work it did.

Refused combinations (each pairs a marker with a verifier or a deleter):
- the marker sends OFFLOAD_LEDGER intents and a verifier allows no bucket, or not the
  marker's default bucket;
- the marker and a verifier resolve Pulsar 2.1 contexts to different default buckets;
- a verifier allows a bucket a deleter may not delete in (every DELETE there dead-letters);
- a verifier allows an S3 endpoint a deleter may not delete at (the same);
- the marker's retry window is not shorter than a deleter's whole retry budget (the shortest
  time from first attempt to dead letter): a PDLI could be dead-lettered while the marker
  still counts on it instead of re-sending;
- the marker writes a cluster name into its PDLIs that is not a verifier's cluster: the
  verifier never acts on another cluster's PDLI, so every intent would be dead-lettered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import structlog

from services.core.errors import ConfigError
from services.core.metrics import Metrics
from services.metadata.errors import NoNode, StoreUnavailable

_log = structlog.get_logger(__name__)

ROOT = "/tombstone/settings"
SERVICES = ("marker", "verifier", "deleter")
CHECK_INTERVAL = timedelta(seconds=30)


class UnsafeSettings(ConfigError):
    """This instance's settings and a running peer's would leak together."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("unsafe beside a running peer", "; ".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True)
class Published:
    """What one instance publishes (fields that do not apply to its service stay None)."""

    service: str
    instance: str
    offload_tier: bool | None = None
    """marker: whether it sends OFFLOAD_LEDGER intents."""
    default_bucket: str | None = None
    """marker, verifier: TOMBSTONE_OFFLOAD_DEFAULT_BUCKET."""
    allowed_buckets: tuple[str, ...] | None = None
    """verifier, deleter: TOMBSTONE_S3_ALLOWED_BUCKETS."""
    allowed_endpoints: tuple[str, ...] | None = None
    """verifier, deleter: the canonical S3 endpoints it may use (TOMBSTONE_S3_ENDPOINT_URL and
    TOMBSTONE_S3_ALLOWED_ENDPOINTS); None from a peer that predates them."""
    retry_window_s: float | None = None
    """marker: TOMBSTONE_MARKER_RETRY_WINDOW."""
    retry_budget_s: float | None = None
    """deleter: the shortest time from a PDLI's first attempt to its dead letter."""
    cluster: str | None = None
    """marker: the cluster it writes into PDLIs; verifier: its own (None: not configured)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Published:
        raw = json.loads(data)
        buckets = raw.get("allowed_buckets")
        endpoints = raw.get("allowed_endpoints")
        return cls(
            service=str(raw["service"]),
            instance=str(raw["instance"]),
            offload_tier=raw.get("offload_tier"),
            default_bucket=raw.get("default_bucket"),
            allowed_buckets=None if buckets is None else tuple(buckets),
            allowed_endpoints=None if endpoints is None else tuple(endpoints),
            retry_window_s=raw.get("retry_window_s"),
            retry_budget_s=raw.get("retry_budget_s"),
            cluster=raw.get("cluster"),
            extra=dict(raw.get("extra") or {}),
        )


def retry_budget(
    *, initial: timedelta, max_delay: timedelta, multiplier: float, jitter: float, retries: int
) -> timedelta:
    """The shortest total backoff of `retries` retries (each delay at its lowest jitter)."""
    total = 0.0
    for attempt in range(1, retries + 1):
        base = initial.total_seconds() * multiplier ** (attempt - 1)
        total += min(base, max_delay.total_seconds()) * (1 - jitter)
    return timedelta(seconds=total)


def conflicts(mine: Published, peers: Sequence[Published]) -> list[str]:
    """Every leaking combination of `mine` with one of `peers` (or with itself)."""
    problems = _alone(mine)
    for peer in peers:
        if peer.instance == mine.instance:
            continue
        pair = {mine.service: mine, peer.service: peer}
        marker, verifier, deleter = (pair.get(s) for s in SERVICES)
        if marker is not None and verifier is not None:
            problems += _marker_verifier(marker, verifier)
        if marker is not None and deleter is not None:
            problems += _marker_deleter(marker, deleter)
        if verifier is not None and deleter is not None:
            problems += _verifier_deleter(verifier, deleter)
    return problems


def _alone(mine: Published) -> list[str]:
    allowed = set(mine.allowed_buckets or ())
    if mine.service == "verifier" and mine.default_bucket and mine.default_bucket not in allowed:
        return [
            f"verifier {mine.instance}: TOMBSTONE_OFFLOAD_DEFAULT_BUCKET={mine.default_bucket} "
            "is not in TOMBSTONE_S3_ALLOWED_BUCKETS (every Pulsar 2.1 offload would be refused)"
        ]
    return []


def _marker_verifier(marker: Published, verifier: Published) -> list[str]:
    allowed = set(verifier.allowed_buckets or ())
    who = f"marker {marker.instance} / verifier {verifier.instance}"
    problems = []
    if marker.offload_tier and not allowed:
        problems.append(
            f"{who}: the marker sends offload-tier intents but the verifier allows no bucket "
            "(set TOMBSTONE_S3_ALLOWED_BUCKETS on the verifier, or "
            "TOMBSTONE_MARKER_OFFLOAD_TIER=false if the cluster does not offload)"
        )
    elif marker.offload_tier and marker.default_bucket and marker.default_bucket not in allowed:
        problems.append(
            f"{who}: the marker's default offload bucket {marker.default_bucket!r} is not in "
            "the verifier's TOMBSTONE_S3_ALLOWED_BUCKETS"
        )
    if verifier.cluster and marker.cluster is not None and marker.cluster != verifier.cluster:
        problems.append(
            f"{who}: the marker writes cluster {marker.cluster!r} into PDLIs, the verifier is "
            f"cluster {verifier.cluster!r} and acts on no other cluster's (set "
            "TOMBSTONE_MARKER_CLUSTER and TOMBSTONE_VERIFIER_CLUSTER_NAME alike)"
        )
    if (
        marker.default_bucket
        and verifier.default_bucket
        and marker.default_bucket != verifier.default_bucket
    ):
        problems.append(
            f"{who}: TOMBSTONE_OFFLOAD_DEFAULT_BUCKET differs ({marker.default_bucket!r} vs "
            f"{verifier.default_bucket!r})"
        )
    return problems


def _marker_deleter(marker: Published, deleter: Published) -> list[str]:
    window, budget = marker.retry_window_s, deleter.retry_budget_s
    if window is None or budget is None or window < budget:
        return []
    return [
        f"marker {marker.instance} / deleter {deleter.instance}: "
        f"TOMBSTONE_MARKER_RETRY_WINDOW ({window:g}s) is not shorter than the deleter's "
        f"retry budget ({budget:g}s, TOMBSTONE_DELETER_MAX_RETRIES and delays): a PDLI could "
        "be dead-lettered while its marking may still land"
    ]


def _verifier_deleter(verifier: Published, deleter: Published) -> list[str]:
    problems = []
    who = f"verifier {verifier.instance} / deleter {deleter.instance}"
    missing = sorted(set(verifier.allowed_buckets or ()) - set(deleter.allowed_buckets or ()))
    if missing:
        problems.append(
            f"{who}: the verifier approves deletes in {', '.join(missing)} where the deleter "
            "may not delete (TOMBSTONE_S3_ALLOWED_BUCKETS of the deleter)"
        )
    # A peer that publishes no endpoints predates them: it uses only its configured one,
    # which it does not say, so nothing can be compared.
    if verifier.allowed_endpoints is not None and deleter.allowed_endpoints is not None:
        away = sorted(set(verifier.allowed_endpoints) - set(deleter.allowed_endpoints))
        if away:
            problems.append(
                f"{who}: the verifier approves deletes at {', '.join(away)} where the deleter "
                "may not delete (TOMBSTONE_S3_ENDPOINT_URL and TOMBSTONE_S3_ALLOWED_ENDPOINTS "
                "of the deleter)"
            )
    return problems


class SettingsStore(Protocol):
    """The few ZooKeeper operations needed (`services.metadata.zookeeper.store.ZkMetadataStore`)."""

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Any: ...

    async def exists(self, path: str) -> Any: ...

    async def get_children(self, path: str) -> list[str]: ...

    async def get(self, path: str) -> Any: ...

    async def delete(self, path: str, *, version: int) -> None: ...


class PeerSettings:
    """One instance's entry on the settings board and its view of the peers."""

    def __init__(
        self,
        store: SettingsStore,
        mine: Published,
        *,
        root: str = ROOT,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._root = root
        # A random suffix: two instances configured with the same id must not share a node.
        self.path = f"{root}/{mine.service}/{mine.instance}-{secrets.token_hex(4)}"
        self.mine = mine
        self._gauge = (
            metrics.gauge("settings_conflicts", "Leaking setting combinations with running peers")
            if metrics is not None
            else None
        )

    async def join(self) -> None:
        """Publish, then check the peers; `UnsafeSettings` (nothing left published) on a
        leaking combination."""
        await self._publish()
        problems = conflicts(self.mine, await self.peers())
        if problems:
            await self.leave()
            raise UnsafeSettings(problems)
        _log.info("settings_published", path=self.path)

    async def leave(self) -> None:
        """Remove this instance's entry (its session's end would, a little later). A store
        that cannot take the delete now (down, or paused by a metadata migration) leaves the
        entry to the session's end: it is ephemeral."""
        with contextlib.suppress(NoNode, StoreUnavailable):
            await self._store.delete(self.path, version=-1)

    async def check(self) -> list[str]:
        """Re-publish if the session lost the node, then the current conflicts (logged)."""
        if await self._store.exists(self.path) is None:
            await self._publish()
        problems = conflicts(self.mine, await self.peers())
        if self._gauge is not None:
            self._gauge.set(len(problems))
        for problem in problems:
            _log.warning("settings_conflict", problem=problem)
        return problems

    async def watch(self, stop: asyncio.Event, interval: timedelta = CHECK_INTERVAL) -> None:
        """`check` every `interval` until `stop` is set; store errors are logged and retried."""
        while not stop.is_set():
            try:
                await self.check()
            except Exception as e:  # unknown is not a conflict; the next round tries again
                _log.warning("settings_check_failed", error=f"{type(e).__name__}: {e}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval.total_seconds())

    async def peers(self) -> list[Published]:
        """Every published instance of every service (this one included)."""
        found = []
        for service in SERVICES:
            parent = f"{self._root}/{service}"
            if await self._store.exists(parent) is None:
                continue
            for child in await self._store.get_children(parent):
                data = await self._read(f"{parent}/{child}")
                if data is not None:
                    found.append(Published.decode(data))
        return found

    async def _read(self, path: str) -> bytes | None:
        try:
            return bytes((await self._store.get(path)).data)
        except NoNode:  # the peer stopped between the listing and the read
            return None

    async def _publish(self) -> None:
        await self._store.create(self.path, self.mine.encode(), make_parents=True, ephemeral=True)
