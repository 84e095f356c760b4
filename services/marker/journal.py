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

File format, one line per recorded call: `<ms>\\t<version>\\t<ledger>:<tier>,...\\t<path>`.
"""

from __future__ import annotations

import os
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import structlog

_log = structlog.get_logger(__name__)


class IntentKey(NamedTuple):
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
        self._owners: Counter[tuple[str, int]] = Counter()
        self._fd: int | None = None
        self._lines = 0
        self._next_handle = 0
        # Calls whose receipts are in the file but whose owner write is not settled yet:
        # compaction must keep them.
        self._unsettled: dict[int, tuple[str, int, Sequence[tuple[int, int]], int]] = {}

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

    def knows(self, path: str, version: int) -> bool:
        """Whether any receipt of this owner version is kept (one lookup per call)."""
        return self._owners[(path, version)] > 0

    def accepted_at(self, key: IntentKey) -> int | None:
        """When the topic accepted this PDLI (ms since the epoch), if within the window."""
        at = self._entries.get(key)
        if at is None or self._clock() - at >= self._window_ms:
            return None
        return at

    def append(
        self, path: str, version: int, accepted: Sequence[tuple[int, int]], at_ms: int
    ) -> int:
        """Write these receipts to the file at once, so a marker killed before its owner
        write finds them when it comes back. Returns a handle for `settle`."""
        self._next_handle += 1
        if accepted:
            self._unsettled[self._next_handle] = (path, version, accepted, at_ms)
            if self._fd is not None:
                os.write(self._fd, _line(path, version, accepted, at_ms).encode())
                self._lines += 1
                if self._lines > max(10_000, 2 * (len(self._entries) + len(self._unsettled))):
                    self._compact()
        return self._next_handle

    def settle(self, handle: int, *, unlinked: bool) -> None:
        """The call of `handle` ended. Unless it unlinked its ledgers, a retry at the same
        version may come, so its receipts stay in memory (receipts of calls that unlinked are
        never needed again)."""
        call = self._unsettled.pop(handle, None)
        if call is not None and not unlinked:
            self.remember(*call)

    def remember(
        self, path: str, version: int, accepted: Sequence[tuple[int, int]], at_ms: int
    ) -> None:
        """Keep these receipts in memory for the retry window."""
        for ledger_id, tier in accepted:
            self._add(IntentKey(path, version, ledger_id, tier), at_ms)
        self._evict()

    def record(
        self, path: str, version: int, accepted: Sequence[tuple[int, int]], at_ms: int
    ) -> None:
        """Receipts of a call that did not unlink: `append` then `settle`."""
        self.settle(self.append(path, version, accepted, at_ms), unlinked=False)

    def forget(self, keys: Iterable[IntentKey]) -> None:
        """Drop entries that no request can match any more (their version was written over)."""
        for key in keys:
            if self._entries.pop(key, None) is not None:
                self._owners[(key.path, key.version)] -= 1

    def __len__(self) -> int:
        return len(self._entries)

    def _add(self, key: IntentKey, at_ms: int) -> None:
        if key not in self._entries:
            self._owners[(key.path, key.version)] += 1
        self._entries[key] = at_ms
        self._entries.move_to_end(key)

    def _evict(self) -> None:
        horizon = self._clock() - self._window_ms
        while self._entries:
            key, at = next(iter(self._entries.items()))
            if at > horizon and len(self._entries) <= self._max:
                break
            self.forget([key])

    def _load(self, text: str) -> None:
        for raw in text.splitlines():
            for key, at in _parse(raw):
                self._add(key, at)
        self._evict()

    def _compact(self) -> None:
        assert self._file is not None
        self.close()
        tmp = self._file.with_suffix(".tmp")
        lines = [
            _line(k.path, k.version, [(k.ledger_id, k.tier)], at) for k, at in self._entries.items()
        ]
        lines += [_line(*call[:3], call[3]) for call in self._unsettled.values()]
        tmp.write_text("".join(lines), encoding="utf-8")
        tmp.replace(self._file)
        self._fd = os.open(self._file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lines = len(lines)


def _line(path: str, version: int, accepted: Sequence[tuple[int, int]], at_ms: int) -> str:
    items = ",".join(f"{ledger}:{tier}" for ledger, tier in accepted)
    # The path goes last: it is the only free-form field.
    return f"{at_ms}\t{version}\t{items}\t{path}\n"


def _parse(raw: str) -> list[tuple[IntentKey, int]]:
    """One line's entries, or none for a torn or foreign line (a crash mid-write may leave
    one)."""
    parts = raw.split("\t", 3)
    if len(parts) != 4 or not parts[3].startswith("/"):
        return []
    try:
        at, version = int(parts[0]), int(parts[1])
        pairs = [item.split(":") for item in parts[2].split(",")]
        return [(IntentKey(parts[3], version, int(i), int(t)), at) for i, t in pairs]
    except ValueError:
        return []
