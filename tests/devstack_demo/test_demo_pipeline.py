"""The demo's trim-and-delete summary."""

from __future__ import annotations

from devstack.demo_pipeline import Summary


def test_summary_lists_every_figure() -> None:
    """Marked, deleted by tier, skipped, dead-lettered and the time, one line each."""
    summary = Summary(
        ledgers_marked=31,
        pdlis_sent=37,
        deleted={"s3": 9, "bookkeeper": 28},
        skipped={"in_use": 1},
        seconds=26.54,
    )
    assert summary.render().splitlines() == [
        "marked: 31 ledgers (37 PDLIs), 0 not marked",
        "deleted: bookkeeper 28, s3 9",
        "skipped: in_use 1",
        "dead-lettered: none",
        "time: 26.5s",
    ]
