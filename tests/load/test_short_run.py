"""Very short load tests against the devstack they start themselves: the marker (or, in
broker-style runs, the brokers) unlinks, the deleter deletes, the backlog drains and the
final S1/L1 check passes. The broker-style one needs the marker's follower."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.load.__main__ import main


@pytest.mark.slow
def test_short_load_run_passes_its_final_check(tmp_path: Path) -> None:
    """Exit code 0, something marked in both tiers and all of it deleted, and the plot and
    the JSON record written."""
    argv = ["--brokers", "2", "--topics", "2", "--rate", "8", "--duration", "6"]
    code = main([*argv, "--drain-timeout", "30", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "load-test.json").read_text())
    marked = record["figures"]["pdlis_marked"]
    assert (code, record["check"]["passed"], record["figures"]["drained"]) == (0, True, True)
    assert (marked["bookkeeper"] > 0, marked["offload"] > 0) == (True, True)
    assert (tmp_path / "load-test.png").stat().st_size > 0


@pytest.mark.slow
def test_broker_style_load_run_leaks_nothing_with_the_follower(tmp_path: Path) -> None:
    """`--broker-style`: the brokers trim without the marker and a share of their deletes
    fail; the marker's follower (`TOMBSTONE_MARKER_FOLLOW=true`, set by the devstack) turns
    every unlink into intents, so nothing leaks, S1 holds and the exit code is 0."""
    argv = ["--broker-style", "--brokers", "2", "--topics", "2", "--rate", "8"]
    argv += ["--duration", "6", "--delete-failure-share", "0.3", "--delete-backoff", "0.5"]
    code = main([*argv, "--drain-timeout", "15", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "load-test-broker.json").read_text())
    brokers = record["broker_style"]
    assert (brokers["leaked"], record["check"]["s1_violations"], code) == (0, [], 0)
    assert (brokers["unlinked_by_brokers"] > 0, brokers["delete_failures_injected"] > 0) == (
        True,
        True,
    )
