"""Where topics keep their entries and cursors: in memory, or in an append-only log on disk.

The disk layout under the data directory:

    broker.json                      namespaces, partitioned topics, the next ledger id
    topics/<quoted topic>/entries.log   records: ledger id, entry id, size, stored bytes
    topics/<quoted topic>/cursors/<quoted subscription>.json   one snapshot per subscription

Writes are not fsynced: the files survive a killed broker process (the page cache keeps
them), which is what the devstack needs. A record cut short by a kill is ignored on load.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, unquote

from .entries import Entry, entry_from_stored

_RECORD = struct.Struct(">QQI")


class TopicStore(ABC):
    """The entries and cursor snapshots of one topic."""

    @abstractmethod
    def append(self, entry: Entry) -> None: ...

    @abstractmethod
    def load_entries(self) -> list[Entry]: ...

    @abstractmethod
    def save_cursor(self, subscription: str, snapshot: dict[str, Any]) -> None: ...

    @abstractmethod
    def delete_cursor(self, subscription: str) -> None: ...

    @abstractmethod
    def load_cursors(self) -> dict[str, dict[str, Any]]: ...

    @abstractmethod
    def close(self) -> None: ...


class Store(ABC):
    """Broker-wide metadata and the per-topic stores."""

    @abstractmethod
    def topic(self, name: str) -> TopicStore: ...

    @abstractmethod
    def topic_names(self) -> list[str]: ...

    @abstractmethod
    def delete_topic(self, name: str) -> None: ...

    @abstractmethod
    def load_meta(self) -> dict[str, Any]: ...

    @abstractmethod
    def save_meta(self, meta: dict[str, Any]) -> None: ...


class MemoryTopicStore(TopicStore):
    """Nothing to keep: the topic's own lists are the only copy."""

    def append(self, entry: Entry) -> None:
        pass

    def load_entries(self) -> list[Entry]:
        return []

    def save_cursor(self, subscription: str, snapshot: dict[str, Any]) -> None:
        pass

    def delete_cursor(self, subscription: str) -> None:
        pass

    def load_cursors(self) -> dict[str, dict[str, Any]]:
        return {}

    def close(self) -> None:
        pass


class MemoryStore(Store):
    def __init__(self) -> None:
        self._meta: dict[str, Any] = {}

    def topic(self, name: str) -> TopicStore:
        return MemoryTopicStore()

    def topic_names(self) -> list[str]:
        return []

    def delete_topic(self, name: str) -> None:
        pass

    def load_meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def save_meta(self, meta: dict[str, Any]) -> None:
        self._meta = dict(meta)


def _write_json(path: Path, value: object) -> None:
    """Replace a JSON file atomically (write aside, then rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


class DiskTopicStore(TopicStore):
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._cursors = directory / "cursors"
        self._cursors.mkdir(parents=True, exist_ok=True)
        self._log: BinaryIO | None = None

    def append(self, entry: Entry) -> None:
        if self._log is None:
            self._log = open(self._dir / "entries.log", "ab")  # noqa: SIM115 - kept open
        header = _RECORD.pack(entry.ledger_id, entry.entry_id, len(entry.stored))
        self._log.write(header + entry.stored)
        self._log.flush()

    def load_entries(self) -> list[Entry]:
        path = self._dir / "entries.log"
        if not path.exists():
            return []
        data = path.read_bytes()
        entries: list[Entry] = []
        offset = 0
        while offset + _RECORD.size <= len(data):
            ledger_id, entry_id, size = _RECORD.unpack_from(data, offset)
            end = offset + _RECORD.size + size
            if end > len(data):
                break  # cut short by a kill: the producer never got a receipt for it
            entries.append(
                entry_from_stored(ledger_id, entry_id, data[offset + _RECORD.size : end])
            )
            offset = end
        if offset != len(data):
            with open(path, "r+b") as log:
                log.truncate(offset)
        return entries

    def save_cursor(self, subscription: str, snapshot: dict[str, Any]) -> None:
        _write_json(self._cursors / f"{quote(subscription, safe='')}.json", snapshot)

    def delete_cursor(self, subscription: str) -> None:
        (self._cursors / f"{quote(subscription, safe='')}.json").unlink(missing_ok=True)

    def load_cursors(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for path in self._cursors.glob("*.json"):
            found[unquote(path.stem)] = json.loads(path.read_text())
        return found

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class DiskStore(Store):
    def __init__(self, data_dir: Path) -> None:
        self._root = data_dir
        self._topics = data_dir / "topics"
        self._topics.mkdir(parents=True, exist_ok=True)

    def _topic_dir(self, name: str) -> Path:
        return self._topics / quote(name, safe="")

    def topic(self, name: str) -> TopicStore:
        return DiskTopicStore(self._topic_dir(name))

    def topic_names(self) -> list[str]:
        return sorted(unquote(p.name) for p in self._topics.iterdir() if p.is_dir())

    def delete_topic(self, name: str) -> None:
        shutil.rmtree(self._topic_dir(name), ignore_errors=True)

    def load_meta(self) -> dict[str, Any]:
        path = self._root / "broker.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def save_meta(self, meta: dict[str, Any]) -> None:
        _write_json(self._root / "broker.json", meta)
