"""End to end with the filesystem offloader: trimmed offloaded ledgers lose their MapFile
directories, listed ones keep theirs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel, OffloadDriver
from devstack.zookeeper import ZooKeeperServer
from tests.deleter.stack import (
    SMALL_SPEC,
    create_topics,
    deleter_config,
    drained,
    mark_trims,
    running_deleter,
    running_marker,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import listed_now
from tombstone.v1 import pending_delete_pb2 as _pd


def mapfiles(model: ClusterModel, base: Path) -> dict[int, Path]:
    """Create each offloaded ledger's MapFile directory where the offloader would have."""
    made = {}
    for ml in model.managed_ledgers.values():
        for info in ml.ledgers:
            if info.offload is None:
                continue
            directory = base / ml.name / f"{info.ledger_id}-{info.offload.uuid}"
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "data").write_bytes(b"entries")
            (directory / "index").write_bytes(b"index")
            made[info.ledger_id] = directory
    return made


async def test_filesystem_offloads_of_trimmed_ledgers_are_removed(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """Directories of unlinked offloaded ledgers are gone; those of listed ledgers stay."""
    base = tmp_path / "offload"
    spec = replace(
        SMALL_SPEC, offload_driver=OffloadDriver.FILESYSTEM, filesystem_base=f"file://{base}"
    )
    create_topics(broker)
    model = await write_cluster(zk, s3, spec)
    directories = mapfiles(model, base)
    async with running_verifier(zk, s3, frozenset({f"file://{base}"})) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            marked = await mark_trims(marker, model)
        config = deleter_config(zk, s3, broker, verifier, filesystem_root=base)
        async with running_deleter(config) as running:
            status = await drained(running.deleter)
    listed, _ = await listed_now(zk, model)
    unlinked = marked[_pd.OFFLOAD_LEDGER] - listed
    assert unlinked
    assert [i for i in unlinked if directories[i].exists()] == []
    kept = set(directories) - unlinked
    assert kept == {i for i in kept if directories[i].exists()}
    assert status.dead_letter_backlog == 0
