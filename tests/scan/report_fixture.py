"""A small summary.json as the analysis writes it, for report tests without Spark.

Names are stored as Pulsar stores them: the local topic name and the subscription are
`Codec.encode`d (java.net.URLEncoder: space as `+`, `/` as `%2F`), e.g. the ML znode
`t1/ns1/persistent/orders+eu%2F1` of topic `persistent://t1/ns1/orders eu/1`.

`python -m tests.scan.report_fixture OUT.png` renders it with Chromium into a screenshot
(docs/report.png).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from services.scan.report.write import write_html_report

MIB = 1024 * 1024
DAY_S = 86_400
STARTED_MS = 1_795_000_000_000
ORDERS_ML = "t1/ns1/persistent/orders+eu%2F1"
ORDERS_TOPIC = "persistent://t1/ns1/orders eu/1"
CURSOR = "billing%2Fdaily"
RUN = "20261123T220000Z"
PREVIOUS = "20261122T220000Z"


def item(ledger_id: int, kind: str, proposed: bool, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "source": "ledger",
        "proposed": proposed,
        "deletable": proposed,
        "kind": kind,
        "orphan_reason": kind if proposed else None,
        "reason": None,
        "namespace": "t1/ns1",
        "ml_name": ORDERS_ML,
        "cursor_name": None,
        "schema_id": None,
        "ledger_id": ledger_id,
        "state": "CLOSED",
        "bucket": None,
        "key": None,
        "uuid": None,
        "cluster_name": None,
        "size_bytes": 3 * MIB,
        "age_ms": 10 * DAY_S * 1000,
    }
    return base | kw


ITEMS = [
    item(101, "topic_gone", True, reason="its topic (managed ledger) no longer exists"),
    item(
        102,
        "cursor_moved_on",
        True,
        cursor_name=CURSOR,
        size_bytes=512 * 1024,
        reason="its cursor is gone or now keeps its position in another ledger",
    ),
    item(
        7,
        "offload_no_match",
        True,
        source="object",
        bucket="offload",
        key="b0f1-ledger-7",
        uuid="b0f1",
        size_bytes=int(1.5 * MIB),
        reason="no topic lists this ledger with this offload uuid",
    ),
    item(
        103,
        "too_young",
        False,
        orphan_reason="not_in_list",
        size_bytes=2 * MIB,
        age_ms=5 * 3600 * 1000,
        reason="inside the age window: its reference may not be written yet "
        "(else: its topic exists but no longer lists this ledger)",
    ),
    item(104, "unknown_ownership", False, ml_name=None, namespace="(unknown)", size_bytes=900),
]
TASKS: list[dict[str, Any]] = [
    {"task_id": "list:bk_ledgers", "kind": "bk_ledgers", "scope": "/ledgers", "rows": 2},
    {"task_id": "list:managed_ledgers", "kind": "managed_ledgers", "scope": "/managed-ledgers"},
    {"task_id": "list:schemas", "kind": "schemas", "scope": "/schemas", "rows": 1},
    {"task_id": "list:offload_objects", "kind": "offload_objects", "scope": "offload"},
    {"task_id": "bk_ledgers:00/0000", "kind": "bk_ledgers", "scope": "00/0000", "rows": 130},
    {"task_id": "bk_ledgers:00/0001", "kind": "bk_ledgers", "scope": "00/0001", "rows": 12},
    {"task_id": "managed_ledgers:t1/ns1", "kind": "managed_ledgers", "scope": "t1/ns1"},
    {"task_id": "cursors:t1/ns1", "kind": "cursors", "scope": "t1/ns1", "rows": 4},
    {"task_id": "schemas:t1", "kind": "schemas", "scope": "t1", "rows": 1},
    {"task_id": "offload_objects:offload", "kind": "offload_objects", "scope": "offload"},
]


def _task(row: dict[str, Any]) -> dict[str, Any]:
    zk = row["kind"] != "offload_objects"
    return {
        "rows": 1,
        "status": "ok",
        "error": None,
        "started_ms": STARTED_MS,
        "ended_ms": STARTED_MS + 1200,
        "zxid": 0x1_0000_0042 if zk else None,
    } | row


def counts() -> list[dict[str, Any]]:
    def c(source: str, kind: str, reason: str | None, n: int, size: int) -> dict[str, Any]:
        return {"source": source, "kind": kind, "orphan_reason": reason, "count": n, "bytes": size}

    return [
        c("ledger", "referenced", None, 130, 900 * MIB),
        c("ledger", "topic_gone", "topic_gone", 1, 3 * MIB),
        c("ledger", "cursor_moved_on", "cursor_moved_on", 1, 512 * 1024),
        c("ledger", "too_young", "not_in_list", 1, 2 * MIB),
        c("ledger", "unknown_ownership", None, 1, 900),
        c("object", "referenced", None, 6, 30 * MIB),
        c("object", "offload_no_match", "offload_no_match", 2, int(1.5 * MIB)),
    ]


def summary(**overrides: Any) -> dict[str, Any]:
    tasks = [_task(t) for t in TASKS]
    body: dict[str, Any] = {
        "run_id": RUN,
        "scan": {
            "scan_id": f"c1-{STARTED_MS}-ab12cd34",
            "cluster_name": "c1",
            "started": "2026-11-18T22:13:20+00:00",
            "started_ms": STARTED_MS,
            "ended_ms": STARTED_MS + 4_500,
        },
        "config": {
            "cluster": "c1",
            "min_age_s": 3 * DAY_S,
            "min_age": "3 d",
            "min_age_below_floor": False,
            "max_orphan_share": 0.2,
        },
        "dry_run": True,
        "refused": False,
        "refusal_reasons": [],
        "orphan_share": {"ledgers": 3 / 133, "objects": 0.25},
        "counts": counts(),
        "candidates": {"count": 3, "ledgers": 2, "objects": 1, "bytes": 5 * MIB},
        "reclaimable_bytes_total": 5 * MIB,
        "reclaimable_by_namespace_top": [
            {
                "namespace": "t1/ns1",
                "ledgers": 2,
                "ledger_bytes": int(3.5 * MIB),
                "offloads": 1,
                "offload_bytes": int(1.5 * MIB),
                "total_bytes": 5 * MIB,
            },
            {
                "namespace": "t2/ns2",
                "ledgers": 1,
                "ledger_bytes": 40 * 1024,
                "offloads": 0,
                "offload_bytes": 0,
                "total_bytes": 40 * 1024,
            },
        ],
        "dormant_topics": 1,
        "inactive_cursors": 0,
        "coverage": {
            "tasks": len(tasks),
            "by_kind": [
                {"kind": "bk_ledgers", "ok": 2, "rows": 142},
                {"kind": "cursors", "ok": 1, "rows": 4},
                {"kind": "managed_ledgers", "ok": 1, "rows": 1},
                {"kind": "offload_objects", "ok": 1, "rows": 8},
                {"kind": "schemas", "ok": 1, "rows": 1},
            ],
            "listings": [t for t in tasks if t["task_id"].startswith("list:")],
            "problems": [],
            "problem_count": 0,
            "zxid_min": 0x1_0000_0042,
            "zxid_max": 0x1_0000_0042,
            "zxid_listing": 0x1_0000_0040,
            "object_source": "a live listing",
            "buckets": ["offload"],
            "task_list": tasks,
            "csv": "tasks.csv",
        },
        "items": {"total": len(ITEMS), "proposed": 3, "shown": ITEMS, "csv": "items.csv"},
        "age_histogram": {
            "edges_s": [0, 60, 600, 3600, 21600, DAY_S, 2 * DAY_S, 3 * DAY_S, 7 * DAY_S],
            "bins": [
                {"source": "ledger", "bin": 3, "count": 1},
                {"source": "ledger", "bin": 7, "count": 2},
                {"source": "object", "bin": 7, "count": 2},
                {"source": "ledger", "bin": 8, "count": 12},
            ],
        },
        "submit_plan": {
            "owners": 3,
            "by_component": [
                {
                    "ledger_type": "LEDGER",
                    "component": "MANAGED_CURSOR",
                    "count": 1,
                    "bytes": 512 * 1024,
                },
                {
                    "ledger_type": "LEDGER",
                    "component": "MANAGED_LEDGER",
                    "count": 1,
                    "bytes": 3 * MIB,
                },
                {
                    "ledger_type": "OFFLOAD_LEDGER",
                    "component": "MANAGED_LEDGER",
                    "count": 1,
                    "bytes": int(1.5 * MIB),
                },
            ],
        },
    }
    return body | overrides


def no_head_summary() -> dict[str, Any]:
    """A run whose extract did not read the objects with HEAD (acknowledged): the banner,
    and the objects of unknown cluster (item 7 among them)."""
    body = summary(risky_options=["--no-head-objects"])
    body["scan"] |= {"objects_headed": False}
    return body | {
        "other_clusters": {"objects": 0, "bytes": 0, "by_cluster": []},
        "unattributed_objects": {"objects": 8, "bytes": int(31.5 * MIB), "deletable": 2},
    }


#: An object another cluster offloaded into the shared bucket, with one of our ledger ids.
FOREIGN_ITEM = item(
    31,
    "other_cluster",
    False,
    source="object",
    bucket="offload",
    key="e5c2-ledger-31",
    uuid="e5c2",
    cluster_name="east",
    ml_name="t1/ns1/persistent/remote",
    size_bytes=2 * MIB,
    reason="excluded: belongs to cluster east",
)


def shared_bucket_summary() -> dict[str, Any]:
    """A run over a bucket that two other clusters (east, west) offload into too."""
    body = summary()
    body["scan"] |= {"objects_headed": True}
    shown = [*ITEMS, FOREIGN_ITEM]
    return body | {
        "other_clusters": {
            "objects": 3,
            "bytes": 7 * MIB,
            "by_cluster": [
                {"cluster_name": "east", "objects": 2, "bytes": 4 * MIB},
                {"cluster_name": "west", "objects": 1, "bytes": 3 * MIB},
            ],
        },
        "unattributed_objects": {"objects": 0, "bytes": 0, "deletable": 0},
        "items": {"total": len(shown), "proposed": 3, "shown": shown, "csv": "items.csv"},
    }


def refused_summary() -> dict[str, Any]:
    return summary(
        refused=True,
        refusal_reasons=[
            "extract task bk_ledgers:00/0001 (bk_ledgers 00/0001) failed: "
            "StoreUnavailable: connection refused",
        ],
        candidates={"count": 0, "ledgers": 0, "objects": 0, "bytes": 0},
    )


def write_candidates(run_dir: Path, ledger_ids: list[int]) -> None:
    """A candidates dataset as the analysis writes it (the columns the history reads)."""
    path = run_dir / "candidates"
    path.mkdir(parents=True)
    table = pa.table(
        {
            "ledger_type": ["LEDGER"] * len(ledger_ids),
            "ledger_id": pa.array(ledger_ids, pa.int64()),
            "uuid": pa.array([None] * len(ledger_ids), pa.string()),
        }
    )
    pq.write_table(table, path / "part-0.parquet")


def write_history(out: Path, body: dict[str, Any]) -> Path:
    """`out/<previous>/` and `out/<run>/`, each with its summary and candidates; the run's
    report drawn. The previous run had ledger 100 (gone since) and 101."""
    previous = out / PREVIOUS
    previous.mkdir(parents=True)
    old = summary(candidates={"count": 2, "ledgers": 2, "objects": 0, "bytes": 4 * MIB})
    old["counts"] = [
        c | {"count": c["count"] + 1} if c["kind"] == "topic_gone" else c for c in old["counts"]
    ]
    (previous / "summary.json").write_text(json.dumps(old))
    write_candidates(previous, [100, 101])
    run = out / RUN
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(body))
    write_candidates(run, [101, 102])
    write_html_report(run)
    return run


def _crop_blank_bottom(path: Path, margin: int = 24) -> None:
    """The browser window is taller than the page: cut the white below it."""
    from PIL import Image, ImageOps

    with Image.open(path) as image:
        bottom = (ImageOps.invert(image.convert("RGB")).getbbox() or (0, 0, 0, image.height))[3]
        cropped = image.crop((0, 0, image.width, min(image.height, bottom + margin)))
    # A page of flat colours: a 64-colour palette keeps it legible at a third of the size.
    cropped.convert("RGB").quantize(64).save(path, optimize=True)


if __name__ == "__main__":
    from tests.scan.chromium import screenshot

    target = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_history(Path(tmp), no_head_summary())
        screenshot(run_dir / "report.html", target)
    _crop_blank_bottom(target)
