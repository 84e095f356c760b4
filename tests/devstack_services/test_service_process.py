"""`ServiceProcess` runs a real service module as a child: ready with its port from the
`service_ready` line, events found in this run's log, stops idempotent, failures reported
with the log tail and nothing left running."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devstack.s3 import S3Server
from devstack.services import EventNotLogged, ServiceProcess, signing_envs
from devstack.zookeeper import ZooKeeperServer
from services.core.signing import SignatureStatus
from services.healthcheck import check_health
from services.metadata.layout import format_ledgers_root
from services.metadata.zookeeper.store import ZkMetadataStore

STUBBORN = "tests.devstack_services.stubborn"


def verifier_env(zk: ZooKeeperServer, s3: S3Server) -> dict[str, str]:
    return {
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "1m",
        **s3.service_env(allowed_buckets=["offload"]),
    }


@pytest.fixture
async def verifier(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> AsyncIterator[ServiceProcess]:
    """A verifier process, not started yet, on a cluster with its ledgers root; stopped
    after the test."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await format_ledgers_root(store)
    env = verifier_env(zk, s3)
    service = ServiceProcess("services.verifier", tmp_path / "verifier.log", env=env)
    yield service
    await service.stop(signal.SIGKILL)


async def test_start_returns_the_ready_record_and_its_port_serves(
    verifier: ServiceProcess,
) -> None:
    """`start()` returns the `service_ready` record; `port` is the one it names, and the
    service answers SERVING there."""
    ready = await verifier.start()
    status = await check_health(verifier.address)
    assert (ready["event"], ready["port"], status) == ("service_ready", verifier.port, "SERVING")


async def test_wait_for_finds_an_event_logged_before_the_call(verifier: ServiceProcess) -> None:
    """An event already in this run's log is returned at once (the ready record here)."""
    ready = await verifier.start()
    assert ready == await verifier.wait_for("service_ready", timeout=1)


async def test_wait_for_an_event_never_logged_names_it(verifier: ServiceProcess) -> None:
    """Waiting for an event the service does not log fails after the timeout, naming the
    event, and leaves the service running."""
    await verifier.start()
    with pytest.raises(EventNotLogged, match=r"still running after 0\.3s without logging no_such"):
        await verifier.wait_for("no_such", timeout=0.3)
    assert verifier.running is True


async def test_stop_exits_zero_and_a_second_stop_returns_the_same_code(
    verifier: ServiceProcess,
) -> None:
    """SIGTERM ends the service with 0; stopping again changes nothing."""
    await verifier.start()
    codes = (await verifier.stop(), await verifier.stop())
    assert (codes, verifier.running) == ((0, 0), False)


async def test_stop_before_start_returns_none(tmp_path: Path) -> None:
    """A service never started has no exit code."""
    service = ServiceProcess("services.verifier", tmp_path / "verifier.log")
    assert await service.stop() is None


