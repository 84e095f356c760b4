"""`python -m services.cli` as a child process, for the tests that need the real process:
its own Spark, its own signals, its own stdout and stderr."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def spawn_cli(
    args: list[str], env: Mapping[str, str], *, own_session: bool = False
) -> asyncio.subprocess.Process:
    """The command with stdout and stderr piped apart; `own_session` puts it in a process
    group of its own (a test signals it, and reaps its children, as a terminal would)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.cli",
        *args,
        cwd=ROOT,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=own_session,
    )
