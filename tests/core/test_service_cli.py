"""The services' command line: --version, `<service> env`, unknown variables, and the one-line
exits of a start that cannot succeed (services/core/service_main.py documents the codes)."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from devstack.ports import free_port
from devstack.zookeeper import ZooKeeperServer
from services.cli import cli
from services.core._env import Setting, unknown_variable_warnings
from services.core.config import PulsarConfig, ZooKeeperConfig
from services.core.env_cli import SERVICES, settings_markdown, settings_of
from services.core.errors import Unavailable
from services.core.service_main import EXIT_CONFIG, EXIT_UNAVAILABLE, check_reachable
from services.core.version import version
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.verifier.world import World

SERVICE_NAMES = sorted(SERVICES)


@pytest.mark.parametrize("args", [[], ["marker"], ["verifier"], ["deleter"]])
def test_version_comes_from_the_package_metadata(args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--version"])
    assert (result.exit_code, result.output.split()[-1]) == (0, version())
    assert version() != "unknown"


def test_env_shows_default_format_and_current_value() -> None:
    result = CliRunner().invoke(
        cli,
        ["deleter", "env"],
        env={"TOMBSTONE_DELETER_MAX_HOLD": "1h", "TOMBSTONE_DELETER_MAX_HOLT": "1"},
    )
    out = result.output
    assert result.exit_code == 0
    assert "TOMBSTONE_DELETER_MAX_HOLD=1h\n    default: 10m; format: duration" in out
    assert "TOMBSTONE_GRPC_PORT=(default)\n    default: 50053; format: port 0..65535" in out
    assert "did you mean TOMBSTONE_DELETER_MAX_HOLD?" in out  # stderr, mixed in by the runner


def test_env_marks_an_invalid_current_value() -> None:
    result = CliRunner().invoke(cli, ["verifier", "env"], env={"TOMBSTONE_GRPC_PORT": "abc"})
    assert "TOMBSTONE_GRPC_PORT=abc  <- INVALID: " in result.output
    assert "default: 50052" in result.output


@pytest.mark.parametrize("service", SERVICE_NAMES)
def test_env_lists_every_setting_the_service_declares(service: str) -> None:
    """Each setting declared in a service's config module is one its configuration reads
    (so `env` and the docs table show it)."""
    spec = SERVICES[service]
    module = importlib.import_module(spec.config_module)
    declared = {v.name for v in vars(module).values() if isinstance(v, Setting)}
    listed = {s.name for s in settings_of(spec)}
    assert declared - listed == set()
    assert {"TOMBSTONE_LOG_LEVEL", "TOMBSTONE_ZOOKEEPER_SERVERS"} <= listed


def test_unknown_variables_are_warned_with_the_closest_name() -> None:
    warnings = unknown_variable_warnings(
        {"TOMBSTONE_GRPC_PROT": "1", "TOMBSTONE_WHATEVER": "1", "PATH": "/bin"}
    )
    assert warnings == [
        "warning: unknown variable TOMBSTONE_GRPC_PROT is ignored "
        "(did you mean TOMBSTONE_GRPC_PORT?)",
        "warning: unknown variable TOMBSTONE_WHATEVER is ignored",
    ]


def _serve(service: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    base.update(TOMBSTONE_METRICS_PORT="0", TOMBSTONE_GRPC_PORT="0", TOMBSTONE_GRPC_PROT="1")
    base.update(env)
    return subprocess.run(
        [sys.executable, "-m", "services", service, "serve"],
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_line(stderr: str) -> list[str]:
    """stderr without the unknown-variable warning every run here provokes."""
    lines = stderr.splitlines()
    assert lines[0].startswith("warning: unknown variable TOMBSTONE_GRPC_PROT")
    return lines[1:]


@pytest.mark.parametrize("service", SERVICE_NAMES)
def test_a_malformed_setting_is_one_line_and_exit_1(service: str) -> None:
    done = _serve(service, TOMBSTONE_GRPC_PORT="abc")
    assert (done.returncode, _one_line(done.stderr)) == (
        EXIT_CONFIG,
        [
            f"{service}: refusing to start: TOMBSTONE_GRPC_PORT: invalid value 'abc': "
            "expected an integer"
        ],
    )


def test_a_bad_duration_is_one_line_and_exit_1() -> None:
    done = _serve("marker", TOMBSTONE_MARKER_SEND_TIMEOUT="3 days")
    [line] = _one_line(done.stderr)
    assert done.returncode == EXIT_CONFIG
    assert line.startswith("marker: refusing to start: TOMBSTONE_MARKER_SEND_TIMEOUT: ")


def test_an_unreachable_zookeeper_is_one_line_and_exit_3() -> None:
    port = free_port()
    done = _serve("deleter", TOMBSTONE_ZOOKEEPER_SERVERS=f"127.0.0.1:{port}")
    assert (done.returncode, _one_line(done.stderr)) == (
        EXIT_UNAVAILABLE,
        [
            f"deleter: dependency unavailable: cannot reach ZooKeeper at 127.0.0.1:{port} "
            "(connection refused); check TOMBSTONE_ZOOKEEPER_SERVERS"
        ],
    )


async def test_with_a_store_url_the_named_store_is_probed_not_the_default_zookeeper() -> None:
    """TOMBSTONE_METADATA_STORE_URL names Pulsar's store: the ZooKeeper servers setting keeps
    its default then, and names nothing to probe."""
    refused = free_port()
    with pytest.raises(Unavailable, match=r"Oxia at .*TOMBSTONE_METADATA_STORE_URL"):
        await check_reachable(
            ZooKeeperConfig.from_env(
                {"TOMBSTONE_METADATA_STORE_URL": f"oxia://127.0.0.1:{refused}/default"}
            )
        )
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    async with server:
        listening = server.sockets[0].getsockname()[1]
        await check_reachable(
            ZooKeeperConfig.from_env(
                {"TOMBSTONE_METADATA_STORE_URL": f"oxia://127.0.0.1:{listening}"}
            )
        )
        with pytest.raises(Unavailable, match=r"ZooKeeper at .*TOMBSTONE_BOOKKEEPER_METADATA_URL"):
            await check_reachable(
                ZooKeeperConfig.from_env(
                    {
                        "TOMBSTONE_METADATA_STORE_URL": f"oxia://127.0.0.1:{listening}",
                        "TOMBSTONE_BOOKKEEPER_METADATA_URL": f"zk:127.0.0.1:{refused}",
                    }
                )
            )


async def test_an_unreachable_broker_is_unavailable_and_a_listening_one_passes() -> None:
    port = free_port()
    with pytest.raises(Unavailable, match=r"the Pulsar broker .*connection refused"):
        await check_reachable(pulsar=PulsarConfig(service_url=f"pulsar://127.0.0.1:{port}"))
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    async with server:
        listening = server.sockets[0].getsockname()[1]
        await check_reachable(
            ZooKeeperConfig(servers=f"127.0.0.1:{port},127.0.0.1:{listening}"),
            PulsarConfig(service_url=f"pulsar://127.0.0.1:{listening}"),
        )


async def test_an_unreachable_broker_stops_the_marker_with_one_line_and_exit_3(
    zk: ZooKeeperServer,
) -> None:
    """ZooKeeper up and the cluster in place, the broker down: the marker ends in seconds
    (not after the client's 30 s operation timeout) with one line and exit 3."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await World(store).bookkeeper_root()
    port = free_port()
    done = await asyncio.to_thread(
        _serve,
        "marker",
        TOMBSTONE_ZOOKEEPER_SERVERS=zk.address,
        TOMBSTONE_PULSAR_SERVICE_URL=f"pulsar://127.0.0.1:{port}",
        TOMBSTONE_MARKER_BELIEVE_ENABLED="false",
        TOMBSTONE_MARKER_OFFLOAD_TIER="false",
    )
    assert (done.returncode, _one_line(done.stderr)[-1]) == (
        EXIT_UNAVAILABLE,
        f"marker: dependency unavailable: cannot reach the Pulsar broker at 127.0.0.1:{port} "
        "(connection refused); check TOMBSTONE_PULSAR_SERVICE_URL",
    )
    assert "Traceback" not in done.stderr


def test_the_settings_table_of_the_docs_is_the_code_s() -> None:
    """docs/operations.md holds exactly the generated table (names, readers, defaults,
    formats, help); regenerate it with `python -m services.core.env_cli`."""
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text(encoding="utf-8")
    table = text.split("<!-- settings:begin -->\n")[1].split("<!-- settings:end -->")[0]
    assert table == settings_markdown()


def _commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.get_command(click.Context(command), name)
            if sub is not None:
                yield from _commands(sub, f"{path} {name}")


def test_every_service_option_has_help() -> None:
    """Every option of the services' commands says what it takes (units, formats)."""
    missing = []
    for root in ("marker", "mark", "verifier", "deleter", "health", "keys", "setup"):
        top = cli.get_command(click.Context(cli), root)
        assert top is not None
        for path, command in _commands(top, root):
            missing += [
                f"{path} {param.opts[0]}"
                for param in command.params
                if isinstance(param, click.Option) and not param.help
            ]
    assert missing == []


def test_health_timeout_takes_the_duration_syntax() -> None:
    result = CliRunner().invoke(cli, ["health", "--timeout", "2 days"])
    assert result.exit_code == 2
    assert "expected a duration" in result.output
