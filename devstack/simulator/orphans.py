"""The orphan planting plan: which topic hosts which orphan, and the orphans with no host.

Orphans tied to a topic (a trimmed data ledger, a stale cursor ledger, an unlisted schema
ledger, a BK leftover after offload, an abandoned upload, a shadow-only ledger) are planted
while that topic is generated, so their ids sit where history would have put them. The rest
(ledgers of deleted topics, ledgers without Pulsar metadata, another cluster's objects and
young ledgers) come after all topics; young ledgers come last of all, so the writer can write
them after the age boundary.
"""

from __future__ import annotations

from collections import Counter

from devstack.simulator._factory import Factory, LedgerShape, pulsar_metadata
from devstack.simulator.model import Ledger, LedgerKind, OrphanKind, Planted, TopicPlan
from services.core.errors import InvalidArgument
from services.metadata import LedgerState, TopicName

# Plan field → the kind it plants, for orphans that live inside a topic.
HOSTED = {
    "unlisted_data": OrphanKind.UNLISTED_DATA,
    "stale_cursor": OrphanKind.STALE_CURSOR,
    "unlisted_schema": OrphanKind.UNLISTED_SCHEMA,
    "bk_after_offload": OrphanKind.BK_AFTER_OFFLOAD,
    "unreferenced_offload": OrphanKind.UNREFERENCED_OFFLOAD,
    "shadow_referenced": OrphanKind.SHADOW_REFERENCED,
}
# LegacyPlan field → the kind it plants; all of them live inside a topic.
LEGACY_HOSTED = {
    "open_cursor_unsubscribed": OrphanKind.OPEN_CURSOR_UNSUBSCRIBED,
    "pre_2_2_ledgers": OrphanKind.PRE_2_2_LEDGER,
    "offload_2_1": OrphanKind.OFFLOAD_2_1,
    "objects_pre_2_10": OrphanKind.OBJECTS_PRE_2_10,
}


def assign_hosts(f: Factory, plans: list[TopicPlan]) -> dict[int, Counter[OrphanKind]]:
    """For each hosted orphan, pick a topic that is not new (index into `plans`)."""
    hosts: dict[int, Counter[OrphanKind]] = {}
    eligible = [i for i, plan in enumerate(plans) if not plan.new]
    wanted = [(getattr(f.spec.orphans, field), kind) for field, kind in HOSTED.items()]
    wanted += [(getattr(f.spec.legacy, field), kind) for field, kind in LEGACY_HOSTED.items()]
    for count, kind in wanted:
        for _ in range(count):
            if not eligible:
                raise InvalidArgument("orphans", "every topic is new: no topic can host orphans")
            hosts.setdefault(f.rng.choice(eligible), Counter())[kind] += 1
    return hosts


def plant_unhosted(f: Factory, plans: list[TopicPlan]) -> None:
    plan = f.spec.orphans
    for i in range(plan.deleted_topic):
        _deleted_topic(f, plans, i)
    for _ in range(plan.no_pulsar_metadata):
        ledger = f.add_ledger(LedgerKind.FOREIGN, "", f.closed_shape(), {}, referenced=False)
        f.model.planted.append(Planted(OrphanKind.NO_PULSAR_METADATA, ledger.ledger_id))
    for i in range(plan.other_cluster_objects):
        _other_cluster(f, plans, i)
    for _ in range(plan.young):
        _young(f)


def _deleted_topic(f: Factory, plans: list[TopicPlan], i: int) -> None:
    home = f.rng.choice(plans)
    gone = TopicName("persistent", home.tenant, home.namespace, f"deleted-topic-{i}")
    ml_name = gone.managed_ledger_name
    custom = pulsar_metadata(ml_name=ml_name)
    ledger = f.add_ledger(LedgerKind.DATA, ml_name, f.closed_shape(), custom, referenced=False)
    f.model.planted.append(Planted(OrphanKind.DELETED_TOPIC, ledger.ledger_id, ml_name=ml_name))


def _other_cluster(f: Factory, plans: list[TopicPlan], i: int) -> None:
    """Objects another cluster offloaded into the same bucket: never ours to delete."""
    home = f.rng.choice(plans)
    ml_name = TopicName(
        "persistent", home.tenant, home.namespace, f"remote-{i}"
    ).managed_ledger_name
    # The other cluster's ids are its own; this one is not allocated here.
    ledger_id = f.rng.randrange(2**31 - 1)
    shape = f.closed_shape()
    source = Ledger(
        metadata=f.ledger_metadata(ledger_id, shape, pulsar_metadata(ml_name=ml_name)),
        kind=LedgerKind.DATA,
        owner=ml_name,
        cursor=None,
        in_bookkeeper=False,
        referenced=False,
    )
    cluster = f"{f.spec.cluster_name}-other"
    keys = f.add_objects(source, f.new_uuid(), ml_name, cluster_name=cluster)
    f.model.planted.append(
        Planted(OrphanKind.OTHER_CLUSTER_OBJECTS, None, keys, ml_name, note=cluster)
    )


def _young(f: Factory) -> None:
    """A rollover ledger created but not yet added to its topic's list."""
    listed = [ml for ml in f.model.managed_ledgers.values() if ml.ledgers and not ml.shadow_source]
    if not listed:
        raise InvalidArgument("orphans", "no topic with ledgers to host a young ledger")
    ml = f.rng.choice(listed)
    custom = pulsar_metadata(ml_name=ml.name)
    shape = LedgerShape(LedgerState.OPEN)
    ledger = f.add_ledger(LedgerKind.DATA, ml.name, shape, custom, referenced=False, young=True)
    f.model.planted.append(Planted(OrphanKind.YOUNG, ledger.ledger_id, ml_name=ml.name))
