"""Figures of a run: the summary printed at the end, the JSON record and the backlog plot."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.load.checks import CheckResult
from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import WorkloadOptions, WorkloadStats


@dataclass(frozen=True)
class Figures:
    workload_seconds: float
    marks_per_second: float
    """Ledgers the marker unlinked per second of workload."""
    pdlis_marked: dict[str, int]
    deletions_per_second: dict[str, float]
    """Per tier: deletions observed / (last deletion - first mark)."""
    latency_p50: dict[str, float]
    latency_p99: dict[str, float]
    mark_call_p50: float
    mark_call_p99: float
    max_backlog: int
    drained: bool
    deleter_restarts: int


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def figures(
    tracker: Tracker, stats: WorkloadStats, workload_seconds: float, drained: bool, restarts: int
) -> Figures:
    first_mark = min((m.marked_at for m in tracker.marked), default=tracker.started)
    offset = first_mark - tracker.started
    rates = {}
    for tier, times in tracker.deleted_at.items():
        span = (max(times) - offset) if times else 0.0
        rates[tier] = len(times) / span if span > 0 else 0.0
    marked = {
        tier: sum(1 for m in tracker.marked if (m.tier == 1) == (tier == "bookkeeper"))
        for tier in ("bookkeeper", "offload")
    }
    return Figures(
        workload_seconds=workload_seconds,
        marks_per_second=stats.marked / workload_seconds if workload_seconds else 0.0,
        pdlis_marked=marked,
        deletions_per_second=rates,
        latency_p50={t: percentile(v, 50) for t, v in tracker.latencies.items()},
        latency_p99={t: percentile(v, 99) for t, v in tracker.latencies.items()},
        mark_call_p50=percentile(stats.mark_seconds, 50),
        mark_call_p99=percentile(stats.mark_seconds, 99),
        max_backlog=max((s.backlog for s in tracker.samples), default=0),
        drained=drained,
        deleter_restarts=restarts,
    )


def broker_style_line(unlinked: int, failures_injected: int, check: CheckResult) -> str:
    """The broker-style result: `unlinked` (ledger, tier) pairs left references by the
    brokers' own writes, how many of their deletions were made to fail, and how many
    unlinked pairs remain (a leak unless 0)."""
    return (
        f"broker-style: {unlinked} unlinked by brokers, {failures_injected} delete failures "
        f"injected, {len(check.leaked)} leaked"
    )


def summary(
    options: WorkloadOptions,
    stats: WorkloadStats,
    fig: Figures,
    check: CheckResult,
    *,
    broker_style: tuple[int, int] | None = None,
) -> str:
    """The run's last lines; `broker_style` is (unlinked by brokers, failures injected)."""
    lines = [
        f"load: {options.brokers} brokers x {options.topics} topics, target {options.rate:g} "
        f"ledgers/s for {options.duration:g} s",
        f"ledgers created {stats.ledgers_created}, Mark calls {stats.mark_calls}, ledgers "
        f"marked {stats.marked} ({fig.marks_per_second:.1f}/s), not marked {stats.not_marked}, "
        f"re-reads {stats.conflicts}, errors {len(stats.errors)}",
        f"MarkLedgers call p50 {fig.mark_call_p50 * 1000:.0f} ms, p99 "
        f"{fig.mark_call_p99 * 1000:.0f} ms",
    ]
    for tier in ("bookkeeper", "offload"):
        lines.append(
            f"  {tier:10s} marked {fig.pdlis_marked[tier]:6d}  deleted "
            f"{fig.deletions_per_second[tier]:7.1f}/s  mark->deleted p50 "
            f"{fig.latency_p50[tier]:6.2f} s  p99 {fig.latency_p99[tier]:6.2f} s"
        )
    lines.append(
        f"max backlog {fig.max_backlog}, drained: {'yes' if fig.drained else 'NO'}, "
        f"deleter restarts {fig.deleter_restarts}"
    )
    lines.append(
        f"S1 (nothing referenced deleted): {len(check.s1_violations)} violations in "
        f"{check.listed_checked} listed ledgers; L1 (nothing unlinked remains): "
        f"{len(check.l1_remaining)} remaining of {check.unlinked_checked}"
    )
    if broker_style is not None:
        lines.append(broker_style_line(*broker_style, check))
    lines.extend(f"  ! {line}" for line in (check.s1_violations + check.l1_remaining)[:20])
    lines.append("PASS" if check.passed else "FAIL")
    return "\n".join(lines)


def plot(tracker: Tracker, path: Path, title: str) -> None:
    """Backlog (marked, not yet deleted) and cumulative marks/deletions over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [s.at for s in tracker.samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(times, [s.backlog for s in tracker.samples], color="tab:red")
    top.set_ylabel("backlog (PDLIs)")
    top.set_title(title)
    top.grid(alpha=0.3)
    bottom.plot(
        times, [s.marked for s in tracker.samples], label="marked (ledger, tier)", color="black"
    )
    for tier, colour in (("bookkeeper", "tab:blue"), ("offload", "tab:green")):
        bottom.plot(
            times,
            [s.deleted[tier] for s in tracker.samples],
            label=f"deleted: {tier}",
            color=colour,
        )
    bottom.set_xlabel("seconds")
    bottom.set_ylabel("cumulative")
    bottom.legend(loc="upper left")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_json(
    path: Path,
    options: WorkloadOptions,
    stats: WorkloadStats,
    fig: Figures,
    check: CheckResult,
    *,
    broker_style: tuple[int, int] | None = None,
) -> None:
    checked = {**asdict(check), "leaked": sorted(check.leaked), "passed": check.passed}
    record: dict[str, object] = {
        "options": asdict(options),
        "workload": {**asdict(stats), "mark_seconds": len(stats.mark_seconds)},
        "figures": asdict(fig),
        "check": checked,
    }
    if broker_style is not None:
        unlinked, injected = broker_style
        record["broker_style"] = {
            "unlinked_by_brokers": unlinked,
            "delete_failures_injected": injected,
            "leaked": len(check.leaked),
        }
    path.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
