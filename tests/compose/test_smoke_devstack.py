"""The smoke script's checking steps against the devstack: a real ZooKeeper and moto's S3
server holding a simulated cluster that the marker trimmed and the deleter cleaned.

`check_bookkeeper` and `check_objects` from compose/smoke.sh run unchanged (their waits,
parsers and set comparisons); only the two listing commands differ from the Compose stack:
ZooKeeper's own shell (`org.apache.zookeeper.ZooKeeperMain ... ls -R /ledgers`, the class
`bin/pulsar zookeeper-shell` runs, here from Debian's zookeeper.jar) instead of the one in the
zookeeper container, and the bucket listed over S3 instead of with `mc` in the minio-init
container. The cluster is written by the devstack simulator in Pulsar's formats (its writers
name their sources).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZOOKEEPER_JAR, ZooKeeperServer
from services.marker.marking import Marker
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from tests.compose.stack_files import ROOT
from tests.deleter.stack import (
    BUCKET,
    create_topics,
    run_deleter_until_drained,
    running_marker,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import cursor_and_schema_ledgers_now, listed_now, objects_in_s3
from tombstone.v1 import pending_delete_pb2 as _pd

SMOKE = ROOT / "compose" / "smoke.sh"
JAVA = shutil.which("java") or "java"

# The bucket's keys, one per line (the key is the last field, as in `mc ls`).
_LIST_KEYS = """
import json, sys, boto3
client = boto3.client("s3", **json.loads(sys.argv[1]))
for page in client.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[2]):
    for item in page.get("Contents", []):
        print(item["Key"])
"""


def _ids(values: set[int]) -> str:
    return " ".join(str(v) for v in sorted(values))


def _complete(keys: set[str]) -> set[int]:
    """Ledger ids with both the data object and the index object."""
    data = {int(k.rsplit("-ledger-", 1)[1]) for k in keys if not k.endswith("-index")}
    index = {
        int(k.rsplit("-ledger-", 1)[1][: -len("-index")]) for k in keys if k.endswith("-index")
    }
    return data & index


def run_checks(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path, sets: dict[str, set[int]], wait: int
) -> subprocess.CompletedProcess[str]:
    """Source the smoke script, point its two listings at the devstack, run its checks."""
    lister = tmp_path / "list_keys.py"
    lister.write_text(_LIST_KEYS)
    script = f"""
source {SMOKE}
zk_listing() {{
    {JAVA} -Xmx64m -cp {ZOOKEEPER_JAR} org.apache.zookeeper.ZooKeeperMain \\
        -server {zk.address} ls -R "$LEDGERS_ROOT" 2>/dev/null
}}
object_listing() {{
    {sys.executable} {lister} '{json.dumps(s3.client_config())}' {BUCKET}
}}
check_bookkeeper "{_ids(sets["trimmed"])}" "{_ids(sets["kept"])}"
check_objects "{_ids(sets["trimmed_offloaded"])}" "{_ids(sets["kept_offloaded"])}"
exit $((FAILURES > 0))
"""
    env = {"PATH": "/usr/bin:/bin", "SMOKE_WAIT": str(wait), "SMOKE_POLL": "1"}
    return subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False
    )


async def _trim_first_half(marker: Marker, model: ClusterModel) -> dict[int, set[int]]:
    """What the smoke script does to its topic, to every topic: the first half of its ledgers
    leave the list (through the marker), the rest (offloaded ones among them) stay."""
    marked: dict[int, set[int]] = {_pd.LEDGER: set(), _pd.OFFLOAD_LEDGER: set()}
    for ml in model.managed_ledgers.values():
        ids = ml.ledger_ids[: len(ml.ledger_ids) // 2]
        if not ids or ml.shadow_source:
            continue
        owner = resolve_owner(
            _pd.MANAGED_LEDGER, topic_name="", ml_name=ml.name, cursor_name="", schema_id=""
        )
        result = await marker.mark(MarkRequest(owner=owner, ledger_ids=tuple(ids)))
        for ledger_id, tiers in result.marked:
            for tier in tiers:
                marked[tier].add(ledger_id)
    return marked


async def _trimmed_cluster(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> dict[str, set[int]]:
    """Write a cluster, trim it through the marker, let the deleter drain; the ledger sets the
    smoke script's checks take, read back from ZooKeeper and S3."""
    create_topics(broker)
    model = await write_cluster(zk, s3)
    complete_before = _complete(objects_in_s3(s3))
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            marked = await _trim_first_half(marker, model)
        await run_deleter_until_drained(zk, s3, broker, verifier)
    listed, _ = await listed_now(zk, model)
    in_bk = {led.ledger_id for led in model.bookkeeper_ledgers()}
    kept = (listed | await cursor_and_schema_ledgers_now(zk, model)) & in_bk
    return {
        "trimmed": marked[_pd.LEDGER] - kept,
        "kept": kept,
        "trimmed_offloaded": marked[_pd.OFFLOAD_LEDGER] - listed,
        "kept_offloaded": listed & complete_before,
    }


async def test_smoke_checks_on_a_cleaned_devstack(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """After Tombstone cleaned up the trimmed ledgers, the smoke script's checks find every
    trimmed ledger gone from /ledgers and its objects from the bucket, and every listed ledger
    (and each listed offloaded ledger's two objects) still there. Told that a ledger still in
    ZooKeeper and one with objects still in the bucket were trimmed, the same checks fail after
    their bounded wait and name those ids."""
    sets = await _trimmed_cluster(zk, s3, broker)
    assert all(sets.values()), sets
    result = run_checks(zk, s3, tmp_path, sets, wait=30)
    steps = [line.split(":")[0] for line in result.stdout.splitlines()]
    assert (result.returncode, steps) == (
        0,
        ["PASS bookkeeper", "PASS bookkeeper", "PASS objects", "PASS objects"],
    ), result.stdout + result.stderr

    still_in_zk, still_in_s3 = min(sets["kept"]), min(sets["kept_offloaded"])
    wrong = {
        **sets,
        "trimmed": sets["trimmed"] | {still_in_zk},
        "trimmed_offloaded": sets["trimmed_offloaded"] | {still_in_s3},
    }
    result = run_checks(zk, s3, tmp_path, wrong, wait=2)
    assert result.returncode == 1
    assert f"trimmed ledgers in /ledgers still present: {still_in_zk}" in result.stdout
    assert f"objects of trimmed offloaded ledgers still present: {still_in_s3}" in result.stdout
