"""Tombstone's Pulsar code against the secured devstack broker, configured only through its
`TOMBSTONE_PULSAR_*` settings: `tombstone setup`, the marker's producer and subscription
check, the deleter's consumer and backlogs, over TLS with a token and with OAuth2; and what a
refused or unreachable credential gives: `PermissionDenied` / `Unavailable` and the failure
counter, never a crash."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from click.testing import CliRunner
from prometheus_client import Counter

from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.pulsar.security import make_ca
from services.cli import cli
from services.core.config import PulsarConfig
from services.core.errors import PermissionDenied, Unavailable
from services.core.metrics import Metrics
from services.systopic._consumer import ConsumerSettings, open_message_source
from services.systopic._pulsar import open_intent_publisher
from services.systopic.admin import PulsarAdmin, partition_names
from services.systopic.admin_auth import admin_credentials, admin_failures, secured_admin
from services.systopic.oauth2 import OAuth2TokenSource
from services.systopic.ports import OutgoingMessage, ProducerSettings
from services.systopic.setup import SetupPlan, prepare_topics
from services.systopic.subscription_watch import SubscriptionWatch, WatchSettings

PARTITIONS = 2
SUBSCRIPTION = "tombstone-deleter"


def environment(broker: PulsarBrokerProcess, auth: str, **extra: str) -> dict[str, str]:
    return {
        **broker.tombstone_environment(auth),
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_PULSAR_OPERATION_TIMEOUT": "3s",
        **extra,
    }


@asynccontextmanager
async def admin_of(config: PulsarConfig, url: str) -> AsyncIterator[tuple[PulsarAdmin, Counter]]:
    failures = admin_failures(Metrics())
    async with aiohttp.ClientSession() as http:
        yield secured_admin(http, url, config.security, failures=failures, timeout=5), failures


def failed(failures: Counter, call: str, reason: str) -> float:
    return float(failures.labels(call, reason)._value.get())


@pytest.mark.parametrize("auth", ["token", "oauth2"])
async def test_setup_produce_check_consume_and_backlog(
    secure: PulsarBrokerProcess, auth: str
) -> None:
    env = environment(secure, auth)
    plan = SetupPlan.from_env(env)
    await asyncio.to_thread(prepare_topics, plan)
    config = PulsarConfig.from_env(env)
    settings = ProducerSettings(producer_name=f"marker-{auth}")
    async with open_intent_publisher(config, settings) as publisher:
        messages = [OutgoingMessage(f"m{i}".encode(), f"key-{i}", {}) for i in range(4)]
        sent = await publisher.publish(messages)
    async with admin_of(config, plan.admin_url) as (admin, failures):
        watch_settings = WatchSettings(config.topic, SUBSCRIPTION, PARTITIONS)
        present = await SubscriptionWatch(admin, watch_settings).check()
        backlog_before = await admin.backlog(config.topic, SUBSCRIPTION)
        received = []
        source_settings = ConsumerSettings(subscription=SUBSCRIPTION)
        async with open_message_source(config, config.topic, source_settings) as source:
            for _ in messages:
                message = await asyncio.wait_for(source.receive(), 10)
                await source.acknowledge(message)
                received.append(message.payload)
        refused = sum(failed(failures, call, "unauthorized") for call in ("subscriptions", "stats"))
    # The backlog counts entries: a round's batch is one.
    assert ([r.ok for r in sent], present, backlog_before > 0, sorted(received), refused) == (
        [True] * 4,
        True,
        True,
        [m.payload for m in messages],
        0,
    )


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


async def test_a_refused_token_is_permission_denied_and_counted(
    secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """The admin API answers 401: the watch holds publishing with the reason, the counter
    says `unauthorized`; the binary client's refusal ends as `Unavailable` in its timeout."""
    forged = _write(tmp_path / "forged.token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    env = environment(secure, "token", TOMBSTONE_PULSAR_AUTH_TOKEN_FILE=str(forged))
    config = PulsarConfig.from_env(env)
    async with admin_of(config, env["TOMBSTONE_DELETER_PULSAR_ADMIN_URL"]) as (admin, failures):
        with pytest.raises(PermissionDenied):
            await admin.partitions(config.topic)
        watch = SubscriptionWatch(admin, WatchSettings(config.topic, SUBSCRIPTION, PARTITIONS))
        ready = await watch.check()
        counted = (
            failed(failures, "partitions", "unauthorized"),
            failed(failures, "subscriptions", "unauthorized"),
        )
    with pytest.raises(Unavailable):
        async with open_intent_publisher(config, ProducerSettings(producer_name="refused")):
            pass
    reason = watch.unready_reason() or ""
    # The partitions are checked together: the first refusal ends the check, so one or both
    # of the subscription calls may have been counted.
    assert (ready, "check the credentials" in reason, counted[0], counted[1] >= 1) == (
        False,
        True,
        1.0,
        True,
    )


async def test_a_wrong_client_secret_is_permission_denied_from_the_issuer(
    secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    wrong = _write(
        tmp_path / "wrong.json", json.dumps({"client_id": "tombstone", "client_secret": "no"})
    )
    env = environment(secure, "oauth2", TOMBSTONE_PULSAR_OAUTH2_PRIVATE_KEY=str(wrong))
    config = PulsarConfig.from_env(env)
    async with admin_of(config, env["TOMBSTONE_DELETER_PULSAR_ADMIN_URL"]) as (admin, failures):
        with pytest.raises(PermissionDenied, match="invalid_client"):
            await admin.backlog(config.topic, SUBSCRIPTION)
        counted = failed(failures, "partitions", "unauthorized")
    source_settings = ConsumerSettings(subscription=SUBSCRIPTION)
    with pytest.raises(Unavailable):
        async with open_message_source(config, config.topic, source_settings):
            pass
    assert counted == 1.0


async def test_an_unreachable_issuer_is_unavailable_and_counted(
    secure: PulsarBrokerProcess,
) -> None:
    closed = f"https://127.0.0.1:{free_port('127.0.0.1')}"
    env = environment(secure, "oauth2", TOMBSTONE_PULSAR_OAUTH2_ISSUER_URL=closed)
    config = PulsarConfig.from_env(env)
    async with admin_of(config, env["TOMBSTONE_DELETER_PULSAR_ADMIN_URL"]) as (admin, failures):
        with pytest.raises(Unavailable):
            await admin.subscriptions(partition_names(config.topic, PARTITIONS)[0])
        assert failed(failures, "subscriptions", "unavailable") == 1.0


async def test_an_untrusted_broker_certificate_is_unavailable_for_admin_calls(
    secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    other = tmp_path / "other-ca.pem"
    other.write_bytes(make_ca("another CA")[0])
    env = environment(secure, "token", TOMBSTONE_PULSAR_TLS_TRUST_CERTS_FILE_PATH=str(other))
    config = PulsarConfig.from_env(env)
    async with admin_of(config, env["TOMBSTONE_DELETER_PULSAR_ADMIN_URL"]) as (admin, failures):
        with pytest.raises(Unavailable):
            await admin.partitions(config.topic)
        assert failed(failures, "partitions", "unavailable") == 1.0


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_admin_oauth2_token_is_cached_then_refreshed_before_expiry(
    secure: PulsarBrokerProcess,
) -> None:
    """One grant serves calls until shortly before `expires_in`; then a new grant; a refused
    token is forgotten at once. Each token is accepted by the broker's admin API."""
    config = PulsarConfig.from_env(environment(secure, "oauth2"))
    assert config.security.oauth2 is not None
    clock = _Clock()
    grants = []
    async with aiohttp.ClientSession() as http:
        source = OAuth2TokenSource(
            http, config.security.oauth2, ssl_context=config.security.ssl_context(), clock=clock
        )
        admin = PulsarAdmin(
            http,
            secure.admin_url,
            credentials=admin_credentials(http, config.security),
            ssl_context=config.security.ssl_context(),
        )
        first = await source.token()
        grants.append(source.grants)
        clock.now = 3000.0  # well within the issuer's hour
        assert await source.token() == first
        grants.append(source.grants)
        clock.now = 3600.0 - 10  # inside the refresh margin
        await source.token()
        grants.append(source.grants)
        source.invalidate()
        await source.token()
        grants.append(source.grants)
        partitions = await admin.partitions(config.topic)
    assert (grants, partitions) == ([1, 1, 2, 3], 0)


@pytest.mark.parametrize("auth", ["token", "oauth2"])
def test_tombstone_setup_command_over_tls(secure: PulsarBrokerProcess, auth: str) -> None:
    """`tombstone setup` then `--check`, configured only by the environment."""
    env = environment(secure, auth)
    made = CliRunner().invoke(cli, ["setup"], env=env)
    checked = CliRunner().invoke(cli, ["setup", "--check"], env=env)
    assert (made.exit_code, checked.exit_code, "missing" in checked.output) == (0, 0, False)


def test_tombstone_setup_refused_credentials_exit_2(
    secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    forged = _write(tmp_path / "forged.token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    env = environment(secure, "token", TOMBSTONE_PULSAR_AUTH_TOKEN_FILE=str(forged))
    result = CliRunner().invoke(cli, ["setup", "--check"], env=env)
    assert (result.exit_code, "HTTP 401" in result.output) == (2, True)


async def test_a_token_file_gone_is_unavailable_and_counted(
    secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """Rotation caught between delete and write: the call is not made, and counted."""
    assert secure.secure is not None
    token = _write(tmp_path / "rotating.token", secure.secure.token.read_text())
    env = environment(secure, "token", TOMBSTONE_PULSAR_AUTH_TOKEN_FILE=str(token))
    config = PulsarConfig.from_env(env)
    async with admin_of(config, env["TOMBSTONE_DELETER_PULSAR_ADMIN_URL"]) as (admin, failures):
        before = await admin.partitions(config.topic)
        token.unlink()
        with pytest.raises(Unavailable, match="cannot read"):
            await admin.partitions(config.topic)
        assert (before, failed(failures, "partitions", "unavailable")) == (0, 1.0)
