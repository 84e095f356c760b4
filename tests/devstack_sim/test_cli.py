"""The devstack commands and the demo, run as a user runs them."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from devstack.cli import devstack
from devstack.demo import demo
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer, four_letter_word

ROOT = Path(__file__).resolve().parents[2]


def _tombstone(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_devstack_lists_its_commands() -> None:
    """`devstack --help` names zookeeper, s3 and simulate."""
    result = CliRunner().invoke(devstack, ["--help"])
    assert result.exit_code == 0
    for name in ("zookeeper", "s3", "simulate"):
        assert re.search(rf"^\s+{name}\s", result.output, re.M), name


def test_simulate_writes_into_running_servers(zk: ZooKeeperServer, s3: S3Server) -> None:
    """`devstack simulate` seeds the given ZooKeeper and S3 and prints the summary."""
    args = ["simulate", "--zookeeper", zk.address, "--s3-endpoint", s3.endpoint]
    args += ["--tenants", "1", "--namespaces", "1", "--topics", "3", "--orphans", "1"]
    result = CliRunner().invoke(devstack, args)
    assert result.exit_code == 0, result.output
    assert "Planted" in result.output
    assert "unreferenced-offload" in result.output


def test_simulate_refuses_a_bad_range() -> None:
    """A MIN-MAX with MIN > MAX is a usage error naming the field; nothing is contacted."""
    args = ["simulate", "--zookeeper", "127.0.0.1:1", "--ledgers", "5-2"]
    result = CliRunner().invoke(devstack, args)
    assert result.exit_code == 2
    assert "ledgers_per_topic" in result.output


def test_simulate_without_s3_for_s3_offloads_fails_with_a_message(zk: ZooKeeperServer) -> None:
    """S3 offloads and no --s3-endpoint: exit 1 saying why, not a traceback."""
    args = ["simulate", "--zookeeper", zk.address, "--tenants", "1"]
    result = CliRunner().invoke(devstack, args)
    assert result.exit_code == 1
    assert "no S3 client" in result.output


def test_zookeeper_command_serves_until_sigterm() -> None:
    """`devstack zookeeper` prints its address, answers, and exits 0 on SIGTERM."""
    proc = _tombstone("devstack", "zookeeper")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on ([\d.]+):(\d+)", line)
        assert match, line
        assert four_letter_word(match[1], int(match[2]), "ruok") == "imok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_s3_command_serves_until_sigterm() -> None:
    """`devstack s3` prints its endpoint and the devstack credentials, and exits 0 on
    SIGTERM."""
    proc = _tombstone("devstack", "s3")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert re.search(r"listening on http://127\.0\.0\.1:\d+", line), line
        credentials = proc.stdout.readline()
        assert "access key tombstone, secret tombstone-secret, region us-east-1" in credentials
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.timeout(900)
def test_demo_runs_end_to_end_on_a_secured_deployment(tmp_path: Path) -> None:
    """`tombstone demo` (what `make run` runs) on a deployment secured as production is:
    the broker over TLS with OAuth2 client-credentials (a local issuer), ZooKeeper with
    digest authentication and Tombstone's znodes writable only by Tombstone, and half the
    namespaces offloading to a second S3 location (another endpoint and region). It seeds a
    cluster with every legacy artifact,
    trims half of it and unlinks its cursor ledgers through the marker, unlinks the other
    half as unmodified brokers do (a share of their deletes failing, the marker's follower
    recording every unlink), lets the deleter pool settle every PDLI, prints one line per
    artifact kind and the broker-style line, finds S1 and L1 holding over both with nothing
    leaked. A neighbour cluster planted in the shared ledgers root, undeclared, has its five
    ledgers sent to the marker as a reconciler would: all are kept, each intent
    dead-lettered as foreign (namespace_unknown). Then it runs the reconciler on what is left
    (a dry run, then a submit): every candidate it proposed is submitted and deleted by the
    services, none is the neighbour's, both reports exist, and it exits 0. The reconciler's
    two Spark runs are most of its time (docs/simulator.md).

    The world is smaller than `make run`'s (one tenant, three topics per namespace): every
    legacy artifact is still planted once and every line checked below still shows, with
    fewer topics to trim and to scan. The reconciler's age window is 10 s instead of the
    minute `make run` waits out: planted data cannot be backdated, and every check holds on
    any window the stage waits for."""
    out = tmp_path / "reconcile"
    proc = _tombstone(
        "demo",
        "--reconcile-out",
        str(out),
        "--pulsar-security",
        "oauth2",
        "--zookeeper-auth",
        "--second-s3",
        *("--reconcile-min-age", "10s"),
        *("--tenants", "1", "--namespaces", "2", "--topics", "3"),
    )
    try:
        output, _ = proc.communicate(timeout=840)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    expected = (
        "(digest authentication: user tombstone)",
        "(us-west-2): bucket pulsar-offload-west",
        "(TLS, oauth2 authentication)",
        "ZooKeeper on",
        "Planted",
        "Neighbour cluster 'east' planted (undeclared to the services)",
        "its 5 ledgers sent to our marker as a reconciler would: 5 marked",
        "trimmed through the marker",
        "per artifact (unlinked ledger tiers):",
        "cursor ledger left OPEN",
        "unlinked like unmodified brokers",
        "broker-style cursor ledger left OPEN (switchToNewLedger)",
        "pre-2.2 ledger (no custom metadata)",
        "2.1 offload, objects (no driverMetadata)",
        "pre-2.10 objects (no owner metadata)",
        "check: S1 and L1 hold",
        "Reconciler dry run",
        "Reconciler submit",
        f"  report: {out / 'dry-run' / 'latest' / 'report.html'}",
        f"  report: {out / 'submit' / 'latest' / 'report.html'}",
        "Stopped ZooKeeper and S3",
    )
    for text in expected:
        assert text in output, output
    assert "Aborting connection" not in output
    assert "problem:" not in output
    assert re.search(
        r"^broker-style: \d+ unlinked by brokers, \d+ delete failures injected, 0 leaked$",
        output,
        re.M,
    ), output
    assert re.search(
        r"^neighbour 'east' \(undeclared, metadata in /neighbour\): 5 of 5 ledgers kept; "
        r"its intents: dead-lettered\(foreign/namespace_unknown\) 5$",
        output,
        re.M,
    ), output
    # Neither run of the reconciler proposed a neighbour ledger, and none was deleted.
    assert "ledgers of neighbour 'east'" not in output, output
    assert "S1: neighbour" not in output, output
    done = re.search(
        r"^reconciler: (\d+) candidates proposed by the dry run, (\d+) submitted, "
        r"(\d+) deleted by the services$",
        output,
        re.M,
    )
    assert done, output
    proposed, submitted, deleted = (int(n) for n in done.groups())
    assert proposed > 0
    assert (submitted, deleted) == (proposed, proposed)
    assert (out / "dry-run" / "latest" / "report.html").exists()
    assert (out / "submit" / "latest" / "report.html").exists()


@pytest.mark.timeout(600)
def test_demo_runs_its_services_on_the_plain_local_stack() -> None:
    """`make run`'s configuration (no TLS, no authentication, one S3 location), without the
    reconciler stage (the secured test above runs it, and tests/devstack_sim/
    test_simulate_reconcile.py on a plain stack): S1 and L1 hold and nothing leaked."""
    proc = _tombstone("demo", "--no-reconcile")
    try:
        output, _ = proc.communicate(timeout=540)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    for text in ("trimmed through the marker", "check: S1 and L1 hold", "Stopped ZooKeeper"):
        assert text in output, output
    assert "problem:" not in output
    assert "(TLS," not in output
    assert re.search(r"^broker-style: .* 0 leaked$", output, re.M), output


@pytest.mark.parametrize("window", ["soon", "0s", "-5s"])
def test_demo_refuses_a_bad_reconcile_min_age(window: str) -> None:
    """A --reconcile-min-age that is no positive duration is a usage error; nothing starts."""
    result = CliRunner().invoke(demo, ["--reconcile-min-age", window])
    assert result.exit_code == 2, result.output
    assert "--reconcile-min-age" in result.output


def test_demo_seed_only_skips_the_services() -> None:
    """`tombstone demo --seed-only` seeds and reports the cluster without the services."""
    proc = _tombstone("demo", "--seed-only")
    try:
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert "Planted" in output
    assert "trimmed through the marker" not in output


def test_demo_stops_its_servers_on_sigterm() -> None:
    """SIGTERM during seeding unwinds the demo: ZooKeeper and S3 are stopped, exit 143."""
    proc = _tombstone("demo", "--tenants", "4")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("Seeding"):
                break
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143
    assert "Stopped ZooKeeper and S3" in output


def test_simulate_broker_style_unlinks_part_of_the_cluster(
    zk: ZooKeeperServer, s3: S3Server
) -> None:
    """`devstack simulate --broker-style` then trims, switches and unsubscribes as brokers
    do, and says how many unlinked pairs their failed deletes left behind."""
    args = ["simulate", "--zookeeper", zk.address, "--s3-endpoint", s3.endpoint, "--tenants"]
    args += ["1", "--namespaces", "1", "--topics", "4", "--cursors", "1-2", "--broker-style"]
    result = CliRunner().invoke(devstack, [*args, "--delete-failure-share", "0.5"])
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("Broker-style unlinks:")]
    match = re.fullmatch(
        r"Broker-style unlinks: \d+ \(ledger, tier\) unlinked by brokers \(.*trim \d+.*\), "
        r"\d+ delete failures injected, (\d+) left behind for the follower",
        line,
    )
    assert match, line
    # The reconcile hint that follows says the run would propose those too.
    if int(match[1]):
        assert f"Broker-style unlinks left {match[1]} (ledger, tier) behind" in result.output
