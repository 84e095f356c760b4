"""Waits and small utilities shared by the tests."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.signing import IntentSigner, TrustedKeys

T = TypeVar("T")


def signing_pair(key_id: str) -> tuple[IntentSigner, TrustedKeys]:
    """A fresh Ed25519 key under `key_id`: the signer that signs with it, and the trusted
    keys a verifier needs to accept what it signed."""
    key = Ed25519PrivateKey.generate()
    return IntentSigner({key_id: key}, key_id), TrustedKeys({key_id: key.public_key()})


async def assert_eventually(
    check: Callable[[], Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.05
) -> T:
    """Await `check` until it stops raising AssertionError; re-raise the last one on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)


ROOT = Path(__file__).resolve().parents[1]
READ_TIMEOUT = 30.0


class LoggedProcess:
    """`python -m MODULE` run from the project root, its JSON log lines on stdout parsed as
    they come (other lines, such as the Pulsar client's own, are skipped)."""

    def __init__(self, process: asyncio.subprocess.Process, module: str) -> None:
        self.process = process
        self.module = module
        self.events: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, module: str, env: Mapping[str, str]) -> LoggedProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(process, module)

    async def wait_for(self, event: str) -> dict[str, Any]:
        """The next log record whose `event` is `event`; fails if the process exits first."""
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), READ_TIMEOUT)
            assert line, f"{self.module} exited before logging {event}: {self.events}"
            try:
                record: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.events.append(record)
            if record.get("event") == event:
                return record
