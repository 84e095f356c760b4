"""End to end with the filesystem offloader: trimmed offloaded ledgers lose their MapFile
directories, listed ones keep theirs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel, OffloadDriver
from devstack.zookeeper import ZooKeeperServer
from services.metadata import uuid_to_bits
from services.systopic import encode_intent
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
from tests.deleter_e2e.test_bad_input import publish
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


def dot_segment_forgeries(model: ClusterModel) -> list[_pd.PendingDeleteLedgerInfo]:
    """OFFLOAD_LEDGER PDLIs for a listed, filesystem-offloaded ledger, whose ML name has a
    `.` segment: `t/ns/./persistent/x` (namespace `.` of cluster `ns`) and
    `t/./ns/persistent/x` (cluster `.`). Both look like V1 names of an owner that does not
    exist, and both resolve to the live ledger's directory `<base>/t/ns/persistent/x/...`."""
    ml, info = next(
        (m, i) for m in model.managed_ledgers.values() for i in m.ledgers if i.offload is not None
    )
    assert info.offload is not None
    msb, lsb = uuid_to_bits(info.offload.uuid)
    context = _pd.OffloadContext(
        uuid_msb=msb, uuid_lsb=lsb, driver_name="filesystem", complete=True
    )
    context.driver_metadata.update(dict(info.offload.driver_properties))
    tenant, namespace, *rest = ml.name.split("/")
    aliases = ["/".join([tenant, namespace, ".", *rest]), "/".join([tenant, ".", namespace, *rest])]
    return [
        _pd.PendingDeleteLedgerInfo(
            ledger_id=info.ledger_id,
            ledger_type=_pd.OFFLOAD_LEDGER,
            component=_pd.MANAGED_LEDGER,
            managed_ledger_name=alias,
            offload_context=context,
            source=_pd.BROKER,
            fence_token=0,
        )
        for alias in aliases
    ]


async def test_a_dot_segment_alias_of_a_live_directory_is_dead_lettered_as_invalid(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """Forged PDLIs whose ML name aliases a listed ledger's MapFile directory through a dot
    segment, produced onto the system topic with the real client: nothing is deleted and both
    PDLIs are in the DLQ as `invalid`, naming the field."""
    base = tmp_path / "offload"
    spec = replace(
        SMALL_SPEC, offload_driver=OffloadDriver.FILESYSTEM, filesystem_base=f"file://{base}"
    )
    create_topics(broker)
    model = await write_cluster(zk, s3, spec)
    directories = mapfiles(model, base)
    forged = dot_segment_forgeries(model)
    await publish(broker, [encode_intent(p) for p in forged])
    async with running_verifier(zk, s3, frozenset({f"file://{base}"})) as verifier:
        config = deleter_config(zk, s3, broker, verifier, filesystem_root=base)
        async with running_deleter(config) as running:
            status = await drained(running.deleter)
            letters, _ = await running.deleter.admin.list_dead_letters(limit=10)
    assert [d for d in directories.values() if not d.exists()] == []
    assert status.dead_letters_by_reason == {"invalid": 2}
    assert sorted(letter.pdli.managed_ledger_name for letter in letters if letter.pdli) == sorted(
        p.managed_ledger_name for p in forged
    )
    assert all("managed_ledger_name" in letter.reason for letter in letters), letters
