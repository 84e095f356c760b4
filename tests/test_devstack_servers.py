"""The launchers start real servers that clients can use, and survive stop/start cycles."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiozk
import pytest
from aiobotocore.session import get_session

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer, four_letter_word


async def test_zookeeper_keeps_data_across_restart(zk: ZooKeeperServer) -> None:
    """A znode written before a restart is there after it (same port, same data dir)."""
    client = aiozk.ZKClient(zk.address)
    await client.start()
    await client.create("/kept", data=b"v1")
    await client.close()

    zk.restart()

    client = aiozk.ZKClient(zk.address)
    await client.start()
    try:
        assert await client.get_data("/kept") == b"v1"
    finally:
        await client.close()


async def test_s3_server_speaks_s3(s3: S3Server) -> None:
    """Objects and their user metadata round-trip through the HTTP endpoint."""
    async with get_session().create_client("s3", **s3.client_config()) as client:
        await client.create_bucket(Bucket="offload")
        await client.put_object(
            Bucket="offload", Key="k", Body=b"x", Metadata={"ManagedLedgerName": "t/n/persistent/a"}
        )
        head = await client.head_object(Bucket="offload", Key="k")
    assert head["Metadata"] == {"managedledgername": "t/n/persistent/a"}


# `tombstone devstack zookeeper` as an operator runs it: a subprocess, signals, its Java child.

ROOT = Path(__file__).resolve().parents[1]


def _devstack_zookeeper(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "devstack", "zookeeper", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _java_children(data_dir: Path) -> list[int]:
    """Pids of live Java processes whose command line names `data_dir` (the server child's
    does: its config and classpath are there), wherever they were reparented."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        argv = cmdline.split("\0")
        if "java" in Path(argv[0]).name and str(data_dir) in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def _wait_for_child(data_dir: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not _java_children(data_dir):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no Java child started"
        time.sleep(0.01)


def _assert_busy_port_refused(port: int, data_dir: Path) -> None:
    proc = _devstack_zookeeper("--port", str(port), "--data-dir", str(data_dir))
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert "listening" not in out
    assert len(err.strip().splitlines()) == 1, err
    assert f"port {port} " in err, err
    assert _java_children(data_dir) == []


def test_zookeeper_command_refuses_a_port_another_listener_holds(tmp_path: Path) -> None:
    """A port held by some other listener: one line on stderr naming it, exit non-zero, no
    "listening" line and no Java child left."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        _assert_busy_port_refused(holder.getsockname()[1], tmp_path / "zk")


def test_zookeeper_command_refuses_a_port_another_zookeeper_serves(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    """A port another ZooKeeper serves (whose `srvr` would answer the readiness probe): the
    same one-line refusal, and the other server keeps serving."""
    _assert_busy_port_refused(zookeeper.port, tmp_path / "zk")
    assert "Mode: standalone" in four_letter_word(zookeeper.host, zookeeper.port, "srvr")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_zookeeper_command_stops_its_child_on_a_signal_while_serving(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGTERM or SIGINT while serving: the command ends with exit 0 and its Java child is
    gone."""
    data_dir = tmp_path / "zk"
    proc = _devstack_zookeeper("--data-dir", str(data_dir))
    try:
        assert proc.stdout is not None
        assert "listening on" in proc.stdout.readline()
        assert _java_children(data_dir)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, out.strip(), err) == (0, "ZooKeeper stopped", "")
    assert _java_children(data_dir) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_zookeeper_command_stops_its_child_on_a_signal_while_starting(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A signal as soon as the Java child exists (before it serves, as a rule): the start is
    given up, the child stopped, exit 128 + the signal. Should the server have become ready
    first, it is the serving case: "listening", then exit 0. Either way no child is left."""
    data_dir = tmp_path / "zk"
    proc = _devstack_zookeeper("--data-dir", str(data_dir))
    try:
        _wait_for_child(data_dir, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    if "listening" in out:
        assert proc.returncode == 0, err
    else:
        assert proc.returncode == 128 + sig, err
        assert err.strip() == "ZooKeeper stopped before it was ready"
    assert _java_children(data_dir) == []


def test_zookeeper_command_exits_when_its_child_dies(tmp_path: Path) -> None:
    """The Java child killed while serving: the command does not hang on as if it served;
    it says so in one line and exits 1."""
    data_dir = tmp_path / "zk"
    proc = _devstack_zookeeper("--data-dir", str(data_dir))
    try:
        assert proc.stdout is not None
        assert "listening on" in proc.stdout.readline()
        for pid in _java_children(data_dir):
            os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, err.strip()) == (1, "Error: ZooKeeper exited unexpectedly")


def test_s3_command_refuses_a_busy_port() -> None:
    """`devstack s3 --port P` with P taken: one line on stderr naming it, exit non-zero."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "services.cli", "devstack", "s3", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode != 0
    assert "listening" not in proc.stdout
    assert proc.stderr.strip() == f"Error: S3: port {port} on 127.0.0.1 is already in use"
