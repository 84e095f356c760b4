"""The submit options are checked when the command line is read, before any ZooKeeper, S3
or Spark work: a rate of 0 or below, or a concurrency or batch below 1, is a usage error
(exit 2) naming the option."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from services.scan.cli.reconcile import reconcile


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--submit-rate", "-1"),
        ("--submit-rate", "0"),
        ("--submit-concurrency", "0"),
        ("--submit-concurrency-min", "0"),
        ("--submit-batch", "0"),
    ],
)
@pytest.mark.parametrize("command", ["run", "analyze"])
def test_a_submit_option_out_of_range_is_a_usage_error(
    command: str, option: str, value: str
) -> None:
    result = CliRunner().invoke(reconcile, [command, option, value])
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.output
