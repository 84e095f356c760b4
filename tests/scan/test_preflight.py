"""The reconciler's pre-flight against the real ZooKeeper and moto's S3 server: each bad input
is one `pre-flight: <problem>; <fix>` line on stderr, exit 5, no traceback and no output
folder; a healthy setup passes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner, Result
from pyspark.sql import SparkSession

from devstack.ports import free_port
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.metadata_stores import parse_bookkeeper_url
from services.core.shared_clusters import ZOOKEEPER, StoreUrl
from services.metadata import ZkMetadataStore
from services.scan.cli.reconcile import reconcile
from services.scan.extract.s3 import S3Lister, S3Settings, open_lister
from services.scan.extract.units import ExtractSettings
from services.scan.preflight import s3 as preflight_s3
from services.scan.preflight.checks import EXIT_PREFLIGHT, extract_problems, source_problems
from services.scan.preflight.zk import servers
from services.scan.schema import extract_from_rows, write_extract

CLUSTER = "c1"
BUCKET = "offload"


async def pulsar_roots(zk: ZooKeeperServer, clusters: Sequence[str] = (CLUSTER,)) -> None:
    """The znodes a Pulsar cluster's metadata store always has."""
    async with ZkMetadataStore.connect(zk.address) as store:
        for path in ("/managed-ledgers", "/ledgers", "/admin/clusters"):
            await store.create(path, make_parents=True)
        for name in clusters:
            await store.create(f"/admin/clusters/{name}", b"{}")


def make_bucket(s3: S3Server) -> None:
    boto3.client("s3", **s3.client_config()).create_bucket(Bucket=BUCKET)


