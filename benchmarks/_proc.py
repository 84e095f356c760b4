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
