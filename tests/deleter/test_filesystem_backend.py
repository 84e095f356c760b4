"""The filesystem offloader backend, on a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.deleter.backends.filesystem import FilesystemOffloadDeleter
from services.deleter.ports import DeleteFailed
from tombstone.v1 import verifier_pb2 as _vf

UUID = "0b4c3a52-5d1e-4c55-9a3b-1f2e3d4c5b6a"


def evidence(path: str) -> _vf.OffloadEvidence:
    return _vf.OffloadEvidence(driver_name="filesystem", filesystem_path=path)


def mapfile(base: Path, ledger_id: int) -> Path:
    directory = base / "t" / "ns" / "persistent" / "topic" / f"{ledger_id}-{UUID}"
    directory.mkdir(parents=True)
    (directory / "data").write_bytes(b"x")
    (directory / "index").write_bytes(b"x")
    return directory


async def test_removes_the_mapfile_directory(tmp_path: Path) -> None:
    """The ledger's MapFile directory is removed; a sibling ledger's stays."""
    target, sibling = mapfile(tmp_path, 1), mapfile(tmp_path, 2)
    result = await FilesystemOffloadDeleter(tmp_path).delete_offloaded(
        ledger_id=1, evidence=evidence(f"file://{target}")
    )
    assert (result.removed, target.exists(), sibling.exists()) == (True, False, True)


async def test_absent_path_counts_as_deleted(tmp_path: Path) -> None:
    """A path that is already gone is success, reported as not removed by us."""
    result = await FilesystemOffloadDeleter(tmp_path).delete_offloaded(
        ledger_id=1, evidence=evidence(str(tmp_path / f"t/ns/persistent/x/1-{UUID}"))
    )
    assert False is result.removed


@pytest.mark.parametrize("path", ["/etc", "../outside/1-x", "t/2-other", "hdfs://nn/t/1-x"])
async def test_paths_outside_the_base_or_of_other_ledgers_are_refused(
    tmp_path: Path, path: str
) -> None:
    """Nothing outside the base directory, of another ledger, or remote is deleted."""
    with pytest.raises(DeleteFailed) as failure:
        await FilesystemOffloadDeleter(tmp_path / "base").delete_offloaded(
            ledger_id=1, evidence=evidence(path)
        )
    assert failure.value.permanent


@pytest.mark.parametrize(
    "below",
    [
        f"t/ns/./persistent/topic/1-{UUID}",
        f"t/ns/persistent/topic/../topic/1-{UUID}",
        f"t//ns/persistent/topic/1-{UUID}",
        f"t/ns/persistent/topic/1-{UUID}/",
        f"t/ns/persistent/%2E%2E/1-{UUID}",
        f"t/ns/topic/1-{UUID}",
        f"1-{UUID}",
        "t/ns/persistent/topic/1-not-a-uuid",
    ],
)
async def test_aliases_of_a_live_directory_are_refused(tmp_path: Path, below: str) -> None:
    """A path with dot or empty segments, or that is not `<canonical ML>/<id>-<uuid>`, is
    refused before anything is touched, even where it would resolve to a real directory."""
    live = mapfile(tmp_path, 1)
    with pytest.raises(DeleteFailed) as failure:
        await FilesystemOffloadDeleter(tmp_path).delete_offloaded(
            ledger_id=1, evidence=evidence(f"file://{tmp_path}/{below}")
        )
    assert (failure.value.permanent, live.exists()) == (True, True)


async def test_a_symlink_below_the_root_is_refused(tmp_path: Path) -> None:
    """A path that resolves elsewhere through a symlink below the root (here another
    topic's directory) is refused: resolution must change nothing below the root."""
    live = mapfile(tmp_path, 1)
    (tmp_path / "t" / "ns" / "persistent" / "alias").symlink_to(live.parent)
    with pytest.raises(DeleteFailed) as failure:
        await FilesystemOffloadDeleter(tmp_path).delete_offloaded(
            ledger_id=1, evidence=evidence(f"{tmp_path}/t/ns/persistent/alias/1-{UUID}")
        )
    assert (failure.value.permanent, live.exists()) == (True, True)


async def test_a_symlinked_root_is_followed(tmp_path: Path) -> None:
    """The configured root itself may be a symlink (a mount point): paths under either
    spelling of it are accepted."""
    real = tmp_path / "real"
    target = mapfile(real, 1)
    (tmp_path / "root").symlink_to(real)
    deleter = FilesystemOffloadDeleter(tmp_path / "root")
    below = target.relative_to(real)
    result = await deleter.delete_offloaded(
        ledger_id=1, evidence=evidence(f"file://{tmp_path / 'root' / below}")
    )
    assert (result.removed, target.exists()) == (True, False)