def credentials(s3: S3Server) -> dict[str, str]:
    config = s3.client_config()
    return {
        "TOMBSTONE_S3_ACCESS_KEY_ID": config["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": config["aws_secret_access_key"],
    }


def source_args(zookeeper: str, endpoint: str | None, out: Path, *extra: str) -> list[str]:
    args = ["--zookeeper", zookeeper, "--cluster", CLUSTER, "--out", str(out)]
    if endpoint is not None:
        args += ["--s3-endpoint", endpoint, "--bucket", BUCKET]
    return [*args, *extra]


async def invoke(args: list[str], env: dict[str, str] | None = None) -> Result:
    """The command in this process (the checks run their own event loop, so in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, reconcile, args, env=env)


def refusal(result: Result, out: Path) -> list[str]:
    """The stderr lines of a run the pre-flight stopped, after checking what every such run
    must show: exit 5, only pre-flight lines, no traceback, nothing written."""
    lines = result.stderr.splitlines()
    assert result.exit_code == EXIT_PREFLIGHT, result.output
    assert lines
    assert all(line.startswith("pre-flight: ") for line in lines), lines
    assert "Traceback" not in result.output
    assert result.stdout == ""
    assert not out.exists() or out.is_file()
    return lines


def problems(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("pre-flight: warning:")]


async def test_zookeeper_connection_refused_is_said_so(s3: S3Server, tmp_path: Path) -> None:
    make_bucket(s3)
    out = tmp_path / "out"
    address = f"127.0.0.1:{free_port()}"
    result = await invoke(["run", *source_args(address, s3.endpoint, out)], credentials(s3))
    assert refusal(result, out) == [
        f"pre-flight: ZooKeeper {address}: connection refused (nothing listens there); "
        "start ZooKeeper there or fix --zookeeper"
    ]


@contextlib.asynccontextmanager
async def listener(*, hang_up: bool) -> AsyncIterator[str]:
    """A port that accepts connections, then never answers (a hung server) or hangs up at
    once (a wrong or failing one)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        if hang_up:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()


@contextlib.contextmanager
def full_backlog() -> Iterator[int]:
    """A port whose listen queue is full: the kernel drops new connection attempts, as a
    host that is down or filtered does, so a connect gets no answer at all."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = int(server.getsockname()[1])
        queued = []
        try:
            for _ in range(3):
                client = socket.socket()
                client.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    client.connect(("127.0.0.1", port))
                queued.append(client)
            yield port
        finally:
            for client in queued:
                client.close()


async def test_zookeeper_with_no_answer_is_a_timeout(s3: S3Server, tmp_path: Path) -> None:
    """The connect waits `--zk-timeout` (here shorter than its 10 s default), then says so."""
    make_bucket(s3)
    out = tmp_path / "out"
    with full_backlog() as port:
        address = f"127.0.0.1:{port}"
        args = source_args(address, s3.endpoint, out, "--zk-timeout", "2s")
        result = await invoke(["run", *args], credentials(s3))
    assert refusal(result, out) == [
        f"pre-flight: ZooKeeper {address}: no answer within 2 s (host down, unreachable or "
        "filtered); check the host, the network and firewalls, or fix --zookeeper"
    ]


async def test_an_s3_endpoint_with_no_answer(zk: ZooKeeperServer, tmp_path: Path) -> None:
    await pulsar_roots(zk)
    out = tmp_path / "out"
    with full_backlog() as port:
        endpoint = f"http://127.0.0.1:{port}"
        env = {"TOMBSTONE_S3_ACCESS_KEY_ID": "k", "TOMBSTONE_S3_SECRET_ACCESS_KEY": "s"}
        result = await invoke(["run", *source_args(zk.address, endpoint, out)], env)
    assert refusal(result, out) == [
        f"pre-flight: S3 endpoint {endpoint}: no answer to connect within 1.5 s (host down, "
        "unreachable or filtered); check the endpoint, the network and firewalls, or fix "
        "--s3-endpoint"
    ]


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("hang_up", [False, True], ids=["silent", "hangs-up"])
async def test_a_zookeeper_port_that_opens_no_session_is_one_line(
    hang_up: bool, tmp_path: Path
) -> None:
    """No session: one line, and none of the ZooKeeper client's own error logs (a child
    process, so that its logging is the command's, not the test runner's). The session is
    given `--zk-timeout` to open (here shorter than its 10 s default)."""
    out = tmp_path / "out"
    async with listener(hang_up=hang_up) as address:
        extract_args = source_args(address, None, out, "--zk-timeout", "2s")
        args = ["reconcile", "extract", *extract_args]
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "services.cli",
            *args,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    lines = stderr.decode().splitlines()
    assert (process.returncode, stdout, out.exists()) == (EXIT_PREFLIGHT, b"", False), lines
    assert all(line.startswith("pre-flight: ") for line in lines), lines
    (line,) = problems(lines)
    assert line.startswith(
        f"pre-flight: ZooKeeper {address} accepts connections but opened no session within"
    )


async def test_zookeeper_without_the_pulsar_roots(zk: ZooKeeperServer, tmp_path: Path) -> None:
    """An empty tree: each missing root is a line; without --bucket a warning says the offload
    tier is not scanned."""
    out = tmp_path / "out"
    result = await invoke(["extract", *source_args(zk.address, None, out)])
    lines = refusal(result, out)
    where = f"ZooKeeper {zk.address}"
    assert lines == [
        "pre-flight: warning: no --bucket and no --inventory: the offload tier will not be "
        "scanned (no offloaded object is read or proposed; the report says so)",
        f"pre-flight: /managed-ledgers missing in {where}; check --zookeeper and --chroot: "
        "this is not the Pulsar metadata store",
        f"pre-flight: --ledgers-root /ledgers missing in {where}; give the BookKeeper ledgers "
        "root (the path of the brokers' bookkeeperMetadataServiceUri, default /ledgers) or "
        "fix --chroot",
        f"pre-flight: /admin/clusters missing in {where}: no Pulsar cluster is registered "
        "there; check --zookeeper and --chroot: this is not the Pulsar metadata store",
    ]


async def test_a_wrong_chroot_misses_the_roots(zk: ZooKeeperServer, tmp_path: Path) -> None:
    await pulsar_roots(zk)
    out = tmp_path / "out"
    result = await invoke(["extract", *source_args(zk.address, None, out, "--chroot", "/pulsar")])
    lines = problems(refusal(result, out))
    assert len(lines) == 3
    assert all(f"ZooKeeper {zk.address} (chroot /pulsar)" in line for line in lines)


async def test_a_wrong_cluster_lists_the_known_ones(zk: ZooKeeperServer, tmp_path: Path) -> None:
    await pulsar_roots(zk, clusters=("west", "east"))
    out = tmp_path / "out"
    result = await invoke(["extract", *source_args(zk.address, None, out)])
    assert problems(refusal(result, out)) == [
        f"pre-flight: --cluster {CLUSTER}: not a cluster of this metadata store (known: east, "
        "west); give the brokers' clusterName with --cluster"
    ]


async def test_a_missing_bucket(zk: ZooKeeperServer, s3: S3Server, tmp_path: Path) -> None:
    await pulsar_roots(zk)
    out = tmp_path / "out"
    result = await invoke(["run", *source_args(zk.address, s3.endpoint, out)], credentials(s3))
    assert refusal(result, out) == [
        f"pre-flight: bucket '{BUCKET}' at {s3.endpoint} does not exist; fix --bucket (the "
        "brokers' s3ManagedLedgerOffloadBucket) or --s3-endpoint"
    ]


@pytest.fixture(scope="module")
def s3_with_auth() -> Iterator[S3Server]:
    """A moto server that checks credentials (moto accepts any unless told to check after
    INITIAL_NO_AUTH_ACTION_COUNT requests; then only keys it issued are valid)."""
    saved = os.environ.get("INITIAL_NO_AUTH_ACTION_COUNT")
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    try:
        server = S3Server()
        server.start()
    finally:
        if saved is None:
            del os.environ["INITIAL_NO_AUTH_ACTION_COUNT"]
        else:
            os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = saved
    with server:
        yield server


async def test_wrong_credentials_are_access_denied(
    zk: ZooKeeperServer, s3_with_auth: S3Server, tmp_path: Path
) -> None:
    await pulsar_roots(zk)
    out = tmp_path / "out"
    args = source_args(zk.address, s3_with_auth.endpoint, out)
    result = await invoke(["run", *args], credentials(s3_with_auth))
    assert refusal(result, out) == [
        f"pre-flight: bucket '{BUCKET}' at {s3_with_auth.endpoint}: access denied (HTTP 403) to "
        "the key from TOMBSTONE_S3_ACCESS_KEY_ID and TOMBSTONE_S3_SECRET_ACCESS_KEY; check "
        "TOMBSTONE_S3_ACCESS_KEY_ID and TOMBSTONE_S3_SECRET_ACCESS_KEY and that the bucket "
        "policy allows s3:ListBucket"
    ]


async def test_no_credentials_at_all(zk: ZooKeeperServer, s3: S3Server, tmp_path: Path) -> None:
    """No key in the environment, no AWS files, no instance metadata: one line naming the
    variables to set, however many buckets."""
    await pulsar_roots(zk)
    make_bucket(s3)
    out = tmp_path / "out"
    env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    args = source_args(zk.address, s3.endpoint, out, "--bucket", "second")
    result = await invoke(["run", *args], env)
    assert refusal(result, out) == [
        "pre-flight: no S3 credentials found; set TOMBSTONE_S3_ACCESS_KEY_ID and "
        "TOMBSTONE_S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, an AWS "
        "profile or an instance role)"
    ]


async def test_every_problem_at_once(s3: S3Server, tmp_path: Path) -> None:
    """ZooKeeper and the S3 endpoint both refuse and --out is a file: three lines, and the
    file is left as it was."""
    zk_address = f"127.0.0.1:{free_port()}"
    endpoint = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "out"
    out.write_text("a previous note\n")
    result = await invoke(["run", *source_args(zk_address, endpoint, out)], credentials(s3))
    assert sorted(refusal(result, out)) == sorted(
        [
            f"pre-flight: ZooKeeper {zk_address}: connection refused (nothing listens there); "
            "start ZooKeeper there or fix --zookeeper",
            f"pre-flight: S3 endpoint {endpoint}: connection refused; start the object store "
            "or fix --s3-endpoint (or TOMBSTONE_S3_ENDPOINT_URL)",
            f"pre-flight: --out {out} is a file; give a folder path or move the file",
        ]
    )
    assert out.read_text() == "a previous note\n"


async def test_an_out_folder_below_a_file(zk: ZooKeeperServer, tmp_path: Path) -> None:
    await pulsar_roots(zk)
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "out"
    result = await invoke(["extract", *source_args(zk.address, None, out)])
    assert problems(refusal(result, out)) == [
        f"pre-flight: --out {out} cannot be created: {tmp_path / 'file'} is a file; choose "
        "another --out"
    ]


async def test_a_healthy_setup_passes(zk: ZooKeeperServer, s3: S3Server, tmp_path: Path) -> None:
    """Pulsar's roots, the cluster registered, the bucket there, --out new or an empty
    folder: no problem, and nothing written."""
    await pulsar_roots(zk)
    make_bucket(s3)
    config = s3.client_config()
    settings = ExtractSettings(
        zookeeper=zk.address,
        cluster=CLUSTER,
        buckets=(BUCKET,),
        s3=S3Settings(
            endpoint_url=config["endpoint_url"],
            access_key_id=config["aws_access_key_id"],
            secret_access_key=config["aws_secret_access_key"],
        ),
    )
    (tmp_path / "empty").mkdir()
    outs = [tmp_path / "new" / "out", tmp_path / "empty"]
    assert await source_problems(settings, outs) == []
    assert sorted(os.listdir(tmp_path)) == ["empty"]


async def test_inventory_files_without_a_bucket_are_warned_of(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.csv"
    inventory.write_text("")
    out = tmp_path / "out"
    result = await invoke(
        ["extract", *source_args(zk.address, None, out, "--inventory", str(inventory))]
    )
    assert refusal(result, out)[0] == (
        "pre-flight: warning: every --inventory row is ignored without --bucket: the offload "
        "tier will not be scanned (no offloaded object is read or proposed; the report says so)"
    )


async def test_inventory_files_without_heads_ask_nothing_of_s3(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    """With --inventory and --no-head-objects the extract never calls S3: a dead endpoint is
    no problem then."""
    await pulsar_roots(zk)
    dead = S3Settings(
        endpoint_url=f"http://127.0.0.1:{free_port()}", access_key_id="k", secret_access_key="s"
    )
    settings = ExtractSettings(
        zookeeper=zk.address,
        cluster=CLUSTER,
        buckets=(BUCKET,),
        s3=dead,
        inventories=(str(tmp_path / "inventory.csv"),),
        head_objects=False,
    )
    assert await source_problems(settings, [tmp_path / "out"]) == []
    heads = await source_problems(replace(settings, head_objects=True), [tmp_path / "out"])
    assert [p.what for p in heads] == [f"S3 endpoint {dead.endpoint_url}: connection refused"]


async def test_one_of_two_servers_up_is_enough(zk: ZooKeeperServer, tmp_path: Path) -> None:
    """The extract's session picks any server that answers: a down member of the ensemble is
    not a problem."""
    await pulsar_roots(zk)
    settings = ExtractSettings(zookeeper=f"127.0.0.1:{free_port()},{zk.address}", cluster=CLUSTER)
    assert await source_problems(settings, [tmp_path / "out"]) == []


async def test_a_chroot_in_the_connect_string(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = await invoke(["extract", *source_args("zk1:2181,zk2:2181/pulsar", None, out)])
    assert problems(refusal(result, out)) == [
        "pre-flight: --zookeeper zk1:2181,zk2:2181/pulsar: a chroot in the connect string is "
        "not read; give --zookeeper zk1:2181,zk2:2181 --chroot /pulsar"
    ]


def test_connect_strings() -> None:
    assert servers("a:1,b:2/pulsar") == [("a", 1), ("b", 2)]
    assert servers("zk") == [("zk", 2181)]
    assert servers("[::1]:2182, ::1") == [("::1", 2182), ("::1", 2181)]


@pytest.fixture
def unreachable_host() -> str:
    """A name that cannot resolve (the .invalid top-level domain is reserved for that)."""
    with contextlib.suppress(OSError):
        socket.getaddrinfo("zk.invalid", 2181)
        pytest.skip("this resolver answers for .invalid")
    return "zk.invalid:2181"


async def test_an_unknown_host(unreachable_host: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = await invoke(["extract", *source_args(unreachable_host, None, out)])
    (line,) = problems(refusal(result, out))
    assert line.startswith(f"pre-flight: ZooKeeper {unreachable_host}: unknown host")


# --- analyze: the extract folder ----------------------------------------------------------


@pytest.fixture
def extract_of_c1(spark: SparkSession, tmp_path: Path) -> Path:
    """An extract folder as `extract` writes it (every table, Parquet), taken of c1."""
    run = {"scan_id": "s1", "cluster_name": CLUSTER, "started_ms": 1, "ended_ms": 2}
    path = tmp_path / "extract"
    write_extract(extract_from_rows(spark, {"scan_run": [run]}), path)
    return path


def test_an_extract_of_the_cluster_passes(extract_of_c1: Path) -> None:
    assert extract_problems(extract_of_c1, CLUSTER) == []


async def test_an_extract_of_another_cluster(extract_of_c1: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["analyze", "--extract", str(extract_of_c1), "--cluster", "c2", "--out", str(out)]
    assert refusal(await invoke(args), out) == [
        f"pre-flight: --cluster c2: the extract {extract_of_c1} was taken of cluster 'c1'; "
        "give --cluster c1 or the extract of c2"
    ]


async def test_analyze_without_an_extract(tmp_path: Path) -> None:
    """A missing folder, a folder that is no extract, an unreadable run table: one line each
    (the output folder's own problem on its own line)."""
    out = tmp_path / "out"
    missing = tmp_path / "missing"
    args = ["analyze", "--extract", str(missing), "--cluster", CLUSTER, "--out", str(out)]
    (line,) = refusal(await invoke(args), out)
    assert line.startswith(f"pre-flight: --extract {missing} does not exist; give the folder")

    (tmp_path / "scan_run").mkdir()
    (tmp_path / "scan_run" / "part-0.parquet").write_text("not parquet")
    assert [p.what.split(" (")[0] for p in extract_problems(tmp_path, CLUSTER)] == [
        f"--extract {tmp_path} is not an extract"
    ]


async def test_analyze_with_an_unreadable_run_table(extract_of_c1: Path, tmp_path: Path) -> None:
    for part in (extract_of_c1 / "scan_run").glob("*.parquet"):
        part.write_bytes(b"not parquet")
    (problem,) = extract_problems(extract_of_c1, CLUSTER)
    assert problem.what.startswith(f"--extract {extract_of_c1}: unreadable (")


async def split_stores(zk: ZooKeeperServer, clusters: Sequence[str] = (CLUSTER,)) -> None:
    """A deployment whose configuration store is a ZooKeeper of its own (Pulsar's
    `configurationMetadataStoreUrl`): the metadata store has the managed ledgers and the
    ledgers root, the configuration store (here the same server under `/config`) has
    `/admin/clusters`."""
    async with ZkMetadataStore.connect(zk.address) as store:
        for path in ("/managed-ledgers", "/ledgers", "/config/admin/clusters"):
            await store.create(path, make_parents=True)
        for name in clusters:
            await store.create(f"/config/admin/clusters/{name}", b"{}")


async def test_a_separate_configuration_store_is_where_the_cluster_is_looked_for(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    await split_stores(zk)
    base = ExtractSettings(zookeeper=zk.address, cluster=CLUSTER)
    alone = await source_problems(base, [tmp_path / "out"])
    assert [p.what for p in alone] == [
        f"/admin/clusters missing in ZooKeeper {zk.address}: no Pulsar cluster is registered there"
    ]
    split = replace(base, configuration_store=StoreUrl(ZOOKEEPER, zk.address, "/config"))
    assert await source_problems(split, [tmp_path / "out"]) == []


async def test_a_cluster_unknown_to_the_configuration_store(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    await split_stores(zk, clusters=("west",))
    out = tmp_path / "out"
    args = source_args(zk.address, None, out, "--configuration-store", f"{zk.address}/config")
    assert problems(refusal(await invoke(["extract", *args]), out)) == [
        f"pre-flight: --cluster {CLUSTER}: not a cluster of this configuration store (known: "
        "west); give the brokers' clusterName with --cluster"
    ]


async def test_bookkeeper_metadata_in_a_store_of_its_own(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    """BookKeeper's ledgers root under /bk, Pulsar's metadata under /pulsar: without
    --bookkeeper-metadata the ledgers root is missing from Pulsar's store; with it (the
    metadataServiceUri form) both stores pass, /managed-ledgers looked for only in Pulsar's."""
    async with ZkMetadataStore.connect(zk.address) as store:
        for path in ("/pulsar/managed-ledgers", f"/pulsar/admin/clusters/{CLUSTER}", "/bk/ledgers"):
            await store.create(path, make_parents=True)
    out = tmp_path / "out"
    args = source_args(zk.address, None, out, "--chroot", "/pulsar")
    alone = problems(refusal(await invoke(["extract", *args]), out))
    assert [line.split(";")[0] for line in alone] == [
        f"pre-flight: --ledgers-root /ledgers missing in ZooKeeper {zk.address} (chroot /pulsar)"
    ]
    settings = ExtractSettings(zookeeper=zk.address, cluster=CLUSTER, chroot="/pulsar")
    split = replace(settings, bookkeeper_store=parse_bookkeeper_url(f"zk:{zk.address}/bk"))
    assert await source_problems(split, [out]) == []


async def test_a_bookkeeper_store_without_the_ledgers_root_names_its_option(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    """A --bookkeeper-metadata store without the ledgers root: one line naming that option."""
    await pulsar_roots(zk)
    out = tmp_path / "out"
    args = source_args(zk.address, None, out, "--bookkeeper-metadata", f"zk:{zk.address}/bk")
    assert problems(refusal(await invoke(["extract", *args]), out)) == [
        f"pre-flight: --ledgers-root /ledgers missing in ZooKeeper {zk.address} (chroot /bk); "
        "give the BookKeeper ledgers root (the path of the brokers' "
        "bookkeeperMetadataServiceUri, default /ledgers) or fix --bookkeeper-metadata"
    ]


async def test_a_slow_client_build_is_not_a_silent_endpoint(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the S3 client (botocore's service model, the credential chain) is local work
    that a busy driver stretches: when it takes longer than HeadBucket's bound, the check
    still asks the real endpoint, which answers, and finds no problem."""
    config = s3.client_config()
    boto3.client("s3", **config).create_bucket(Bucket=BUCKET)
    settings = S3Settings(
        endpoint_url=config["endpoint_url"],
        region=config["region_name"],
        access_key_id=config["aws_access_key_id"],
        secret_access_key=config["aws_secret_access_key"],
    )

    @contextlib.asynccontextmanager
    async def slow_open(quick: S3Settings) -> AsyncIterator[S3Lister]:
        await asyncio.sleep(preflight_s3.CHECK_TIMEOUT_S + 1)  # the set-up, slowed
        async with open_lister(quick) as lister:
            yield lister

    monkeypatch.setattr(preflight_s3, "open_lister", slow_open)
    assert await preflight_s3.check_buckets(settings, [BUCKET]) == []
