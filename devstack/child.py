"""One child server process, as every devstack launcher runs it.

Output goes to a log file (so a failed start can show why), stdin is closed, and stopping is
always SIGTERM, a bounded wait, then SIGKILL: a hung server never hangs a test run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class ChildProcess:
    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    def spawn(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(
                list(command),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
            )

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def exited_with(self) -> int | None:
        """The exit code if the child was started and has exited, else None."""
        return self._proc.poll() if self._proc is not None else None

    def log_tail(self, size: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-size:]

    def stop(self, timeout: float = 10.0, *, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """`sig` (SIGTERM by default), wait up to `timeout`, then SIGKILL. Returns the exit
        code (None if never started)."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(sig)
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        code = self._proc.returncode
        self._proc = None
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, as a power loss would be."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def send_signal(self, sig: signal.Signals) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, sig)

    def wait_all_threads_stopped(self, timeout: float = 5.0) -> None:
        """After SIGSTOP: wait until every thread of the child is in the stopped state.

        The signal is delivered asynchronously; until each thread has stopped, a thread still
        running on another core could answer one more request.
        """
        if self._proc is None:
            return
        tasks = Path(f"/proc/{self._proc.pid}/task")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = [_thread_state(t) for t in tasks.iterdir()] if tasks.exists() else []
            if states and all(state in {"T", "t", None} for state in states):
                return
            time.sleep(0.005)
        raise TimeoutError(f"child {self._proc.pid} did not stop within {timeout}s")


def _thread_state(task: Path) -> str | None:
    """The state letter of one thread (None if it exited meanwhile)."""
    try:
        stat = (task / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: the state follows the last ')'.
    return stat[stat.rindex(")") + 2]
