"""Offload delete for the filesystem offloader: the ledger's MapFile directory
`<storageBasePath>/<mlName>/<ledgerId>-<uuid>` (local or mounted), removed recursively.

Defence in depth behind the verifier: whatever the evidence says, only a directory below the
configured root whose path below it is a canonical managed-ledger name followed by
`<ledgerId>-<uuid>` of this ledger is removed, and only when resolving it (symlinks, dot
segments) changes nothing below the root.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path, PurePosixPath

from services.core.errors import InvalidArgument
from services.deleter.ports import DeleteFailed, DeleteResult, Tier
from services.metadata.offload import check_uuid
from services.metadata.pulsar_names import check_managed_ledger_name
from tombstone.v1 import verifier_pb2 as _vf


class FilesystemOffloadDeleter:
    """`OffloadDeleter` confined to one base directory."""

    def __init__(self, base: Path) -> None:
        self._configured = Path(base).absolute()
        self._base = self._configured.resolve()

    async def delete_offloaded(
        self, *, ledger_id: int, evidence: _vf.OffloadEvidence
    ) -> DeleteResult:
        target = self.check(ledger_id, evidence)
        try:
            removed = await asyncio.to_thread(_remove, target)
        except OSError as exc:
            permanent = isinstance(exc, PermissionError)
            raise DeleteFailed(Tier.FILESYSTEM, f"{target}: {exc}", permanent=permanent) from exc
        if target.exists() or target.is_symlink():
            raise DeleteFailed(Tier.FILESYSTEM, f"{target} still exists after delete")
        return DeleteResult(Tier.FILESYSTEM, removed, {"path": str(target)})

    def check(self, ledger_id: int, evidence: _vf.OffloadEvidence) -> Path:
        """`DeleteFailed` unless the evidence names this ledger's file under the base; the
        file. No change on disk (a preview runs it too)."""
        return self._target(ledger_id, evidence.filesystem_path)

    def _target(self, ledger_id: int, raw: str) -> Path:
        if not raw:
            raise _refused("evidence has no filesystem path")
        if raw.startswith("file://"):
            raw = raw[len("file://") :]
        elif "://" in raw:
            raise _refused(f"{raw}: only local paths")
        below = self._below_root(raw)
        target = (self._base / below).resolve()
        # Resolution must change nothing below the root: a symlink or a dot segment there
        # could turn one owner's path into another's.
        if not target.is_relative_to(self._base) or target.relative_to(self._base) != below:
            raise _refused(f"{raw} resolves to {target}, not {self._base / below}")
        _check_layout(ledger_id, raw, PurePosixPath(below))
        return target

    def _below_root(self, raw: str) -> Path:
        """The path relative to the root, as written (no dot or empty segment accepted)."""
        parts = raw.split("/")
        if any(part in ("", ".", "..") for part in parts[1 if raw.startswith("/") else 0 :]):
            raise _refused(f"{raw} has an empty or dot segment")
        path = Path(raw)
        if not path.is_absolute():
            return path
        for root in (self._configured, self._base):
            if path.is_relative_to(root) and path != root:
                return path.relative_to(root)
        raise _refused(f"{raw} is outside {self._base}")


def _check_layout(ledger_id: int, raw: str, below: PurePosixPath) -> None:
    """`<canonical ML name>/<ledgerId>-<uuid>` of this ledger, nothing else."""
    leaf_id, dash, uuid = below.name.partition("-")
    if leaf_id != str(ledger_id) or not dash:
        raise _refused(f"{raw} is not an offload of ledger {ledger_id}")
    try:
        check_uuid(uuid)
        check_managed_ledger_name(str(below.parent))
    except InvalidArgument as exc:
        raise _refused(f"{raw} is not <managed ledger>/<ledgerId>-<uuid>: {exc}") from exc


def _refused(reason: str) -> DeleteFailed:
    return DeleteFailed(Tier.FILESYSTEM, reason, permanent=True)


def _remove(target: Path) -> bool:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
        return True
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True
