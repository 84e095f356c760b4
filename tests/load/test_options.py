"""Command-line options of the load test and the percentile it reports."""

from __future__ import annotations

import pytest

from benchmarks.load.__main__ import SOAK_DURATION, parse_args
from benchmarks.load.report import percentile


def test_defaults_run_the_devstack_for_two_minutes() -> None:
    """With no addresses the devstack is used; the default load lasts 120 s."""
    args = parse_args([])
    assert (args.zookeeper, args.duration, args.soak) == (None, 120.0, False)


def test_soak_runs_longer() -> None:
    """--soak without --duration runs the soak length."""
    assert parse_args(["--soak"]).duration == SOAK_DURATION


@pytest.mark.parametrize(
    "argv",
    [
        ["--zookeeper", "127.0.0.1:2181"],
        ["--zookeeper", "z:2181", "--s3", "http://s3", "--marker", "m:1", "--soak"],
    ],
)
def test_bad_combinations_are_refused(argv: list[str]) -> None:
    """An external stack needs all three addresses, and cannot be soaked (no deleter to
    restart)."""
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2


def test_percentiles() -> None:
    """p50 and p99 of 1..100 are 50 and 99; a single value is its own percentile."""
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile([3.0], 99)) == (
        50.5,
        99.01,
        3.0,
    )


def test_broker_style_needs_no_marker_address() -> None:
    """Broker-style brokers never call the marker: an external stack needs only ZooKeeper
    and S3; the failure share and the attempts' backoff are options."""
    args = parse_args(["--broker-style", "--zookeeper", "z:2181", "--s3", "http://s3"])
    assert (args.broker_style, args.marker, args.delete_failure_share, args.delete_backoff) == (
        True,
        None,
        0.2,
        1.0,
    )


def test_a_failure_share_outside_zero_to_one_is_refused() -> None:
    """--delete-failure-share is a share."""
    with pytest.raises(SystemExit) as exc:
        parse_args(["--broker-style", "--delete-failure-share", "1.5"])
    assert exc.value.code == 2
