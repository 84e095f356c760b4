"""The SIGINT guard of a reconcile command, without Spark: what counts as an interrupt."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from services.scan.run_guard import EXIT_INTERRUPTED, interruptible


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
