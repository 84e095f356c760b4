"""What half the raw multi-delete rate would leave each ledger of CPU, beside what the deleter
and the verifier spent, and the one per-ledger cost no batching removes: the audit line.

Printed after the BookKeeper run of `benchmarks.deleter`: the ≥ 50 % goal is a CPU budget on
a machine whose cores the deleter, the verifier, the broker and ZooKeeper share.
"""

from __future__ import annotations

import os
import time

from services.core.config import LogConfig
from services.core.logging import audit, configure_logging

AUDIT_LINES = 5000
"""Audit lines rendered to time one (after a warm-up of as many)."""


def budget_us(multi_rate: float, cores: int | None = None) -> float:
    """CPU microseconds per ledger, over every process on the machine, at half `multi_rate`."""
    return (cores or os.cpu_count() or 1) / (0.5 * multi_rate) * 1e6


def audit_line_us(lines: int = AUDIT_LINES) -> float:
    """CPU microseconds to write one deletion's audit line as the deployed deleter does (JSON
    at info level), to /dev/null. Reconfigures this process's logging: call it last."""
    with open(os.devnull, "w") as sink:
        configure_logging(LogConfig(level="info", format="json"), stream=sink)

        def write(count: int) -> None:
            for ledger_id in range(count):
                audit(
                    "ledger_deleted",
                    ledger_id=ledger_id,
                    tier="bookkeeper",
                    removed=True,
                    component="MANAGED_LEDGER",
                    owner="bench/ns/persistent/topic",
                    source="marker",
                    marker_id="bench-marker",
                    request_id="bench-request",
                    message_id="(12,34,0,-1)",
                    topic="persistent://pulsar/system/__ledger_deletion-partition-0",
                    believed=False,
                    verdict_reason="closed, unreferenced, older than the age window",
                    znode_path="/ledgers/00/0000/L0001",
                    znode_version=0,
                )

        write(lines)
        started = time.process_time()
        write(lines)
        return (time.process_time() - started) / lines * 1e6


def budget_line(multi_rate: float, spent_us: float) -> str:
    cores = os.cpu_count() or 1
    return (
        f"CPU budget per ledger at half the raw multi rate on {cores} cores: "
        f"{budget_us(multi_rate, cores):.0f} µs for every process; the deleter and the verifier "
        f"spent {spent_us:.0f} µs; one audit line alone costs {audit_line_us():.0f} µs"
    )
