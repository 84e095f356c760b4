"""Planted bugs, each switched on at run time by swapping a function or a constant of the
real module (no code is edited; each is undone when the run ends).

`make sim-mutants` runs each until the simulation finds it (docs/simulation.md has the table).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import services.deleter.backends.zookeeper as zk_backend
import services.deleter.handling as handling
import services.marker.owners as owners
import services.metadata.pulsar_names as pulsar_names
import services.verifier.decision as decision
import services.verifier.store_adapter as store_adapter
import services.verifier.validation as validation
from services.core.errors import Unavailable
from services.metadata.store import ANY_VERSION
from services.systopic.retry import PROP_RETRY_COUNT
from services.verifier.matching import has_pulsar_metadata
from services.verifier.model import SkipReason, skip
from tombstone.v1 import verifier_pb2 as _vf


def _patch(target: Any, name: str, value: Any) -> Callable[[], None]:
    old = getattr(target, name)
    setattr(target, name, value)
    return lambda: setattr(target, name, old)


def _ack_unsettled_skips() -> Callable[[], None]:
    """The deleter acknowledges SKIP INVALID and MISMATCH instead of dead-lettering them."""
    settled = handling._SETTLED_SKIPS | {_vf.INVALID, _vf.MISMATCH}
    return _patch(handling, "_SETTLED_SKIPS", settled)


def _timeout_as_absent() -> Callable[[], None]:
    """The verifier reads a znode that did not answer as absent."""
    original = store_adapter.MetadataZnodeStore.read

    async def read(self: Any, path: str, *, watch: Any = None) -> Any:
        try:
            return await original(self, path, watch=watch)
        except Unavailable:
            return None

    return _patch(store_adapter.MetadataZnodeStore, "read", read)


def _no_fence_token() -> Callable[[], None]:
    """PIP-186's original rule: a listed ledger is SKIP IN_USE whatever the owner's version."""
    original = decision._in_use

    def in_use(target: Any, owner: Any, *, fence: bool = True) -> Any:
        return original(target, owner, fence=False)

    return _patch(decision, "_in_use", in_use)


def _any_version_delete() -> Callable[[], None]:
    """The deleter removes the ledger znode at any version, not the one the verifier saw."""
    original = zk_backend.ZooKeeperLedgerDeleter._delete

    async def delete(self: Any, path: str, version: int) -> Any:
        return await original(self, path, ANY_VERSION)

    return _patch(zk_backend.ZooKeeperLedgerDeleter, "_delete", delete)


def _ack_before_delete() -> Callable[[], None]:
    """The deleter acknowledges a message as soon as it is received, then works on it."""
    from services.deleter.pool import DeleterPool

    original = DeleterPool._process

    async def process(self: Any, source: Any, tracker: Any, key: Any) -> None:
        await self._handler.acknowledge(source, tracker.message)
        await original(self, source, tracker, key)

    return _patch(DeleterPool, "_process", process)


def _open_in_use() -> Callable[[], None]:
    """An OPEN ledger is taken as in use (SKIP IN_USE, acknowledged)."""

    def verdict(*args: Any, **kwargs: Any) -> Any:
        return skip(SkipReason.IN_USE, "open", "ledger is OPEN")

    return _patch(decision, "open_ledger_verdict", verdict)


def _drop_retry_count() -> Callable[[], None]:
    """The retry copy loses its retry count: every redelivery starts the budget afresh."""
    original = getattr(handling, "retry_message")  # noqa: B009 - not re-exported

    def retry_message(*args: Any, **kwargs: Any) -> Any:
        message = original(*args, **kwargs)
        properties = {k: v for k, v in message.properties.items() if k != PROP_RETRY_COUNT}
        return message._replace(properties=properties)

    return _patch(handling, "retry_message", retry_message)


def _follower_index_first() -> Callable[[], None]:
    """The follower moves its index forward before its PDLIs were accepted: a change whose
    publish failed is read again, but diffed against the entry it already became."""
    from services.marker.follower.follower import Follower

    original = Follower._publish

    async def publish(self: Any, changes: Any, *, replay: bool) -> list[str]:
        for change in changes:
            self.index.put(change.path, change.entry)
        return await original(self, changes, replay=replay)

    return _patch(Follower, "_publish", publish)


def _dot_segments() -> Callable[[], None]:
    """Names with `.` or `..` segments are accepted as canonical."""
    return _patch(pulsar_names, "_DOT_SEGMENTS", frozenset())


def _clear_name_caches() -> None:
    """The marker and the verifier cache names they accepted: what a mutant let through must
    not stay accepted after it (nor a plain run's acceptances leak into a mutant's)."""
    owners._topic_of.cache_clear()
    validation._owner_names.cache_clear()


def _hybrid_path_only() -> Callable[[], None]:
    """A ledger is looked for at Pulsar's hybrid path only, whatever `LAYOUT` says: one
    written by BookKeeper's own ledger manager (a long-hierarchical or flat layout) reads as
    absent."""
    from services.metadata.paths import LedgerLayout, LedgerLocations, LedgerPaths

    def rules(self: Any) -> tuple[LedgerPaths, ...]:
        return (LedgerPaths(self.root, LedgerLayout.HIERARCHICAL),)

    return _patch(LedgerLocations, "_rules", rules)


def _belief_skips_match() -> Callable[[], None]:
    """A believed PDLI skips the whole metadata match, metadata naming another owner too.
    The incarnation check (a ledger created after its intent) is off as well: it stops the
    simulation's re-created ids before the metadata match is reached, so with it on this
    mutant could not be told from the correct rule."""
    original = decision.DecisionEngine._metadata_mismatch

    def mismatch(self: Any, target: Any, owner: Any, metadata: Any, believed: bool) -> Any:
        if believed and has_pulsar_metadata(metadata):
            return None
        return original(self, target, owner, metadata, believed)

    undo_match = _patch(decision.DecisionEngine, "_metadata_mismatch", mismatch)
    undo_incarnation = _patch(decision, "other_incarnation", lambda *args, **kwargs: None)

    def undo() -> None:
        undo_incarnation()
        undo_match()

    return undo


def _absent_owner_anywhere() -> Callable[[], None]:
    """ "Absent owner anywhere counts": the declared neighbours and the namespace check are
    ignored, so an owner absent here reads as absent everywhere."""
    from services.verifier.clusters import ClusterScope

    original = ClusterScope.elsewhere

    async def elsewhere(self: Any, target: Any, owner: Any, **kwargs: Any) -> Any:
        alone = copy.copy(self)
        alone.neighbours = ()
        return await original(alone, target, owner, **kwargs)

    async def namespace_unknown(self: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        return None

    undo_elsewhere = _patch(ClusterScope, "elsewhere", elsewhere)
    undo_namespace = _patch(ClusterScope, "_namespace_unknown", namespace_unknown)

    def undo() -> None:
        undo_namespace()
        undo_elsewhere()

    return undo


def _cluster_field_ignored() -> Callable[[], None]:
    """The PDLI's `cluster` is never compared with ours."""
    from services.verifier.clusters import ClusterScope

    return _patch(ClusterScope, "check_cluster", lambda self, target: None)


