"""Topic statistics in the JSON shapes of Pulsar's admin API (the fields the devstack fills)."""

from __future__ import annotations

from typing import Any

from .subscription import Subscription
from .topic import Topic

SUB_TYPE_NAMES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


def _subscription_stats(sub: Subscription) -> dict[str, Any]:
    return {
        "msgBacklog": sub.backlog(),
        "type": SUB_TYPE_NAMES[int(sub.sub_type)],
        "isDurable": sub.durable,
        "unackedMessages": len(sub.pending),
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "msgRateRedeliver": 0.0,
        "consumers": [
            {
                "consumerName": c.name,
                "availablePermits": c.permits,
                "unackedMessages": sum(1 for owner in sub.pending.values() if owner is c),
            }
            for c in sub.consumers
        ],
    }


def topic_stats(topic: Topic) -> dict[str, Any]:
    return {
        "msgRateIn": 0.0,
        "msgThroughputIn": 0.0,
        "msgInCounter": topic.msg_in,
        "bytesInCounter": sum(len(e.stored) for e in topic.entries),
        "storageSize": sum(len(e.stored) for e in topic.entries),
        "publishers": [
            {"producerName": p.name, "producerId": p.producer_id} for p in topic.producers.values()
        ],
        "subscriptions": {name: _subscription_stats(s) for name, s in topic.subscriptions.items()},
    }


def partitioned_stats(partitions: int, per_partition: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Sum the partitions' figures, as Pulsar's partitioned-stats does."""
    total: dict[str, Any] = {
        "msgRateIn": 0.0,
        "msgThroughputIn": 0.0,
        "msgInCounter": 0,
        "bytesInCounter": 0,
        "storageSize": 0,
        "publishers": [],
        "subscriptions": {},
        "metadata": {"partitions": partitions},
        "partitions": per_partition,
    }
    for stats in per_partition.values():
        for key in ("msgInCounter", "bytesInCounter", "storageSize"):
            total[key] += stats[key]
        total["publishers"].extend(stats["publishers"])
        for name, sub in stats["subscriptions"].items():
            merged = total["subscriptions"].setdefault(
                name, {**sub, "msgBacklog": 0, "unackedMessages": 0, "consumers": []}
            )
            merged["msgBacklog"] += sub["msgBacklog"]
            merged["unackedMessages"] += sub["unackedMessages"]
            merged["consumers"].extend(sub["consumers"])
    return total
