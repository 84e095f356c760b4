"""An Oxia outage pauses the deleter (ZooKeeper's, 20 s long and in a process, is in
test_outage.py): the devstack Oxia server halts while the marked PDLIs fall due, and comes
back on the same port with everything it held."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from services.deleter.outage import GateSettings
from tests.deleter.stack import (
    SMALL_SPEC,
    RunningDeleter,
    create_topics,
    deleter_config,
    drained,
    mark_trims,
    running_deleter,
    running_marker,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import assert_all_gone, assert_safe, objects_in_s3
from tests.helpers import assert_eventually
from tests.store_kinds import StoreKind

DELIVERY_DELAY = timedelta(seconds=5)
"""The PDLIs fall due this long after marking: after the halt, which follows at once."""


def _sample(running: RunningDeleter, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    return sum(
        sample.value
        for family in running.metrics.registry.collect()
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


async def test_an_oxia_outage_pauses_the_deleter_and_it_resumes_after(
    oxia_store_kind: StoreKind, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Oxia (Pulsar's and BookKeeper's metadata, and Tombstone's) halts before any PDLI is
    due: the deleter pauses and holds what falls due (nothing dead
    lettered, nothing retried, nothing released); once Oxia serves again on its address
    every unlinked ledger is deleted with no dead letter and everything listed stays."""
    kind = oxia_store_kind
    server = kind.oxia
    assert server is not None
    create_topics(broker)
    model = await write_cluster(kind, s3, SMALL_SPEC)
    before = objects_in_s3(s3)
    # The verifier answers UNAVAILABLE within its store's request timeout: kept short.
    quick = dataclasses.replace(kind.zookeeper, operation_timeout=timedelta(seconds=2))
    async with running_verifier(kind, s3, zookeeper=quick) as verifier:
        config = dataclasses.replace(
            deleter_config(kind, s3, broker, verifier),
            outage=GateSettings(probe_interval=timedelta(milliseconds=200)),
        )
        async with running_deleter(config) as running:
            async with running_marker(kind, broker, verifier, delivery_delay=DELIVERY_DELAY) as m:
                marked = await mark_trims(m, model)
            await asyncio.to_thread(server.halt_from_thread)

            async def paused_and_holding() -> None:
                # On the verifier (its store is down: it is NOT_SERVING) or on the deleter's
                # own store, whichever a message meets first.
                assert _sample(running, "tombstone_deleter_paused") >= 1
                assert _sample(running, "tombstone_deleter_outage_waits_total") > 0

            await assert_eventually(paused_and_holding, timeout=60, interval=0.2)
            during = {
                name: _sample(running, name)
                for name in (
                    "tombstone_deleter_retried_total",
                    "tombstone_deleter_released_total",
                    "tombstone_deleter_dead_lettered_total",
                )
            }
            await asyncio.to_thread(server.restart_from_thread)
            status = await drained(running.deleter)
            released = _sample(running, "tombstone_deleter_released_total")
    listed, _ = await assert_safe(kind, s3, model, before)
    await assert_all_gone(kind, s3, model, marked, listed)
    assert set(during.values()) == {0.0}, during
    # After the restart a PDLI may be retried once by the verifier's shadow-scan rule (no
    # scan started since its ledger left the list while the store was away): an ordinary
    # retry, not the outage's.
    assert (status.dead_letter_backlog, released) == (0, 0.0)
