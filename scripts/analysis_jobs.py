"""Count the Spark jobs and the driver time of one reconciler analysis on the planted world.

    .venv/bin/python scripts/analysis_jobs.py [--rounds 3] [--by-site] [--keep DIR]

The world is `tests/scan/planted.py`'s (a few dozen ledgers), analysed in process with the
settings of the suite's session (`tests/scan/conftest.py`), so the figures are what each
in-process analysis of the suite costs. The first round pays the JVM's warm-up; the later
ones are the steady cost. Per round it prints the jobs and seconds of each analysis step
(`ANALYSIS_STEPS`), the time spent building the plans (`analyze`, before any action), and
with `--by-site` the jobs per call site (from Spark's event log: `collect at job.py:78`).
On tiny data every job costs about the same, so the job count is the figure to cut.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.scan.analysis import job  # noqa: E402
from services.scan.analysis.config import AnalyzeConfig  # noqa: E402
from services.scan.schema import extract_from_rows, write_extract  # noqa: E402
from services.scan.spark import build_session  # noqa: E402
from tests.scan import planted as P  # noqa: E402
from tests.scan.session_settings import TEST_SESSION  # noqa: E402

GROUP = "measured-analysis"


class _Steps:
    """Stands in for StepProgress: records when each step ends and the jobs run by then."""

    marks: ClassVar[list[tuple[str, float, int]]] = []

    def __init__(self, steps: tuple[str, ...], *, label: str, enabled: bool = True) -> None:
        del steps, label, enabled

    def advance(self, step: str) -> None:
        _Steps.marks.append((step, time.perf_counter(), _jobs()))


_spark: Any = None


def _jobs() -> int:
    return len(_spark.sparkContext.statusTracker().getJobIdsForGroup(GROUP))


@contextmanager
def _timed_plans(spent: list[float]) -> Iterator[None]:
    """Times `analyze` (it only builds DataFrames: the plans' analysis, no job)."""
    original = job.analyze

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    vars(job)["analyze"] = timed
    try:
        yield
    finally:
        vars(job)["analyze"] = original


def one_round(spark: Any, extract_dir: Path, out: Path) -> dict[str, Any]:
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    sc = spark.sparkContext
    sc.setJobGroup(GROUP, "analysis")
    before = _jobs()
    _Steps.marks = []
    plans: list[float] = []
    original = vars(job)["StepProgress"]
    vars(job)["StepProgress"] = _Steps
    start = time.perf_counter()
    try:
        with _timed_plans(plans):
            job.run_analysis(spark, extract_dir, out, config)
    finally:
        vars(job)["StepProgress"] = original
    total = time.perf_counter() - start
    steps, last_t, last_j = [], start, before
    for name, t, n in _Steps.marks:
        steps.append({"step": name, "s": round(t - last_t, 2), "jobs": n - last_j})
        last_t, last_j = t, n
    return {
        "jobs": _jobs() - before,
        "s": round(total, 2),
        "plans_s": round(sum(plans), 2),
        "steps": steps,
    }


def jobs_by_site(event_dir: Path) -> Counter[str]:
    """Jobs per call site of the measured group, from the event log."""
    sites: Counter[str] = Counter()
    for log in event_dir.rglob("*"):
        if not log.is_file() or log.name.startswith("."):
            continue
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("Event") != "SparkListenerJobStart":
                continue
            props = event.get("Properties") or {}
            if props.get("spark.jobGroup.id") != GROUP:
                continue
            stages = event.get("Stage Infos") or [{}]
            sites[props.get("callSite.short") or stages[-1].get("Stage Name", "?")] += 1
    return sites


def main() -> None:
    global _spark
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--by-site", action="store_true", help="jobs per call site")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="another setting"
    )
    parser.add_argument("--keep", type=Path, help="write each round's output here, to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="analysis-jobs-") as tmp:
        base = Path(tmp)
        settings = dict(TEST_SESSION) | dict(kv.split("=", 1) for kv in args.conf)
        if args.by_site:
            (base / "events").mkdir()
            settings |= {
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": str(base / "events"),
                "spark.eventLog.compress": "false",
                "spark.eventLog.rolling.enabled": "false",
            }
        _spark = spark = build_session("local[2]", app_name="analysis-jobs", overrides=settings)
        spark.sparkContext.setLogLevel("ERROR")
        write_extract(extract_from_rows(spark, P.planted_rows()), base / "extract")
        print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
        for i in range(args.rounds):
            out = (args.keep or base) / f"out{i}"
            result = one_round(spark, base / "extract", out)
            load = os.getloadavg()[0]
            steps = " ".join(f"{s['step']}={s['jobs']}j/{s['s']}s" for s in result["steps"])
            print(
                f"round {i}: {result['jobs']} jobs, {result['s']} s "
                f"(plans {result['plans_s']} s; {steps}) load {load:.2f}",
                flush=True,
            )
        spark.stop()
        if args.by_site:
            for site, n in sorted(jobs_by_site(base / "events").items()):
                print(f"{n:4d}  {site}")


if __name__ == "__main__":
    main()
