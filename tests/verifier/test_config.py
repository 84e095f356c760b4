"""The verifier's configuration from TOMBSTONE_* variables."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.core.signing_keys import generate_key_pair, write_key_pair
from services.verifier.config import VerifierConfig


def test_defaults() -> None:
    """With nothing set: port 50052, 3-day reconciler and OPEN-ledger windows, no buckets."""
    config = VerifierConfig.from_env({})
    assert (
        config.grpc.port,
        config.reconciler_min_age,
        config.open_ledger_age,
        config.offload.allowed_buckets,
        config.believed.root,
    ) == (50052, timedelta(days=3), timedelta(days=3), frozenset(), "/tombstone/believed")


def test_variables_are_read() -> None:
    """Each TOMBSTONE_VERIFIER_* variable lands in its field; the S3 allow-list is shared."""
    config = VerifierConfig.from_env(
        {
            "TOMBSTONE_S3_ALLOWED_BUCKETS": "a-bucket,b-bucket",
            "TOMBSTONE_VERIFIER_BELIEVED_MAX_ENTRIES": "1000",
            "TOMBSTONE_VERIFIER_BELIEVED_MAX_AGE": "2h",
            "TOMBSTONE_VERIFIER_RECONCILER_MIN_AGE": "72h",
            "TOMBSTONE_VERIFIER_OPEN_LEDGER_AGE": "24h",
            "TOMBSTONE_OFFLOAD_DEFAULT_BUCKET": "a-bucket",
            "TOMBSTONE_VERIFIER_CLUSTER_NAME": "east",
            "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "0",
        }
    )
    assert (
        config.offload.allowed_buckets,
        config.believed.max_entries,
        config.believed.max_batch_entries,
        config.believed.max_age,
        config.reconciler_min_age,
        config.open_ledger_age,
        config.offload.default_bucket,
        config.offload.cluster_name,
        config.shadow_scan_interval,
    ) == (
        frozenset({"a-bucket", "b-bucket"}),
        1000,
        1000,
        timedelta(hours=2),
        timedelta(hours=72),
        timedelta(days=1),
        "a-bucket",
        "east",
        timedelta(0),
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TOMBSTONE_VERIFIER_BELIEVED_MAX_ENTRIES", "0"),
        ("TOMBSTONE_VERIFIER_RECONCILER_MIN_AGE", "soon"),
        ("TOMBSTONE_VERIFIER_OPEN_LEDGER_AGE", "soon"),
        ("TOMBSTONE_VERIFIER_ALLOW_WITHOUT_PULSAR_METADATA", "true"),
        ("TOMBSTONE_VERIFIER_BELIEVED_PATH", "relative/path"),
    ],
)
def test_bad_values_name_the_variable(variable: str, value: str) -> None:
    """A malformed value fails at startup with a ConfigError naming the variable."""
    with pytest.raises(ConfigError) as err:
        VerifierConfig.from_env({variable: value})
    assert err.value.variable == variable


def test_trusted_keys_and_require_signed(tmp_path: Path) -> None:
    """Public keys load by file; requiring signatures without a key, or giving the verifier a
    private key, is refused at start naming the variable."""
    _, public = write_key_pair(tmp_path, generate_key_pair(), "m1")
    config = VerifierConfig.from_env(
        {
            "TOMBSTONE_VERIFIER_TRUSTED_KEYS": f"m1={public}",
            "TOMBSTONE_VERIFIER_REQUIRE_SIGNED": "true",
            "TOMBSTONE_VERIFIER_CLUSTER_NAME": "east",
        }
    )
    assert (config.trusted_keys.key_ids, config.require_signed) == (("m1",), True)
    with pytest.raises(ConfigError, match="TOMBSTONE_VERIFIER_TRUSTED_KEYS"):
        VerifierConfig.from_env({"TOMBSTONE_VERIFIER_REQUIRE_SIGNED": "true"})
    with pytest.raises(ConfigError, match="TOMBSTONE_VERIFIER_TRUSTED_KEYS"):
        VerifierConfig.from_env({"TOMBSTONE_VERIFIER_TRUSTED_KEYS": str(tmp_path / "m1.key")})


def test_shared_clusters_and_namespaces_settings() -> None:
    """Declared neighbours need our own cluster name and another name than ours; Oxia stores
    are refused until they are read; deleted namespaces must be tenant/ns names."""
    env = {
        "TOMBSTONE_VERIFIER_CLUSTER_NAME": "west",
        "TOMBSTONE_SHARED_CLUSTERS": "east=zk:zk-e1:2181,zk-e2:2181/pulsar",
        "TOMBSTONE_VERIFIER_DELETED_NAMESPACES": "t/old,t/c1/legacy",
        "TOMBSTONE_VERIFIER_UNSHARED_CLUSTERS": "south",
    }
    config = VerifierConfig.from_env(env)
    (east,) = config.shared_clusters
    assert (east.name, east.store.servers, east.store.root) == (
        "east",
        "zk-e1:2181,zk-e2:2181",
        "/pulsar",
    )
    assert config.deleted_namespaces == {"t/old", "t/c1/legacy"}
    assert config.unshared_clusters == {"south"}
    for bad, variable in [
        ({"TOMBSTONE_VERIFIER_CLUSTER_NAME": ""}, "TOMBSTONE_VERIFIER_CLUSTER_NAME"),
        ({"TOMBSTONE_SHARED_CLUSTERS": "west=zk:h:2181"}, "TOMBSTONE_SHARED_CLUSTERS"),
        ({"TOMBSTONE_SHARED_CLUSTERS": "east=oxia://h:6648"}, "TOMBSTONE_SHARED_CLUSTERS"),
        ({"TOMBSTONE_SHARED_CLUSTERS": "east=http://h:2181"}, "TOMBSTONE_SHARED_CLUSTERS"),
        ({"TOMBSTONE_SHARED_CLUSTERS": "east"}, "TOMBSTONE_SHARED_CLUSTERS"),
        ({"TOMBSTONE_VERIFIER_DELETED_NAMESPACES": "t/../x"}, "DELETED_NAMESPACES"),
        ({"TOMBSTONE_VERIFIER_DELETED_NAMESPACES": "justone"}, "DELETED_NAMESPACES"),
        ({"TOMBSTONE_VERIFIER_UNSHARED_CLUSTERS": "east"}, "UNSHARED_CLUSTERS"),
        ({"TOMBSTONE_CONFIGURATION_STORE": "oxia://h:6648/x"}, "CONFIGURATION_STORE"),
    ]:
        with pytest.raises(ConfigError, match=variable):
            VerifierConfig.from_env({**env, **bad})
