"""The demo's trim-and-delete summary."""

from __future__ import annotations

from devstack.demo_pipeline import Summary


def test_summary_lists_every_figure() -> None:
    """Marked, deleted by tier, skipped, dead-lettered, one line per artifact kind, the time
    and the check, a line each."""
    summary = Summary(
        ledgers_marked=31,
        pdlis_sent=37,
        deleted={"s3": 9, "bookkeeper": 28},
        skipped={"in_use": 1},
        artifacts=["  data ledger: deleted 28", "  pre-2.2 ledger: dead-lettered(unsupported) 1"],
        seconds=26.54,
    )
    assert summary.render().splitlines() == [
        "marked: 31 ledgers (37 PDLIs), 0 not marked",
        "deleted: bookkeeper 28, s3 9",
        "skipped: in_use 1",
        "dead-lettered: none",
        "per artifact (unlinked ledger tiers):",
        "  data ledger: deleted 28",
        "  pre-2.2 ledger: dead-lettered(unsupported) 1",
        "time: 26.5s",
        "check: S1 and L1 hold (what the protocol unlinked is gone or dead-lettered with a "
        "reason, everything else is kept)",
    ]


def test_summary_names_the_problems() -> None:
    """A failed final check says how many problems and which."""
    summary = Summary(problems=["S1: ledger 7 was deleted", "L1: object k remains"])
    assert summary.render().splitlines()[-1] == (
        "check: 2 problems: S1: ledger 7 was deleted; L1: object k remains"
    )
