"""Which intents the system topic already accepted, so a retried Mark does not resend them.

A Mark whose write did not happen (the marker was killed between send and write, or the
write failed with the store unavailable) is retried by its caller at the same owner version.
Its PDLIs are then identical (same owner, version, ledger, tier and fence token) and already
on the topic. The journal remembers those receipts for the retry window, in memory and
optionally in an append-only file that survives a restart of the marker, so the retry counts
them as accepted instead of sending duplicates.

Only receipts are recorded (never "about to send"): an entry is proof that the topic stored
that PDLI. The file is written without fsync: a killed process loses nothing (the kernel has
the data); a machine crash may lose the last entries, which only costs duplicate PDLIs,
harmless because deletion is idempotent. Entries older than the retry window are useless
(the deleter may have given up on those PDLIs) and are dropped.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import structlog

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class IntentKey:
    """One PDLI's identity: the same key means the same PDLI content (same fence token)."""

    path: str
    version: int
    ledger_id: int
    tier: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReceiptJournal:
    """Accepted intents of the last `retry_window`, bounded to `max_entries`."""

    def __init__(
        self,
        *,
        retry_window: timedelta,
        file: Path | None = None,
        max_entries: int = 1_000_000,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._window_ms = int(retry_window.total_seconds() * 1000)
        self._file = file
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[IntentKey, int] = OrderedDict()
        self._fd: int | None = None
        self._lines = 0

    def open(self) -> None:
        """Load the live entries of the file and rewrite it with only those."""
        if self._file is None:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        if self._file.exists():
            self._load(self._file.read_text(encoding="utf-8"))
        self._compact()
        _log.info("journal_opened", file=str(self._file), entries=len(self._entries))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def accepted_at(self, key: IntentKey) -> int | None:
        """When the topic accepted this PDLI (ms since the epoch), if within the window."""
        at = self._entries.get(key)
        if at is None or self._clock() - at >= self._window_ms:
            return None
        return at

    def record(self, keys: Iterable[IntentKey], at_ms: int) -> None:
        lines = []
        for key in keys:
            self._entries[key] = at_ms
            self._entries.move_to_end(key)
            lines.append(_line(key, at_ms))
        self._evict()
        if self._fd is not None and lines:
            os.write(self._fd, "".join(lines).encode())
            self._lines += len(lines)
            if self._lines > 2 * self._max:
                self._compact()

    def forget(self, keys: Iterable[IntentKey]) -> None:
        """Drop entries that no request can match any more (their version was written over)."""
        for key in keys:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        horizon = self._clock() - self._window_ms
        while self._entries:
            at = next(iter(self._entries.values()))
            if at > horizon and len(self._entries) <= self._max:
                break
            self._entries.popitem(last=False)

    def _load(self, text: str) -> None:
        for raw in text.splitlines():
            parsed = _parse(raw)
            if parsed is not None:
                self._entries[parsed[0]] = parsed[1]
        self._evict()

    def _compact(self) -> None:
        assert self._file is not None
        self.close()
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text("".join(_line(k, at) for k, at in self._entries.items()), encoding="utf-8")
        tmp.replace(self._file)
        self._fd = os.open(self._file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lines = len(self._entries)


def _line(key: IntentKey, at_ms: int) -> str:
    # The path goes last: it is the only field that could contain a tab-free free-form text.
    return f"{at_ms}\t{key.version}\t{key.ledger_id}\t{key.tier}\t{key.path}\n"


def _parse(raw: str) -> tuple[IntentKey, int] | None:
    """One line, or None for a torn or foreign line (a crash mid-write may leave one)."""
    parts = raw.split("\t", 4)
    if len(parts) != 5 or not parts[4].startswith("/"):
        return None
    try:
        at, version, ledger, tier = (int(p) for p in parts[:4])
    except ValueError:
        return None
    return IntentKey(parts[4], version, ledger, tier), at
