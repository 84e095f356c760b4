"""The Compose file is valid against the Compose specification and wires the services the way
they read their settings.

Validation uses the `compose-spec` package (bindings of the Rust `compose_spec` crate): it
deserializes every field into the specification's types, rejecting unknown keys, wrong types,
bad durations and unknown `depends_on` conditions, and checks that every network, volume,
config and secret a service uses is declared. It does not check that a `depends_on` target
exists, so a test below does.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from compose_spec import PyOptions

from services.core.config import DEFAULT_PARTITIONS, PulsarConfig, describe_env, unknown_variables
from services.core.signing_keys import generate_key_pair, write_key_pair
from services.systopic.setup import SetupPlan
from tests.compose.stack_files import (
    COMPOSE_FILE,
    PROMETHEUS,
    ROOT,
    TOMBSTONE_SERVICES,
    compose,
    env_example,
    referenced_variables,
    service_environment,
)


def _validate(text: str) -> None:
    PyOptions(apply_merge=True).from_yaml(text).validate()


def test_compose_file_is_valid_against_the_specification() -> None:
    """compose.yaml parses and validates; its services are the stack's parts."""
    _validate(COMPOSE_FILE.read_text(encoding="utf-8"))
    expected = {
        "zookeeper", "pulsar-init", "bookie", "broker", "tombstone-setup", "minio", "minio-init",
        "signing-keys", "marker", "verifier", "deleter", "prometheus", "grafana",
    }  # fmt: skip
    assert expected == set(compose()["services"])


@pytest.mark.parametrize(
    ("original", "broken"),
    [
        ('    command: ["marker", "serve"]', '    comand: ["marker", "serve"]'),
        ("      interval: 5s\n", "      interval: soon\n"),
        ("condition: service_healthy", "condition: service_ready"),
    ],
)
def test_validator_rejects_what_the_specification_forbids(original: str, broken: str) -> None:
    """The validator is not a bare YAML parse: an unknown key, a bad duration and an unknown
    dependency condition each fail."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    assert original in text
    with pytest.raises(ValueError):  # noqa: PT011 - the library raises plain ValueError
        _validate(text.replace(original, broken, 1))


def test_every_dependency_names_a_service() -> None:
    """Every `depends_on` target is a service of the file."""
    services = compose()["services"]
    missing = {
        (name, target)
        for name, service in services.items()
        for target in service.get("depends_on", {})
        if target not in services
    }
    assert set() == missing


def test_dependencies_wait_for_health_or_completion() -> None:
    """A dependency with a healthcheck is awaited healthy; one without (a one-shot init job)
    is awaited to complete successfully. Nothing starts on a dependency merely started."""
    services = compose()["services"]
    conditions = {
        (name, target): spec["condition"]
        for name, service in services.items()
        for target, spec in service.get("depends_on", {}).items()
    }
    expected = {
        key: "service_healthy"
        if "healthcheck" in services[key[1]]
        else ("service_completed_successfully")
        for key in conditions
    }
    assert expected == conditions


def test_every_tombstone_variable_is_one_the_services_read() -> None:
    """Every TOMBSTONE_* name in compose.yaml (as a setting or an interpolated variable) and in
    .env.example is listed by describe_env()."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    named = set(re.findall(r"\bTOMBSTONE_[A-Z0-9_]+", text))
    named |= {name for name in env_example() if name.startswith("TOMBSTONE_")}
    assert set() == named - set(describe_env())


def test_env_example_defines_every_required_variable() -> None:
    """Each `${NAME:?...}` that compose.yaml requires is defined in .env.example, and
    .env.example defines nothing compose.yaml does not use."""
    used = referenced_variables(COMPOSE_FILE.read_text(encoding="utf-8"))
    required = {name for name, op in used.items() if op.endswith("?")}
    defined = set(env_example())
    assert (set(), set()) == (required - defined, defined - set(used))


@pytest.mark.parametrize("service", TOMBSTONE_SERVICES)
def test_service_environment_has_no_unknown_variables(service: str) -> None:
    """No TOMBSTONE_* variable a container gets is unread (a typo would be silently ignored)."""
    assert unknown_variables(service_environment(service, env_example())) == []