async def test_exit_before_ready_reports_the_log_tail(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """A service that exits before it is ready fails `start()` with its exit code and the
    end of its log (here the configuration error)."""
    env = {**verifier_env(zk, s3), "TOMBSTONE_GRPC_PORT": "not-a-port"}
    service = ServiceProcess("services.verifier", tmp_path / "verifier.log", env=env)
    with pytest.raises(EventNotLogged) as failure:
        await service.start()
    message = str(failure.value)
    expected = (True, True)
    assert expected == (
        "exited (code 1) without logging service_ready" in message,
        "TOMBSTONE_GRPC_PORT: invalid value 'not-a-port'" in message,
    )


async def test_not_ready_in_time_kills_the_process(tmp_path: Path) -> None:
    """A process that never logs `service_ready` fails `start()` after the timeout and is
    killed, so nothing is left running."""
    service = ServiceProcess(STUBBORN, tmp_path / "stubborn.log", ready_timeout=0.5)
    with pytest.raises(EventNotLogged, match=r"still running after 0\.5s"):
        await service.start()
    assert service.running is False


def stubborn(log: Path, **options: Any) -> ServiceProcess:
    """The stubborn child, ready at once (its `service_ready` names port 0)."""
    return ServiceProcess(STUBBORN, log, env={"STUBBORN_EVENT": "service_ready"}, **options)


async def test_stop_kills_a_process_that_ignores_the_signal(tmp_path: Path) -> None:
    """When the stop signal is ignored, SIGKILL follows after the timeout."""
    service = stubborn(tmp_path / "stubborn.log")
    await service.start()
    assert await service.stop(timeout=0.2) == -signal.SIGKILL


async def test_stop_sends_the_configured_stop_signal(tmp_path: Path) -> None:
    """`stop_signal` replaces SIGTERM: SIGINT ends the child that ignores SIGTERM."""
    service = stubborn(tmp_path / "stubborn.log", stop_signal=signal.SIGINT)
    await service.start()
    assert await service.stop(timeout=10) == -signal.SIGINT


async def test_prefix_wraps_the_command(tmp_path: Path) -> None:
    """The prefix runs first and the module after it: here `env` sets the variable that
    makes the child log `service_ready`."""
    prefix = ("env", "STUBBORN_EVENT=service_ready")
    service = ServiceProcess(STUBBORN, tmp_path / "stubborn.log", prefix=prefix)
    try:
        ready = await service.start(timeout=30)
    finally:
        await service.stop(signal.SIGKILL)
    expected = ([*prefix, sys.executable, "-m", STUBBORN], "service_ready")
    assert expected == (service.command(), ready["event"])


def test_environment_drops_inherited_tombstone_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Inherited TOMBSTONE_* variables are dropped, other variables kept; JSON logs and port
    0 are the defaults, and the given environment wins over them."""
    monkeypatch.setenv("TOMBSTONE_ZOOKEEPER_SERVERS", "developer:2181")
    monkeypatch.setenv("KEPT_VARIABLE", "kept")
    given = {"TOMBSTONE_GRPC_PORT": "7000", "TOMBSTONE_MARKER_ID": "m"}
    env = ServiceProcess("services.marker", tmp_path / "m.log", env=given).environment()
    names = ("TOMBSTONE_ZOOKEEPER_SERVERS", "KEPT_VARIABLE", "TOMBSTONE_LOG_FORMAT")
    actual = tuple(env.get(name) for name in (*names, *given))
    assert actual == (None, "kept", "json", "7000", "m")


async def test_restart_waits_for_the_new_run(verifier: ServiceProcess) -> None:
    """After a restart the ready record is the new process's (the old line in the appended
    log does not count): its port serves, and the log holds both runs."""
    await verifier.start()
    first_pid = verifier.pid
    ready = await verifier.restart()
    status = await check_health(verifier.address)
    lines = verifier.log.read_text().count('"service_ready"')
    actual = (verifier.restarts, lines, ready["port"], status, verifier.pid != first_pid)
    assert (1, 2, verifier.port, "SERVING", True) == actual


async def test_peak_rss_is_read_while_running(verifier: ServiceProcess) -> None:
    """The running service's peak resident memory is a positive number of MiB."""
    await verifier.start()
    assert verifier.peak_rss_mb() > 0


def test_signing_envs_turn_signed_intents_on() -> None:
    """The devstack's marker signs with the key its verifier trusts and requires."""
    from services.marker.config import MarkerConfig
    from services.verifier.config import VerifierConfig
    from tombstone.v1 import pending_delete_pb2 as _pd

    marker_env, verifier_env = signing_envs()
    signer = MarkerConfig.from_env(marker_env).signer
    # A verifier that requires signatures names its cluster (PDLIs of others are refused).
    verifier = VerifierConfig.from_env({**verifier_env, "TOMBSTONE_VERIFIER_CLUSTER_NAME": "c"})
    assert signer is not None
    pdli = _pd.PendingDeleteLedgerInfo(ledger_id=1, ledger_type=_pd.LEDGER)
    signer.sign(pdli)
    assert (
        verifier.trusted_keys.check(pdli),
        verifier.require_signed,
    ) == (SignatureStatus.VALID, True)
