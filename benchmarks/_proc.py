"""What a benchmark reads of a process from /proc: figures the machine's load barely moves."""

from __future__ import annotations

import os
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds process `pid` has used so far, every thread; NaN when the
    process is unknown or gone."""
    if pid is None:
        return float("nan")
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return float("nan")
    # The fields after the command name's closing parenthesis: utime and stime are the 12th
    # and 13th (the name itself may hold spaces and parentheses).
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def thread_cpu_seconds(pid: int | None) -> dict[int, tuple[str, float]]:
    """Per thread id of `pid`: its name (the kernel's `comm`, at most 15 characters; threads
    a library starts without naming them keep the process's) and the user + system CPU
    seconds it used so far; empty when the process is unknown or gone. A thread that ended
    between two reads drops out of the later one."""
    if pid is None:
        return {}
    threads: dict[int, tuple[str, float]] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return {}
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue  # the thread ended
        # comm sits between the first "(" and the last ")"; it may hold either.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        threads[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS)
    return threads
