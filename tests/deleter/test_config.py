"""DeleterConfig.from_env: defaults, values, and refusals."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.deleter.config import DeleterConfig, Limits


def test_defaults_without_variables() -> None:
    """With nothing set: port 50053, the ZooKeeper backend with batches of 256 deletes, 10
    retries, no filesystem root."""
    config = DeleterConfig.from_env({})
    assert (
        config.grpc.port,
        config.bookkeeper_backend,
        config.zookeeper_delete_batch,
        config.retry.max_retries,
        config.filesystem_root,
    ) == (50053, "zookeeper", 256, 10, None)


def test_values_are_read() -> None:
    """Each variable lands in its field."""
    config = DeleterConfig.from_env(
        {
            "TOMBSTONE_DELETER_ID": "d1",
            "TOMBSTONE_DELETER_BOOKKEEPER_BACKEND": "bookie-http",
            "TOMBSTONE_DELETER_RETRY_INITIAL_DELAY": "250ms",
            "TOMBSTONE_DELETER_MAX_RETRIES": "3",
            "TOMBSTONE_DELETER_ZOOKEEPER_OPS_PER_SECOND": "50",
            "TOMBSTONE_DELETER_S3_CONCURRENCY": "2",
            "TOMBSTONE_DELETER_FILESYSTEM_ROOT": "/data/offload",
            "TOMBSTONE_DELETER_RECEIVER_QUEUE_SIZE": "100",
            "TOMBSTONE_DELETER_ZOOKEEPER_DELETE_BATCH": "32",
        }
    )
    assert (
        "d1",
        "bookie-http",
        timedelta(milliseconds=250),
        3,
        Limits(1024, 50, initial=256),
        2,
        Path("/data/offload"),
        100,
        32,
    ) == (
        config.deleter_id,
        config.bookkeeper_backend,
        config.retry.initial_delay,
        config.retry.max_retries,
        config.zookeeper_limits,
        config.s3_limits.concurrency,
        config.filesystem_root,
        config.receiver_queue_size,
        config.zookeeper_delete_batch,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TOMBSTONE_DELETER_BOOKKEEPER_BACKEND", "rados"),
        ("TOMBSTONE_DELETER_RETRY_INITIAL_DELAY", "0s"),
        ("TOMBSTONE_DELETER_S3_BATCH_KEYS", "1001"),
        ("TOMBSTONE_DELETER_MAX_IN_FLIGHT", "0"),
        ("TOMBSTONE_DELETER_ZOOKEEPER_DELETE_BATCH", "0"),
        ("TOMBSTONE_DELETER_FORGED_DLQ_RATE", "0"),
        ("TOMBSTONE_DELETER_FORGED_DLQ_RATE", "fast"),
        ("TOMBSTONE_DELETER_FORGED_DLQ_BURST", "0"),
        ("TOMBSTONE_DELETER_OUTAGE_PROBE_INTERVAL", "0s"),
        ("TOMBSTONE_DELETER_OUTAGE_MAX_WAITS", "0"),
    ],
)
def test_bad_values_are_refused(name: str, value: str) -> None:
    """A value out of range or of the wrong kind is a ConfigError naming the variable."""
    with pytest.raises(ConfigError) as failure:
        DeleterConfig.from_env({name: value})
    assert name in str(failure.value)


def test_forged_pace_and_outage_settings() -> None:
    """Defaults: 1 forged dead letter per second and source, bursts of 100, a probe every
    2 s, 10 outage waits per message; each variable is read."""
    default = DeleterConfig.from_env({})
    config = DeleterConfig.from_env(
        {
            "TOMBSTONE_DELETER_FORGED_DLQ_RATE": "0.5",
            "TOMBSTONE_DELETER_FORGED_DLQ_BURST": "20",
            "TOMBSTONE_DELETER_OUTAGE_PROBE_INTERVAL": "500ms",
            "TOMBSTONE_DELETER_OUTAGE_MAX_WAITS": "3",
        }
    )
    assert (
        default.forged_pace.rate,
        default.forged_pace.burst,
        default.outage.probe_interval,
        default.outage.max_waits,
    ) == (1.0, 100, timedelta(seconds=2), 10)
    assert (
        config.forged_pace.rate,
        config.forged_pace.burst,
        config.outage.probe_interval,
        config.outage.max_waits,
    ) == (0.5, 20, timedelta(milliseconds=500), 3)


def test_concurrency_floors_are_read_and_checked() -> None:
    """A floor is read beside its ceiling; equal, the limit is static; above it, refused."""
    config = DeleterConfig.from_env(
        {
            "TOMBSTONE_DELETER_S3_CONCURRENCY": "4",
            "TOMBSTONE_DELETER_S3_CONCURRENCY_MIN": "4",
            "TOMBSTONE_DELETER_ZOOKEEPER_CONCURRENCY_MIN": "16",
        }
    )
    s3, zk = config.s3_limits.adaptive(), config.zookeeper_limits.adaptive()
    assert (s3.min_limit, s3.max_limit, zk.min_limit, zk.max_limit) == (4, 4, 16, 1024)
    with pytest.raises(ConfigError, match="TOMBSTONE_DELETER_S3_CONCURRENCY_MIN"):
        DeleterConfig.from_env(
            {
                "TOMBSTONE_DELETER_S3_CONCURRENCY": "2",
                "TOMBSTONE_DELETER_S3_CONCURRENCY_MIN": "3",
            }
        )


def test_the_mode_is_delete_unless_preview_is_asked_for() -> None:
    """By default a deleter deletes and reads the deleters' subscription."""
    config = DeleterConfig.from_env({})
    assert (config.mode, config.preview, config.reading_subscription) == (
        "delete",
        False,
        "tombstone-deleter",
    )


def test_a_preview_reads_its_own_subscription() -> None:
    """`preview` (any case) reads the preview subscription; its name can be chosen."""
    config = DeleterConfig.from_env(
        {
            "TOMBSTONE_DELETER_MODE": "Preview",
            "TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION": "first-week",
        }
    )
    assert (config.mode, config.preview, config.reading_subscription) == (
        "preview",
        True,
        "first-week",
    )
    assert config.subscription == "tombstone-deleter"


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="TOMBSTONE_DELETER_MODE"):
        DeleterConfig.from_env({"TOMBSTONE_DELETER_MODE": "dry-run"})


@pytest.mark.parametrize(
    "environ",
    [
        {"TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION": "tombstone-deleter"},
        {"TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION": "tombstone-dlq"},
        {
            "TOMBSTONE_DELETER_SUBSCRIPTION": "pool",
            "TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION": "pool",
        },
    ],
)
def test_a_preview_subscription_that_is_not_its_own_is_refused(environ: dict[str, str]) -> None:
    """Sharing a name with the deleters' or the dead letters' subscription would let
    a preview acknowledge what the deleters must still process: refused in either mode."""
    with pytest.raises(ConfigError, match="TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION"):
        DeleterConfig.from_env(environ)
