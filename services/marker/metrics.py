"""The marker's Prometheus metrics (docs/design.md §10: PDLIs sent by tier, plus the Mark call)."""

from __future__ import annotations

from services.core.metrics import Metrics
from services.systopic.admin_auth import admin_failures
from tombstone.v1 import pending_delete_pb2 as _pd

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def tier_label(tier: int) -> str:
    return _pd.LedgerType.Name(tier).lower()  # type: ignore[arg-type]


class MarkerMetrics:
    def __init__(self, metrics: Metrics | None = None) -> None:
        m = metrics if metrics is not None else Metrics()
        self.admin_failures = admin_failures(m)
        """The subscription check's admin calls that failed (the follower shares it)."""
        self.pdlis_sent = m.counter(
            "marker_pdlis_sent", "PDLIs accepted by the system topic.", ["tier"]
        )
        self.send_failures = m.counter(
            "marker_pdli_send_failures", "PDLIs the system topic did not accept.", ["tier"]
        )
        self.pdlis_reused = m.counter(
            "marker_pdlis_reused",
            "PDLIs of a retried Mark already accepted earlier (not sent again).",
            ["tier"],
        )
        self.mark_calls = m.counter("marker_mark_calls", "Mark calls by outcome.", ["outcome"])
        self.ledgers_unlinked = m.counter(
            "marker_ledgers_unlinked", "Ledgers removed from their owner's znode by the marker."
        )
        self.conflicts = m.counter(
            "marker_conflicts", "Mark calls that lost the owner's compare-and-set."
        )
        self.late_resends = m.counter(
            "marker_late_write_resends",
            "PDLIs sent again because the write landed after the retry window.",
        )
        self.believe_failures = m.counter(
            "marker_believe_failures",
            "Believe reports to the verifier that failed or were dropped.",
        )
        self.subscription_missing = m.gauge(
            "marker_deleter_subscription_missing",
            "1 while the deleters' subscription is missing on a partition of the system topic "
            "(or cannot be confirmed): nothing is published; 0 otherwise.",
        )
        self.mark_latency = m.histogram(
            "marker_mark_seconds", "Duration of Mark calls.", buckets=_LATENCY_BUCKETS
        )
