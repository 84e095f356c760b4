"""The sharing options are checked before any work: one line and exit 2 for our own cluster
declared as a neighbour, a malformed `--deleted-namespace`, or a bad
TOMBSTONE_SHARED_CLUSTERS; nothing is created. A neighbour or a configuration store on Oxia
is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from services.scan.cli.reconcile import reconcile
from services.scan.cli.sharing import configuration_store, shared_clusters

#: Nothing listens there: a check that got as far as the pre-flight would exit 5, not 2.
DEAD = "127.0.0.1:1"


def _extract(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    args = ["extract", "--zookeeper", DEAD, "--cluster", "west", "--out", str(tmp_path / "x")]
    result = CliRunner().invoke(reconcile, [*args, *extra], env=env)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        (("--shared-cluster", "west=zk:zk:2181/b"), None, "that is --cluster itself"),
        (("--shared-cluster", "east"), None, "expected <cluster>=<metadata store URL>"),
        ((), {"TOMBSTONE_SHARED_CLUSTERS": "east=nowhere"}, "TOMBSTONE_SHARED_CLUSTERS"),
        (("--metadata-store", "oxia://o:6648"), None, "and so does --zookeeper/--chroot"),
        ((), {"TOMBSTONE_METADATA_STORE_URL": "oxia://o:6648"}, "and so does --zookeeper"),
    ],
)
def test_usage_errors_before_any_work(
    tmp_path: Path, extra: tuple[str, ...], env: dict[str, str] | None, message: str
) -> None:
    code, output = _extract(tmp_path, *extra, env=env)
    assert (code, message in output, (tmp_path / "x").exists()) == (2, True, False), output
    assert len([line for line in output.splitlines() if line.strip()]) == 1, output


def test_environment_declares_when_no_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOMBSTONE_SHARED_CLUSTERS applies without --shared-cluster; the option replaces it."""
    monkeypatch.setenv("TOMBSTONE_SHARED_CLUSTERS", "east=zk:zk-east:2181/pulsar")
    (east,) = shared_clusters((), "west")
    assert (east.name, east.store.servers, east.store.root) == ("east", "zk-east:2181", "/pulsar")
    (north,) = shared_clusters(("north=zk-north:2181",), "west")
    assert north.name == "north"


def test_oxia_stores_are_taken_as_zookeeper_ones() -> None:
    """A neighbour whose metadata store is an Oxia namespace, and a configuration store on
    Oxia, are read like ZooKeeper ones."""
    (east,) = shared_clusters(("east=oxia://oxia:6648/east",), "west")
    assert (east.store.kind, east.store.servers, east.store.root) == ("oxia", "oxia:6648", "east")
    config = configuration_store("oxia://oxia:6648/config")
    assert config is not None
    assert (config.kind, config.servers, config.root) == ("oxia", "oxia:6648", "config")
    zk = configuration_store("zk:zk:2181/global")
    assert zk is not None
    assert (zk.kind, zk.servers, zk.root) == ("zookeeper", "zk:2181", "/global")


def test_deleted_namespace_must_be_a_namespace(tmp_path: Path) -> None:
    args = ["analyze", "--extract", str(tmp_path), "--out", str(tmp_path / "o")]
    args += ["--cluster", "west", "--deleted-namespace", "east-1/../x"]
    result = CliRunner().invoke(reconcile, args)
    assert (result.exit_code, "--deleted-namespace" in result.output) == (2, True), result.output
