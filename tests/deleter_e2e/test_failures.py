"""Failure tests with the real parts; each checks S1 (nothing referenced deleted) and L1
(nothing orphaned, or dead-lettered with a reason)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.s3_faults import S3FaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.deleter.handling import Backends
from services.deleter.ports import DeleteResult
from tests.deleter.stack import (
    deleter_config,
    drained,
    running_deleter,
    s3_config,
)
from tests.deleter_e2e.checks import assert_all_gone, assert_safe
from tests.deleter_e2e.conftest import Trimmed
from tests.helpers import assert_eventually


@dataclass
class StuckAfterDelete:
    """The real BookKeeper backend, but the process 'dies' right after the delete."""

    inner: object
    deleted: int = 0

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        await self.inner.delete_ledger(ledger_id=ledger_id, path=path, version=version)  # type: ignore[attr-defined]
        self.deleted += 1
        await asyncio.Event().wait()  # never returns: no acknowledgement follows
        raise AssertionError("unreachable")


async def test_killed_after_delete_before_ack_redelivery_is_harmless(
    trimmed: Trimmed, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Deletes done but never acknowledged come again; the next deleter settles them (the
    verifier finds them gone) with no dead letter and nothing listed touched."""
    config = deleter_config(zk, s3, broker, trimmed.verifier, drain_timeout=timedelta(0))
    stuck: list[StuckAfterDelete] = []

    def wrap(backends: Backends) -> Backends:
        stuck.append(StuckAfterDelete(backends.bookkeeper))
        return replace(backends, bookkeeper=stuck[0])

    async with running_deleter(config, wrap_backends=wrap):

        async def some_deleted() -> None:
            assert stuck[0].deleted > 0

        await assert_eventually(some_deleted, timeout=30)
    async with running_deleter(config) as second:
        status = await drained(second.deleter)
    listed, _ = await assert_safe(zk, s3, trimmed.model, trimmed.objects_before)
    await assert_all_gone(zk, s3, trimmed.model, trimmed.marked, listed)
    assert status.dead_letter_backlog == 0


@pytest.fixture
async def proxy(s3: S3Server) -> AsyncIterator[S3FaultProxy]:
    async with S3FaultProxy(s3.endpoint) as p:
        yield p


async def test_s3_errors_for_a_while_are_retried_then_succeed(
    trimmed: Trimmed,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    proxy: S3FaultProxy,
) -> None:
    """The first DeleteObjects requests fail with 503 (fewer than the retry budget can absorb):
    the PDLIs are retried, then every object is gone and nothing is dead-lettered."""
    proxy.fail(count=3, status=503, code="SlowDown", operation="DeleteObjects")
    config = deleter_config(
        zk, s3, broker, trimmed.verifier, s3_settings=s3_config(s3, proxy.endpoint)
    )
    async with running_deleter(config) as running:
        status = await drained(running.deleter)
    listed, _ = await assert_safe(zk, s3, trimmed.model, trimmed.objects_before)
    await assert_all_gone(zk, s3, trimmed.model, trimmed.marked, listed)
    assert (proxy.injected["DeleteObjects"] > 0, status.dead_letter_backlog) == (True, 0)


async def test_permanent_error_dead_letters_then_replay_completes(
    trimmed: Trimmed,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    proxy: S3FaultProxy,
) -> None:
    """AccessDenied sends offload PDLIs to the DLQ with that reason; after the fault is
    fixed, a replay of the DLQ deletes them."""
    proxy.fail(status=403, code="AccessDenied", operation="DeleteObjects")
    config = deleter_config(
        zk, s3, broker, trimmed.verifier, s3_settings=s3_config(s3, proxy.endpoint)
    )
    async with running_deleter(config) as running:
        admin = running.deleter.admin
        status = await drained(running.deleter)
        letters, _ = await admin.list_dead_letters(limit=1000)
        assert {"permanent_error"} == {letter.reason_code for letter in letters}
        assert all("AccessDenied" in letter.reason for letter in letters)
        assert status.dead_letters_by_reason == {"permanent_error": len(letters)}
        proxy.clear()
        replayed = await admin.replay(message_ids=(), every=True)
        assert (len(letters), []) == (replayed.replayed, replayed.not_found)
        status = await drained(running.deleter)
    listed, _ = await assert_safe(zk, s3, trimmed.model, trimmed.objects_before)
    await assert_all_gone(zk, s3, trimmed.model, trimmed.marked, listed)
    assert status.dead_letter_backlog == 0


async def test_two_deleters_share_the_subscription(
    trimmed: Trimmed, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Two deleters on the same Shared subscription: together they delete everything
    unlinked, nothing listed, and dead-letter nothing."""
    first = deleter_config(zk, s3, broker, trimmed.verifier, deleter_id="one")
    second = deleter_config(zk, s3, broker, trimmed.verifier, deleter_id="two")
    async with running_deleter(first) as one, running_deleter(second) as two:
        status = await drained(one.deleter)
        await drained(two.deleter)
    listed, _ = await assert_safe(zk, s3, trimmed.model, trimmed.objects_before)
    await assert_all_gone(zk, s3, trimmed.model, trimmed.marked, listed)
    assert status.dead_letter_backlog == 0