REQUIRED = {
    "TOMBSTONE_GRPC_HOST",
    "TOMBSTONE_GRPC_PORT",
    "TOMBSTONE_METRICS_HOST",
    "TOMBSTONE_METRICS_PORT",
    "TOMBSTONE_ZOOKEEPER_SERVERS",
    "TOMBSTONE_AUTH_TOKENS",
}
REQUIRED_BY_SERVICE = {
    "marker": {
        "TOMBSTONE_PULSAR_SERVICE_URL",
        "TOMBSTONE_VERIFIER_ADDRESS",
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL",
    },
    "verifier": {"TOMBSTONE_S3_ENDPOINT_URL", "TOMBSTONE_S3_ALLOWED_BUCKETS"},
    "deleter": {
        "TOMBSTONE_PULSAR_SERVICE_URL",
        "TOMBSTONE_S3_ENDPOINT_URL",
        "TOMBSTONE_S3_ALLOWED_BUCKETS",
        "TOMBSTONE_VERIFIER_ADDRESS",
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL",
    },
}


@pytest.mark.parametrize("service", TOMBSTONE_SERVICES)
def test_required_settings_are_set(service: str) -> None:
    """Settings whose defaults only make sense on one machine (loopback addresses, metrics
    off, no auth) are all set, to non-empty values, for each service."""
    environment = service_environment(service, env_example())
    required = REQUIRED | REQUIRED_BY_SERVICE[service]
    assert set() == {name for name in required if not environment.get(name, "").strip()}


KEYS_IN_CONTAINER = "/var/lib/tombstone/"


def _with_keys_at(environment: dict[str, str], root: Path) -> dict[str, str]:
    """The environment with the container's key paths moved under `root`, where the key pair
    `signing-keys` would make has been written (`tombstone keys generate --name marker-1`)."""
    if not (root / "signing" / "marker-1.key").exists():
        pair = generate_key_pair()
        private, public = write_key_pair(root / "made", pair, "marker-1")
        (root / "signing").mkdir()
        (root / "trusted").mkdir()
        private.rename(root / "signing" / private.name)
        public.rename(root / "trusted" / public.name)
    return {k: v.replace(KEYS_IN_CONTAINER, f"{root}/") for k, v in environment.items()}


def _load_config(service: str, environment: dict[str, str]) -> object:
    if service == "marker":
        from services.marker.config import MarkerConfig

        return MarkerConfig.from_env(environment)
    if service == "verifier":
        from services.verifier.config import VerifierConfig

        return VerifierConfig.from_env(environment)
    from services.deleter.config import DeleterConfig

    return DeleterConfig.from_env(environment)


@pytest.mark.parametrize("service", TOMBSTONE_SERVICES)
def test_service_configuration_loads_from_the_compose_environment(
    service: str, tmp_path: Path
) -> None:
    """Each service's own from_env() accepts what Compose gives it: listening on all
    interfaces, auth on, ZooKeeper at the zookeeper container."""
    environment = _with_keys_at(service_environment(service, env_example()), tmp_path)
    config = _load_config(service, environment)
    grpc, zookeeper = config.grpc, config.zookeeper  # type: ignore[attr-defined]
    assert (grpc.host, grpc.auth.enabled, zookeeper.servers) == ("0.0.0.0", True, "zookeeper:2181")


def test_marker_signs_with_the_key_the_verifier_trusts_and_requires(tmp_path: Path) -> None:
    """The marker signs with marker-1, the verifier trusts marker-1 and requires signatures;
    the verifier mounts only the public half (never the marker's private-key volume)."""
    from services.marker.config import MarkerConfig
    from services.verifier.config import VerifierConfig

    values = env_example()
    marker = MarkerConfig.from_env(_with_keys_at(service_environment("marker", values), tmp_path))
    verifier = VerifierConfig.from_env(
        _with_keys_at(service_environment("verifier", values), tmp_path)
    )
    assert marker.signer is not None
    assert (marker.signer.key_id, ("marker-1",), True) == (
        "marker-1",
        verifier.trusted_keys.key_ids,
        verifier.require_signed,
    )
    volumes = {name: compose()["services"][name]["volumes"] for name in ("marker", "verifier")}
    assert "signing-key:/var/lib/tombstone/signing:ro" in volumes["marker"]
    assert volumes["verifier"] == ["trusted-keys:/var/lib/tombstone/trusted:ro"]


def test_clients_hold_tokens_the_servers_accept_with_the_right_role() -> None:
    """The marker's and the deleter's verifier tokens are in the verifier's table with the
    roles its methods require (marker: Believe, deleter: Verify)."""
    from services.core._tokens import parse_tokens

    values = env_example()
    table = parse_tokens(service_environment("verifier", values)["TOMBSTONE_AUTH_TOKENS"])
    roles = {
        client: table[service_environment(client, values)["TOMBSTONE_VERIFIER_TOKEN"]].roles
        for client in ("marker", "deleter")
    }
    assert {"marker": frozenset({"marker"}), "deleter": frozenset({"deleter"})} == roles


