"""A wrong ledgers root or ZooKeeper chroot would make every ledger look absent, and absence
is acknowledged: the verifier and the deleter refuse to start instead, with one line."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.deleter_e2e.process import ROOT, deleter_env
from tests.verifier.world import World

WRONG = {
    "chroot": {"TOMBSTONE_ZOOKEEPER_CHROOT": "/another-cluster"},
    "root": {"TOMBSTONE_VERIFIER_LEDGERS_ROOT": "/bookkeeper/ledgers"},
}


def service_env(
    service: str, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, wrong: str
) -> dict[str, str]:
    env = deleter_env(zk, s3, broker, "127.0.0.1:1")
    extra = dict(WRONG[wrong])
    if service == "deleter" and wrong == "root":
        extra = {"TOMBSTONE_DELETER_LEDGERS_ROOT": extra["TOMBSTONE_VERIFIER_LEDGERS_ROOT"]}
    return {**env, **extra}


@pytest.mark.parametrize("wrong", sorted(WRONG))
@pytest.mark.parametrize("service", ["verifier", "deleter"])
async def test_a_wrong_root_or_chroot_is_refused_in_one_line(
    service: str,
    wrong: str,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
) -> None:
    """The cluster has `/ledgers` with its `LAYOUT` and `/managed-ledgers`, but the service
    is pointed elsewhere: it exits with status 2 and a one-line error, no traceback."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await World(store).bookkeeper_root()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        f"services.{service}",
        cwd=ROOT,
        env={**inherited, **service_env(service, zk, s3, broker, wrong)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    # The ZooKeeper client may add its own warning as the session closes; the error itself
    # is one line.
    refusals = [line for line in err.decode().splitlines() if line.startswith(f"{service}: ")]
    assert (process.returncode, len(refusals)) == (2, 1), err.decode()
    assert refusals[0].startswith(f"{service}: refusing to start: ")
    assert "does not exist" in refusals[0]
    assert "Traceback" not in out.decode() + err.decode()
