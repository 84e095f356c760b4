"""`tombstone demo --metadata oxia`: the demo on the devstack Oxia server, run as a user
runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_demo_runs_end_to_end_on_oxia() -> None:
    """Pulsar's metadata in Oxia namespace `broker`, BookKeeper's in `bookkeeper`, no
    ZooKeeper started at all: the services are given both stores' `oxia://` URLs, the
    verifier reads the ledgers in `bookkeeper` and their owners in `broker` (the props'
    live ledgers are kept, the neighbour's intents dead-lettered as foreign), the marker's
    follower turns every unlink the simulated brokers make in `broker` into intents (none
    leaked), and S1 and L1 hold.

    The world is the secured demo test's smaller one (one tenant, three topics per
    namespace), without the reconciler stage: its two Spark runs would be most of the time,
    and the reconciler's reads of Oxia have their own tests."""
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "services.cli", "demo", "--metadata", "oxia", "--no-reconcile"),
            *("--tenants", "1", "--namespaces", "2", "--topics", "3"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    oxia = re.search(
        r"^Oxia on (\S+): Pulsar's metadata in namespace broker, "
        r"BookKeeper's in bookkeeper$",
        output,
        re.M,
    )
    assert oxia, output
    address = oxia.group(1)
    assert (
        f"the services' stores: TOMBSTONE_METADATA_STORE_URL=oxia://{address}/broker, "
        f"TOMBSTONE_BOOKKEEPER_METADATA_URL=oxia://{address}/bookkeeper"
    ) in output, output
    assert not re.search(r"^ZooKeeper on ", output, re.M), output
    for text in (
        "trimmed through the marker",
        "unlinked like unmodified brokers",
        "still referenced: compacted ledger of the __compaction cursor: kept 1",
        "check: S1 and L1 hold",
        "Stopped Oxia and S3",
    ):
        assert text in output, output
    assert "problem:" not in output, output
    assert re.search(
        r"^broker-style: [1-9]\d* unlinked by brokers, \d+ delete failures injected, 0 leaked$",
        output,
        re.M,
    ), output
    assert re.search(
        r"^neighbour 'east' \(undeclared, metadata in Oxia namespace neighbour\): 5 of 5 "
        r"ledgers kept; its intents: dead-lettered\(foreign/namespace_unknown\) 5$",
        output,
        re.M,
    ), output
