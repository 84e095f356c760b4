"""Offload delete for the filesystem offloader: the ledger's MapFile directory
`<storageBasePath>/<mlName>/<ledgerId>-<uuid>` (local or mounted), removed recursively."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from services.deleter.ports import DeleteFailed, DeleteResult, Tier
from tombstone.v1 import verifier_pb2 as _vf


class FilesystemOffloadDeleter:
    """`OffloadDeleter` confined to one base directory."""

    def __init__(self, base: Path) -> None:
        self._base = base.resolve()

    async def delete_offloaded(
        self, *, ledger_id: int, evidence: _vf.OffloadEvidence
    ) -> DeleteResult:
        target = self._target(ledger_id, evidence.filesystem_path)
        try:
            removed = await asyncio.to_thread(_remove, target)
        except OSError as exc:
            permanent = isinstance(exc, PermissionError)
            raise DeleteFailed(Tier.FILESYSTEM, f"{target}: {exc}", permanent=permanent) from exc
        if target.exists() or target.is_symlink():
            raise DeleteFailed(Tier.FILESYSTEM, f"{target} still exists after delete")
        return DeleteResult(Tier.FILESYSTEM, removed, {"path": str(target)})

    def _target(self, ledger_id: int, raw: str) -> Path:
        if not raw:
            raise DeleteFailed(Tier.FILESYSTEM, "evidence has no filesystem path", permanent=True)
        if raw.startswith("file://"):
            raw = raw[len("file://") :]
        elif "://" in raw:
            raise DeleteFailed(Tier.FILESYSTEM, f"{raw}: only local paths", permanent=True)
        path = Path(raw)
        target = (path if path.is_absolute() else self._base / path).resolve()
        if not target.is_relative_to(self._base) or target == self._base:
            raise DeleteFailed(Tier.FILESYSTEM, f"{raw} is outside {self._base}", permanent=True)
        if not target.name.startswith(f"{ledger_id}-"):
            raise DeleteFailed(
                Tier.FILESYSTEM, f"{raw} is not an offload of ledger {ledger_id}", permanent=True
            )
        return target


def _remove(target: Path) -> bool:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
        return True
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True