def test_every_image_is_pinned() -> None:
    """Every image names a tag other than `latest` (or a digest); ours carries the project's
    version."""
    unpinned = {}
    for name, service in compose()["services"].items():
        image = service["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else ""
        if "@sha256:" not in image and (not tag or tag == "latest"):
            unpinned[name] = image
    assert unpinned == {}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert {f"tombstone:{version}"} == {
        compose()["services"][name]["image"] for name in TOMBSTONE_SERVICES
    }


def test_pulsar_parts_share_one_version() -> None:
    """ZooKeeper, the init jobs, the bookie and the broker run the same Pulsar release."""
    services = compose()["services"]
    versions = {
        services[name]["image"].rsplit(":", 1)[1]
        for name in ("zookeeper", "pulsar-init", "bookie", "broker")
    }
    assert {"4.0.6"} == versions


def test_broker_uses_zookeeper_and_offloads_to_minio() -> None:
    """The broker's metadata store is the zookeeper container (so the services read /ledgers
    and /managed-ledgers there) and its S3 offloader writes to the bucket the services may
    touch."""
    values = env_example()
    broker = {k: str(v) for k, v in compose()["services"]["broker"]["environment"].items()}
    bucket = service_environment("deleter", values)["TOMBSTONE_S3_ALLOWED_BUCKETS"]
    expected = ("zk:zookeeper:2181", "aws-s3", "http://minio:9000", values["OFFLOAD_BUCKET"])
    actual = (
        broker["metadataStoreUrl"],
        broker["managedLedgerOffloadDriver"],
        broker["s3ManagedLedgerOffloadServiceEndpoint"],
        bucket,
    )
    assert expected == actual


@pytest.mark.parametrize("service", TOMBSTONE_SERVICES)
def test_healthcheck_asks_the_service_grpc_health(service: str) -> None:
    """A Tombstone container is healthy when `tombstone health --readiness` gets SERVING from
    its own gRPC port: a service paused on an outage is not healthy for what depends on it."""
    spec = compose()["services"][service]
    port = service_environment(service, env_example())["TOMBSTONE_GRPC_PORT"]
    expected = ["CMD", "tombstone", "health", "--readiness", "--address", f"127.0.0.1:{port}"]
    assert expected == spec["healthcheck"]["test"]


def test_prometheus_scrapes_each_service_metrics_port() -> None:
    """Prometheus's targets are exactly the services' TOMBSTONE_METRICS_PORT endpoints."""
    config = yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))
    targets = {
        target
        for job in config["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    values = env_example()
    expected = {
        f"{name}:{service_environment(name, values)['TOMBSTONE_METRICS_PORT']}"
        for name in TOMBSTONE_SERVICES
    }
    assert expected == targets


def test_setup_job_prepares_the_topics_before_marker_and_deleter() -> None:
    """`tombstone-setup` runs `tombstone setup` from the Tombstone image with the same topics,
    partition count and admin API as the marker and the deleter, which start only after it
    completed: nothing is published before the deleters' subscription exists."""
    services = compose()["services"]
    job = services["tombstone-setup"]
    assert (job["command"], job["restart"]) == (["setup"], "no")
    assert job["image"] == services["marker"]["image"]
    values = env_example()
    environment = service_environment("tombstone-setup", values)
    assert unknown_variables(environment) == []
    plan = SetupPlan.from_env(environment)
    for service in ("marker", "deleter"):
        depends = services[service]["depends_on"]["tombstone-setup"]
        assert depends["condition"] == "service_completed_successfully"
        theirs = service_environment(service, values)
        assert PulsarConfig.from_env(theirs) == plan.pulsar
        assert theirs["TOMBSTONE_DELETER_PULSAR_ADMIN_URL"] == plan.admin_url
    assert plan.pulsar.partitions == DEFAULT_PARTITIONS


@pytest.mark.parametrize(("mode", "preview"), [("delete", False), ("preview", True)])
def test_one_setting_turns_the_stack_s_deleter_into_a_preview(
    mode: str, preview: bool, tmp_path: Path
) -> None:
    """`TOMBSTONE_DELETER_MODE` in compose/.env reaches both the deleter and tombstone-setup
    (which then makes, or removes, the preview subscription); the default deletes."""
    from services.deleter.config import DeleterConfig

    assert env_example()["TOMBSTONE_DELETER_MODE"] == "delete"
    values = {**env_example(), "TOMBSTONE_DELETER_MODE": mode}
    deleter = DeleterConfig.from_env(
        _with_keys_at(service_environment("deleter", values), tmp_path)
    )
    plan = SetupPlan.from_env(service_environment("tombstone-setup", values))
    assert (deleter.preview, plan.preview) == (preview, preview)
