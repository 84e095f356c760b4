"""The Oxia variant: compose.oxia.yaml merged onto compose.yaml, as `docker compose -f
compose/compose.yaml -f compose/compose.oxia.yaml` does (tests/compose/compose_merge.py).

No Docker engine runs here: the merged model is validated against the Compose specification,
and every command the override adds is checked against the options its program declares, as
recorded below from the sources of the pinned releases.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from compose_spec import PyOptions

from services.core.config import describe_env, unknown_variables
from services.core.shared_clusters import OXIA, StoreUrl, parse_store_url
from tests.compose.compose_merge import Override, Reset, load_tagged, merge, tagged_paths
from tests.compose.ledgers_root import (
    DEFAULT_LEDGERS_ROOT,
    METADATA_STORE_SCHEME,
    driver_ledgers_root,
)
from tests.compose.stack_files import (
    OXIA_CLUSTER,
    OXIA_FILE,
    TOMBSTONE_SERVICES,
    compose,
    env_example,
    interpolate,
    oxia_compose,
    service_environment,
)

OXIA_IMAGE = "oxia/oxia:0.16.7"

#: Flags of the `oxia` subcommands the override runs, from Oxia v0.16.7's `cmd/coordinator/
#: cmd.go`, `cmd/server/cmd.go` and `cmd/health/cmd.go` (cobra flag declarations).
OXIA_FLAGS = {
    "coordinator": {
        "--cconfig", "--conf", "--metadata", "--file-clusters-status-path", "--internal-addr",
        "--admin-addr", "--metrics-addr", "--sconfig",
    },
    "server": {
        "--public-addr", "--internal-addr", "--metrics-addr", "--data-dir", "--wal-dir",
        "--db-cache-size-mb", "--sconfig",
    },
    "health": {"--host", "--port", "--timeout", "--service"},
}  # fmt: skip

#: Options of `bin/pulsar initialize-cluster-metadata` that take a value, from Pulsar 4.0's
#: `PulsarClusterMetadataSetup.Arguments` (picocli `@Option` names).
INIT_OPTIONS = {
    "--cluster", "--metadata-store", "--configuration-metadata-store",
    "--existing-bk-metadata-service-uri", "--web-service-url", "--broker-service-url",
}  # fmt: skip

OXIA_SERVICES = {"oxia-coordinator", "oxia", "bookie-init"}


def _merged() -> dict[str, Any]:
    return oxia_compose()


def _services() -> dict[str, Any]:
    services: dict[str, Any] = _merged()["services"]
    return services


def _words(service: str) -> list[str]:
    command = _services()[service]["command"]
    return [interpolate(str(word), env_example()) for word in command]


def _option(words: list[str], name: str) -> str:
    for index, word in enumerate(words):
        if word == name:
            return words[index + 1]
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{name} not in {words}")


def _environment(service: str) -> dict[str, str]:
    return service_environment(service, env_example(), _merged())


# --- The merge itself ------------------------------------------------------------------------


def test_merge_follows_the_specification_s_rules() -> None:
    """Mappings merge by key, `command` and `healthcheck.test` are replaced, other sequences
    appended, ports and volumes replaced by their unique key, `!reset` removes and `!override`
    replaces."""
    base = {
        "services": {
            "a": {
                "command": ["x"], "dns": ["1.1.1.1"], "environment": {"K": "1", "L": "2"},
                "healthcheck": {"test": ["CMD", "x"], "retries": 3},
                "ports": ["127.0.0.1:80:80", "127.0.0.1:81:81"], "volumes": ["v:/data"],
                "depends_on": {"b": {"condition": "service_healthy"}},
            },
            "b": {"image": "b:1"},
        },
    }  # fmt: skip
    override = {
        "services": {
            "a": {
                "command": ["y"], "dns": ["8.8.8.8"], "environment": {"L": Reset(), "M": "3"},
                "healthcheck": {"test": ["CMD", "y"]},
                "ports": ["127.0.0.1:8080:80"], "volumes": ["w:/data"],
                "depends_on": Override({"c": {"condition": "service_started"}}),
            },
            "b": Reset(),
        },
    }  # fmt: skip
    expected = {
        "command": ["y"], "dns": ["1.1.1.1", "8.8.8.8"], "environment": {"K": "1", "M": "3"},
        "healthcheck": {"test": ["CMD", "y"], "retries": 3},
        "ports": ["127.0.0.1:81:81", "127.0.0.1:8080:80"], "volumes": ["w:/data"],
        "depends_on": {"c": {"condition": "service_started"}},
    }  # fmt: skip
    merged = merge(base, override)
    assert ({"a"}, expected) == (set(merged["services"]), merged["services"]["a"])


def test_merged_file_is_valid_against_the_specification() -> None:
    """The merged model validates; its services are the base's without ZooKeeper, plus the
    Oxia coordinator, the Oxia data server and the BookKeeper format job."""
    PyOptions(apply_merge=True).from_yaml(yaml.safe_dump(_merged())).validate()
    expected = (set(compose()["services"]) - {"zookeeper"}) | OXIA_SERVICES
    assert expected == set(_services())


def test_every_reset_is_in_place_and_names_something_the_base_has() -> None:
    """Each `!reset` sits at the path it removes, outside the `x-` anchors (compose-go carries
    a reset through an alias only in some positions), and removes something compose.yaml sets:
    a reset of a renamed key would silently do nothing."""
    base = compose()
    found = tagged_paths(load_tagged(OXIA_FILE))
    assert all(isinstance(tag, Reset) for tag in found.values())
    assert [path for path in found if path[0].startswith("x-")] == []

    def exists(path: tuple[str, ...]) -> bool:
        node: Any = base
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True

    assert [path for path in found if not exists(path)] == []


# --- ZooKeeper is gone -----------------------------------------------------------------------


def test_nothing_depends_on_or_names_zookeeper() -> None:
    """No service depends on `zookeeper`, and no command, environment value or setting name of
    any service mentions ZooKeeper."""
    mentions = {
        name
        for name, service in _services().items()
        if re.search(r"zookeeper|zk:|zkServers", yaml.safe_dump(service), re.IGNORECASE)
    }
    assert (set(), set()) == (mentions, set(_merged()["volumes"]) & {"zookeeper-data"})


def test_every_dependency_names_a_service_and_waits_for_health_or_completion() -> None:
    """Every `depends_on` target exists; one with a healthcheck is awaited healthy, a one-shot
    job to complete successfully."""
    services = _services()
    conditions = {
        (name, target): spec["condition"]
        for name, service in services.items()
        for target, spec in service.get("depends_on", {}).items()
    }
    assert set() == {target for _, target in conditions if target not in services}
    expected = {
        key: "service_healthy"
        if "healthcheck" in services[key[1]]
        else "service_completed_successfully"
        for key in conditions
    }
    assert expected == conditions


# --- Images, commands, ports, healthchecks ---------------------------------------------------


def test_images_are_pinned_and_pulsar_parts_share_one_version() -> None:
    """Both Oxia containers run the pinned Oxia release; the BookKeeper format job runs the
    Pulsar release the bookie and the broker run."""
    services = _services()
    assert {OXIA_IMAGE} == {services[name]["image"] for name in ("oxia", "oxia-coordinator")}
    versions = {
        services[name]["image"].rsplit(":", 1)[1]
        for name in ("pulsar-init", "bookie-init", "bookie", "broker")
    }
    assert {"4.0.6"} == versions


@pytest.mark.parametrize(
    ("service", "subcommand"), [("oxia-coordinator", "coordinator"), ("oxia", "server")]
)
def test_oxia_commands_use_flags_the_release_declares(service: str, subcommand: str) -> None:
    """`oxia coordinator` and `oxia server` (the image's `oxia` binary is on its PATH) with
    flags Oxia 0.16.7 declares, each in `--flag=value` form; so do the healthchecks."""
    words = _words(service)
    assert ["oxia", subcommand] == words[:2]
    flags = {word.split("=", 1)[0] for word in words[2:]}
    assert all("=" in word for word in words[2:]), words
    assert set() == flags - OXIA_FLAGS[subcommand]
    test = _services()[service]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "oxia", "health"]
    assert set() == {word.split("=", 1)[0] for word in test[3:]} - OXIA_FLAGS["health"]


def test_pulsar_init_uses_options_initialize_cluster_metadata_declares() -> None:
    """Every option pulsar-init passes is one of `initialize-cluster-metadata`'s, each given a
    value."""
    words = _words("pulsar-init")
    assert words[:2] == ["bin/pulsar", "initialize-cluster-metadata"]
    options = words[2::2]
    assert (set(), len(words[2:]) % 2) == (set(options) - INIT_OPTIONS, 0)


def test_oxia_server_listens_where_the_cluster_config_says_and_is_published_on_loopback() -> None:
    """The data server binds the ports the cluster config advertises for the `oxia` host, its
    public port is published on 127.0.0.1 only, and no two services publish one host port."""
    server = yaml.safe_load(OXIA_CLUSTER.read_text(encoding="utf-8"))["servers"]
    assert server == [{"public": "oxia:6648", "internal": "oxia:6649"}]
    words = _words("oxia")
    binds = (_option(words, "--public-addr"), _option(words, "--internal-addr"))
    assert (binds, _services()["oxia"]["hostname"]) == (("0.0.0.0:6648", "0.0.0.0:6649"), "oxia")
    published = [port for service in _services().values() for port in service.get("ports", [])]
    host_ports = [port.rsplit(":", 1)[0] for port in published]
    assert "127.0.0.1:6648:6648" in published
    assert all(port.startswith("127.0.0.1:") for port in published)
    assert len(host_ports) == len(set(host_ports))


def test_coordinator_reads_the_mounted_cluster_config() -> None:
    """The coordinator's --cconfig is the file compose/oxia/cluster.yaml is mounted at, and
    its status file lives on its volume."""
    coordinator = _services()["oxia-coordinator"]
    words = _words("oxia-coordinator")
    mounts = dict(volume.split(":")[1::-1] for volume in coordinator["volumes"])
    assert (mounts[_option(words, "--cconfig")], mounts["/oxia/data"]) == (
        "./oxia/cluster.yaml",
        "oxia-coordinator-data",
    )
    assert _option(words, "--file-clusters-status-path").startswith("/oxia/data/")


def test_oxia_is_healthy_only_when_its_namespaces_are_served() -> None:
    """The data server's healthcheck asks its public port for `oxia-readiness`, which Oxia
    turns SERVING when the coordinator has assigned the shards; the Tombstone healthchecks are
    compose.yaml's."""
    services = _services()
    test = services["oxia"]["healthcheck"]["test"]
    assert {"--port=6648", "--service=oxia-readiness"} <= set(test)
    for name in TOMBSTONE_SERVICES:
        assert compose()["services"][name]["healthcheck"] == services[name]["healthcheck"]


# --- Where the metadata lives ----------------------------------------------------------------


def _store(url: str) -> StoreUrl:
    store = parse_store_url(url.removeprefix(METADATA_STORE_SCHEME))
    assert store.kind == OXIA, url
    return store


def _metadata_urls() -> dict[str, str]:
    """Every part's Pulsar metadata store (managed ledgers, cursors, schemas)."""
    broker, init = _environment("broker"), _words("pulsar-init")
    urls = {
        "broker": broker["metadataStoreUrl"],
        "broker configuration": broker["configurationMetadataStoreUrl"],
        "pulsar-init": _option(init, "--metadata-store"),
        "pulsar-init configuration": _option(init, "--configuration-metadata-store"),
    }
    for name in TOMBSTONE_SERVICES:
        urls[name] = _environment(name)["TOMBSTONE_METADATA_STORE_URL"]
    return urls


def _bookkeeper_uris() -> dict[str, str]:
    """Every part's BookKeeper metadata service (the ledgers)."""
    uris = {
        "bookie": _environment("bookie")["metadataServiceUri"],
        "bookie-init": _environment("bookie-init")["metadataServiceUri"],
        "broker": _environment("broker")["bookkeeperMetadataServiceUri"],
        "pulsar-init": _option(_words("pulsar-init"), "--existing-bk-metadata-service-uri"),
    }
    for name in ("verifier", "deleter"):
        uris[name] = _environment(name)["TOMBSTONE_BOOKKEEPER_METADATA_URL"]
    return uris


def test_pulsar_metadata_is_in_one_namespace_that_tombstone_reads() -> None:
    """The broker, its configuration store, initialize-cluster-metadata and the three
    Tombstone services name one store: the `broker` namespace on oxia:6648."""
    stores = {name: _store(url) for name, url in _metadata_urls().items()}
    assert {StoreUrl(OXIA, "oxia:6648", "broker")} == set(stores.values()), stores


def test_ledgers_are_in_one_namespace_that_tombstone_reads() -> None:
    """The bookie, the format job, the broker's BookKeeper client, the cluster metadata and
    the verifier and deleter name one BookKeeper store, the `bookkeeper` namespace, where
    Pulsar's driver keeps the ledgers under /ledgers (an opaque `metadata-store:` URI has no
    path, so `AbstractMetadataDriver.resolveLedgersRootPath()` falls back to the default)."""
    uris = _bookkeeper_uris()
    stores = {name: _store(uri) for name, uri in uris.items()}
    assert {StoreUrl(OXIA, "oxia:6648", "bookkeeper")} == set(stores.values()), stores
    pulsar_side = {uri for name, uri in uris.items() if name not in TOMBSTONE_SERVICES}
    assert {DEFAULT_LEDGERS_ROOT} == {driver_ledgers_root(uri) for uri in pulsar_side}


def test_every_namespace_used_is_declared_and_every_declared_one_is_used() -> None:
    """Oxia serves only the namespaces its cluster config declares."""
    declared = {ns["name"] for ns in yaml.safe_load(OXIA_CLUSTER.read_text())["namespaces"]}
    used = {_store(url).root for url in [*_metadata_urls().values(), *_bookkeeper_uris().values()]}
    assert declared == used


# --- The Tombstone services' settings --------------------------------------------------------


def test_every_tombstone_variable_in_the_override_is_one_the_services_read() -> None:
    """Every TOMBSTONE_* name compose.oxia.yaml sets or resets is listed by describe_env()."""
    named = set(re.findall(r"\bTOMBSTONE_[A-Z0-9_]+", OXIA_FILE.read_text(encoding="utf-8")))
    assert set() == named - set(describe_env())


@pytest.mark.parametrize("service", TOMBSTONE_SERVICES)
def test_tombstone_environment_has_no_unknown_variables(service: str) -> None:
    """No TOMBSTONE_* variable a Tombstone container gets in the Oxia variant is unread."""
    environment = _environment(service)
    assert "TOMBSTONE_ZOOKEEPER_SERVERS" not in environment
    assert unknown_variables(environment) == []
