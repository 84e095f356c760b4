"""The SIGINT guard of a reconcile command, without Spark: what counts as an interrupt."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator

import pytest

from services.scan.cli.run_guard import EXIT_INTERRUPTED, interruptible


class NetworkError(Exception):
    """Stands for py4j's Py4JNetworkError: the type does not matter, its context does."""


@pytest.fixture(autouse=True)
def keep_sigint_handler() -> Iterator[None]:
    """The guard ignores a second Ctrl-C while it cleans up; the test process gets its own
    handler back."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


def _cut_mid_call() -> None:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        # py4j's clean-up call after the interrupt fails, and its error replaces it.
        raise NetworkError("Answer from Java side is empty") from None


def test_an_error_raised_while_handling_the_interrupt_is_the_interrupt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info, interruptible(lambda: "partial run left in X"):
        _cut_mid_call()
    assert exit_info.value.code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == ["interrupted: partial run left in X"]


def test_any_other_error_goes_on_as_it_is() -> None:
    with pytest.raises(NetworkError), interruptible(lambda: "unused"):
        raise NetworkError("a real failure")


@pytest.fixture
def root_handler(capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    """The command's logging: one handler on the root logger, writing to (captured) stderr."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    root.addHandler(handler)
    yield
    root.removeHandler(handler)


def _interrupted_with_a_logged_clean_up_failure() -> None:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            logging.getLogger("py4j.clientserver").exception(
                "Exception occurred while shutting down connection"
            )
        raise


def test_py4j_clean_up_failures_after_the_interrupt_are_not_printed(
    root_handler: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """py4j's `ClientServerConnection.shutdown_socket` logs, on its own child logger, the
    `BrokenPipeError` of a connection the interrupt cut, with the KeyboardInterrupt as its
    context (py4j 0.10.9); a filter on the root logger itself never sees such a record."""
    with pytest.raises(SystemExit) as exit_info, interruptible(lambda: "partial run left in X"):
        _interrupted_with_a_logged_clean_up_failure()
    assert exit_info.value.code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == ["interrupted: partial run left in X"]


def test_other_py4j_errors_are_still_printed(
    root_handler: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with interruptible(lambda: "unused"):
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            logging.getLogger("py4j.clientserver").exception("shutting down")
    assert "BrokenPipeError" in capsys.readouterr().err
