"""The follower's Prometheus metrics (docs/operations.md lists them with the operator's
action)."""

from __future__ import annotations

from services.core.metrics import Metrics

LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class FollowerMetrics:
    def __init__(self, metrics: Metrics | None = None) -> None:
        m = metrics if metrics is not None else Metrics()
        self.lag = m.histogram(
            "marker_follow_lag_seconds",
            "From the owner's write (znode mtime; the event's arrival for a delete) to the "
            "acceptance of its PDLIs by the system topic.",
            buckets=LAG_BUCKETS,
        )
        self.changes = m.counter(
            "marker_follow_changes", "Owner znode changes read by the follower (rate: changes/s)."
        )
        self.pdlis = m.counter(
            "marker_follow_pdlis", "OBSERVED PDLIs accepted by the system topic.", ["tier"]
        )
        self.duplicates = m.counter(
            "marker_follow_duplicates",
            "Intents the follower saw already sent: 'marker' (this marker's own Mark wrote "
            "the change; not sent again), 'replay' (sent again by a restart's diff against "
            "the checkpoint; may repeat what the previous run sent).",
            ["kind"],
        )
        self.publish_failures = m.counter(
            "marker_follow_publish_failures",
            "Owner changes whose PDLIs were not all accepted (retried; the index keeps the "
            "owner's previous state until they are).",
        )
        self.unreadable = m.counter(
            "marker_follow_unreadable",
            "Owner znodes that did not decode (the index keeps what it knew of them).",
        )
        self.full_reads = m.counter(
            "marker_follow_full_reads", "Full re-reads of every owner, by reason.", ["reason"]
        )
        self.held = m.gauge(
            "marker_follow_held_owners",
            "Changed owners whose PDLIs wait, unpublished, for the deleters' subscription.",
        )
        self.index_owners = m.gauge("marker_follow_index_owners", "Owners in the index.")
        self.index_references = m.gauge(
            "marker_follow_index_references", "Ledger references held by the index."
        )
        self.checkpoint_age = m.gauge(
            "marker_follow_checkpoint_age_seconds",
            "Seconds since the last checkpoint was written (or loaded); -1 before the first.",
        )
        self.active = m.gauge(
            "marker_follow_active", "1 while this follower holds the leadership and follows."
        )
        self.checkpoint_age.set(-1)