def _shadow_scan_only() -> Callable[[], None]:
    """The shadow index is trusted whatever its age: only the periodic scan refreshes it."""
    from services.verifier.shadows import ShadowIndex

    return _patch(ShadowIndex, "fresh_since", lambda self, ms: True)


def _publish_without_subscription() -> Callable[[], None]:
    """The marker and the follower publish whether or not the deleters' subscription exists."""
    from services.systopic.subscription_watch import SubscriptionWatch

    undo_ready = _patch(SubscriptionWatch, "ready", property(lambda self: True))
    undo_reason = _patch(SubscriptionWatch, "unready_reason", lambda self: None)

    def undo() -> None:
        undo_reason()
        undo_ready()

    return undo


def _property_reference_ignored() -> Callable[[], None]:
    """The verifier reads cursor znodes without their properties: a compacted ledger or a
    bucket snapshot a cursor property references counts as unreferenced. Swapped wherever a
    verifier module holds the decoder, so it holds whichever module reads the cursor."""
    import importlib
    import pkgutil
    import sys

    import services.verifier as verifier
    from services.metadata.pulsar_formats import decode_cursor_info

    for module in pkgutil.walk_packages(verifier.__path__, "services.verifier."):
        importlib.import_module(module.name)

    def without_properties(data: bytes, *, path: str) -> Any:
        info = decode_cursor_info(data, path=path)
        info.ClearField("properties")
        info.ClearField("cursorProperties")
        return info

    undo = [
        _patch(module, "decode_cursor_info", without_properties)
        for name, module in sorted(sys.modules.items())
        if name.startswith("services.verifier") and hasattr(module, "decode_cursor_info")
    ]

    def undo_all() -> None:
        for step in reversed(undo):
            step()

    return undo_all


def _no_bucket_allow_list() -> Callable[[], None]:
    """Every bucket is allowed (applied by the run as its allow-list: see `applied`)."""
    return lambda: None


MUTANTS: dict[str, Callable[[], Callable[[], None]]] = {
    "ack-invalid-mismatch": _ack_unsettled_skips,
    "timeout-as-absent": _timeout_as_absent,
    "no-fence-token": _no_fence_token,
    "any-version-delete": _any_version_delete,
    "no-bucket-allow-list": _no_bucket_allow_list,
    "ack-before-delete": _ack_before_delete,
    "open-in-use": _open_in_use,
    "drop-retry-count": _drop_retry_count,
    "dot-segments": _dot_segments,
    "follower-index-first": _follower_index_first,
    "hybrid-path-only": _hybrid_path_only,
    "belief-skips-match": _belief_skips_match,
    "absent-owner-anywhere": _absent_owner_anywhere,
    "cluster-field-ignored": _cluster_field_ignored,
    "shadow-scan-only": _shadow_scan_only,
    "publish-without-subscription": _publish_without_subscription,
    "property-reference-ignored": _property_reference_ignored,
}


@contextlib.contextmanager
def applied(name: str | None) -> Iterator[bool]:
    """Switch the mutant `name` on for the block; yields whether every bucket is allowed."""
    if name is None:
        yield False
        return
    _clear_name_caches()
    undo = MUTANTS[name]()
    try:
        yield name == "no-bucket-allow-list"
    finally:
        undo()
        _clear_name_caches()
