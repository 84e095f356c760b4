"""The deleter's Prometheus metrics (docs/design.md §10 and PIP-186's list)."""

from __future__ import annotations

from services.core.metrics import Metrics
from services.systopic.admin_auth import admin_failures

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class DeleterMetrics:
    def __init__(self, metrics: Metrics | None = None) -> None:
        m = metrics if metrics is not None else Metrics()
        self.registry = m.registry
        self.admin_failures = admin_failures(m)
        """The backlog gauges' admin calls that failed."""
        self.received = m.counter("deleter_received", "Messages received.", ["topic"])
        self.deleted = m.counter(
            "deleter_deleted", "Copies deleted (or found already absent).", ["tier"]
        )
        self.bytes_deleted = m.counter(
            "deleter_bytes_deleted",
            "Bytes deleted, from the sizes in the verifier's evidence (a closed ledger's length, "
            "the offloaded objects' sizes); a copy of unknown size adds nothing.",
            ["tier"],
        )
        self.failed = m.counter("deleter_delete_failed", "Delete attempts that failed.", ["tier"])
        self.acknowledged = m.counter("deleter_acknowledged", "Messages acknowledged.")
        self.retried = m.counter("deleter_retried", "PDLIs sent to the retry topic.")
        self.dead_lettered = m.counter(
            "deleter_dead_lettered", "Messages sent to the dead-letter topic.", ["reason"]
        )
        self.skipped = m.counter("deleter_skipped", "Final SKIP verdicts.", ["reason"])
        self.released = m.counter(
            "deleter_released", "Messages given back for redelivery (sink failure, crash)."
        )
        self.forged = m.counter(
            "deleter_forged", "Forged PDLIs (SKIP FORGED), by the source they claim.", ["source"]
        )
        self.forged_waiting = m.gauge(
            "deleter_forged_waiting", "Forged PDLIs held until their source's DLQ pace allows."
        )
        self.paused = m.gauge(
            "deleter_paused", "1 while work is paused on an outage of it.", ["dependency"]
        )
        self.outage_waits = m.counter(
            "deleter_outage_waits",
            "Messages held (not retried, not released) because they met an outage.",
            ["dependency"],
        )
        self.in_flight = m.gauge("deleter_in_flight", "Messages received and not yet settled.")
        self.duplicate_deliveries = m.counter(
            "deleter_duplicate_deliveries",
            "Deliveries of a message already being handled (a broker redelivery), left to it.",
            ["topic"],
        )
        self.concurrency_limit = m.gauge(
            "deleter_concurrency_limit",
            "Current adaptive limit of requests at once, by backend (zookeeper, s3).",
            ["resource"],
        )
        self.delete_seconds = m.histogram(
            "deleter_delete_seconds", "Time of one delete.", ["tier"], buckets=_LATENCY_BUCKETS
        )
        self.settle_seconds = m.histogram(
            "deleter_pdli_seconds",
            "From receipt to settlement of one message (holding time included).",
            buckets=_LATENCY_BUCKETS,
        )
        # A preview (services/deleter/preview.py): its verdicts, counted once acknowledged.
        self.preview = m.gauge(
            "deleter_preview", "1 while this deleter is a preview (it deletes nothing)."
        )
        self.preview_verdicts = m.counter(
            "deleter_preview_verdicts",
            "A preview's final verdicts: would_delete by tier, settled by SKIP reason, "
            "would_dead_letter by reason code.",
            ["outcome", "detail"],
        )
        self.preview_would_delete_bytes = m.counter(
            "deleter_preview_would_delete_bytes",
            "Bytes a preview would have deleted, from the verifier's evidence.",
            ["tier"],
        )
        self.preview_retries = m.counter(
            "deleter_preview_retries",
            "A preview's decisions deferred (negatively acknowledged, decided again later).",
        )
        # `tombstone deleter status` as gauges (services/deleter/status_gauges.py).
        self.oldest_pending_age = m.gauge(
            "deleter_oldest_pending_age_seconds",
            "Age (since publication) of the oldest message received here and not yet settled.",
        )
        self.system_topic_backlog = m.gauge(
            "deleter_system_topic_backlog", "Unacknowledged messages of the system topic."
        )
        self.retry_topic_backlog = m.gauge(
            "deleter_retry_topic_backlog", "Unacknowledged messages of the retry topic."
        )
        self.dead_letter_backlog = m.gauge(
            "deleter_dead_letter_backlog", "Dead letters kept on the dead-letter subscription."
        )
        self.dead_letters = m.gauge(
            "deleter_dead_letters",
            "Dead letters by reason code (counted from at most DELETER_DLQ_SCAN_MAX of them).",
            ["reason"],
        )
        self.status_refreshed = m.gauge(
            "deleter_status_refreshed_timestamp_seconds",
            "Unix time of the last successful refresh of the backlog and dead-letter gauges.",
        )
        self.status_refresh_failures = m.counter(
            "deleter_status_refresh_failures",
            "Refreshes of the backlog and dead-letter gauges that failed (values kept).",
        )
