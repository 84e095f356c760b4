"""What a broker's retention trim of a topic would remove: the expected outcome for tests.

A trim drops the oldest ledgers of a managed ledger's list, never the current (last) one.
For each dropped ledger it deletes the BookKeeper copy unless the offload context says
`bookkeeperDeleted`, and the offloaded objects whenever the context carries a uuid.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from devstack.simulator.model import ClusterModel, LedgerInfo, ManagedLedger
from services.core.errors import InvalidArgument, NotFound
from services.metadata import TopicName, data_object_key, index_object_key


@dataclass(frozen=True)
class TrimmedLedger:
    info: LedgerInfo
    delete_from_bookkeeper: bool
    """The BookKeeper tier needs deleting (the context does not say `bookkeeperDeleted`)."""
    object_keys: tuple[str, ...]
    """Offloaded objects to delete (data, index); empty when never offloaded."""
    still_referenced: bool
    """Another ML (a shadow topic) still lists it: nothing of it may be deleted."""

    @property
    def ledger_id(self) -> int:
        return self.info.ledger_id

    @property
    def delete_offloaded(self) -> bool:
        """The offload tier needs deleting: the context carries a uuid (complete or not)."""
        return self.info.offload is not None


@dataclass(frozen=True)
class TrimResult:
    before: ManagedLedger
    after: ManagedLedger
    trimmed: tuple[TrimmedLedger, ...]

    @property
    def ledger_ids(self) -> tuple[int, ...]:
        return tuple(t.ledger_id for t in self.trimmed)


def resolve_ml_name(model: ClusterModel, topic: str) -> str:
    """Accept an ML name or a topic name (`persistent://t/ns/x`, `t/ns/x`)."""
    if topic in model.managed_ledgers:
        return topic
    name = TopicName.parse(topic).managed_ledger_name
    if name not in model.managed_ledgers:
        raise NotFound(f"no managed ledger for {topic!r} in the model")
    return name


def trim(model: ClusterModel, topic: str, n: int) -> TrimResult:
    """The `n` oldest ledgers of `topic` as a trim would remove them."""
    ml = model.managed_ledgers[resolve_ml_name(model, topic)]
    if not 0 <= n < len(ml.ledgers):
        raise InvalidArgument("n", f"can trim 0..{len(ml.ledgers) - 1} of {ml.name}, not {n}")
    others = {
        ledger_id
        for other in model.managed_ledgers.values()
        if other.name != ml.name
        for ledger_id in other.ledger_ids
    }
    trimmed = tuple(_trimmed(info, info.ledger_id in others) for info in ml.ledgers[:n])
    return TrimResult(ml, replace(ml, ledgers=ml.ledgers[n:]), trimmed)


def _trimmed(info: LedgerInfo, shared: bool) -> TrimmedLedger:
    offload = info.offload
    keys: tuple[str, ...] = ()
    if offload is not None and offload.driver_name != "filesystem":
        keys = (
            data_object_key(offload.uuid, info.ledger_id),
            index_object_key(offload.uuid, info.ledger_id),
        )
    in_bk = offload is None or not offload.bookkeeper_deleted
    return TrimmedLedger(info, in_bk, keys, shared)


def apply_trim(model: ClusterModel, result: TrimResult) -> ClusterModel:
    """A copy of `model` after the trim and its deletions have completed."""
    after = copy.copy(model)
    after.managed_ledgers = {**model.managed_ledgers, result.after.name: result.after}
    after.ledgers = dict(model.ledgers)
    after.objects = dict(model.objects)
    for item in result.trimmed:
        if item.still_referenced:
            continue
        after.ledgers.pop(item.ledger_id, None)
        for key in item.object_keys:
            after.objects.pop(key, None)
    return after
