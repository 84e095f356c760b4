"""The terminal progress bars of the reconciler: bounded, honest about their unit, silent off a
terminal (a log file or a pipe must not fill with carriage returns)."""

from __future__ import annotations

import io

import pytest

from services.scan.progress import CountProgress, StepProgress, render


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_terminal(monkeypatch: pytest.MonkeyPatch) -> Terminal:
    # Patched inside the test: pytest re-captures sys.stderr between setup and call.
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    return screen


def test_render_names_its_unit() -> None:
    assert render(1, 4, "submit", "calls").endswith("] 1/4 calls")


def test_steps_count_up_to_their_number_and_end_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = on_terminal(monkeypatch)
    bar = StepProgress(("a", "b"), label="analysis")
    for step in ("a", "b", "extra"):
        bar.advance(step)
    frames = screen.getvalue().split("\r")[1:]
    assert [f.split("] ")[1].split(" steps")[0] for f in frames] == ["1/2", "2/2", "2/2"]
    assert frames[1].endswith("\n")


def test_count_draws_the_last_call_even_when_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = on_terminal(monkeypatch)
    bar = CountProgress(label="submit", unit="calls", interval=3600)
    for done in range(1, 6):
        bar.update(done, 5)
    frames = screen.getvalue().split("\r")[1:]
    assert (len(frames), frames[-1].split("] ")[1]) == (2, "5/5 calls\n")


def test_nothing_is_drawn_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    StepProgress(("a",), label="analysis").advance("a")
    CountProgress(label="submit", unit="calls").update(1, 1)
    assert pipe.getvalue() == ""
