"""A preview with the real parts (ZooKeeper, moto S3, the devstack broker through the real
client, the verifier's and marker's own code): it deletes nothing and leaves the deleters'
backlog whole; once deletion is enabled, the deleters delete exactly what it said they would."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZooKeeperServer
from services.core.errors import StartupRefused
from services.deleter.handling import Backends
from services.deleter.ports import DeleteResult
from services.deleter.preview import PreviewReport
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic.admin import PulsarAdmin
from services.systopic.messages import encode_intent
from services.systopic.ports import OutgoingMessage
from services.systopic.setup import SetupPlan, prepare_topics
from tests.deleter.stack import (
    PARTITIONS,
    SMALL_SPEC,
    SYSTEM,
    deleter_config,
    drained,
    mark_cursor_and_schema_trims,
    mark_trims,
    running_deleter,
    running_e2e_deleter,
    running_marker,
    running_verifier,
    unsigned_pdli,
    write_cluster,
)
from tests.deleter_e2e.checks import ledgers_in_zookeeper, objects_in_s3
from tests.deleter_e2e.conftest import Trimmed
from tests.deleter_e2e.process import ROOT, DeleterProcess, cli, deleter_env
from tests.deleter_e2e.test_bad_input import publish
from tests.helpers import assert_eventually
from tests.verifier.world import World
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf

PREVIEW = "tombstone-preview"
DELETERS = "tombstone-deleter"
Verdict = tuple[int, str]
"""(ledger id, tier) of one would-delete or delete."""


def setup_topics(broker: PulsarBrokerProcess, *, preview: bool) -> None:
    """`tombstone setup` with TOMBSTONE_DELETER_MODE=preview (or delete)."""
    prepare_topics(SetupPlan.for_topic(broker.admin_url, SYSTEM, PARTITIONS, preview=preview))


async def backlog(broker: PulsarBrokerProcess, subscription: str) -> int:
    async with aiohttp.ClientSession() as http:
        admin = PulsarAdmin(http, broker.admin_url)
        topics = (SYSTEM, f"{SYSTEM}-RETRY")
        counts = [await admin.backlog(topic, subscription) for topic in topics]
    return sum(counts)


async def dead_letter_backlog(broker: PulsarBrokerProcess) -> int:
    async with aiohttp.ClientSession() as http:
        return await PulsarAdmin(http, broker.admin_url).backlog(f"{SYSTEM}-DLQ", "tombstone-dlq")


@dataclass
class Workload:
    model: ClusterModel
    ledgers: set[int]
    """Every ledger znode of the cluster before anything ran."""
    objects: set[str]
    """Every offloaded object before anything ran."""
    published: int
    """PDLIs on the system topic."""
    verifier: str


@pytest.fixture
async def workload(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> AsyncIterator[Workload]:
    """Topics set up for a preview, a simulated cluster trimmed through the marker (data,
    cursor and schema ledgers, offloaded or not), PDLIs nobody marked and garbage bytes
    published straight to the topic, and a verifier on it."""
    setup_topics(broker, preview=True)
    model = await write_cluster(zk, s3, SMALL_SPEC)
    every = {led.ledger_id for led in model.bookkeeper_ledgers()}
    ledgers = await ledgers_in_zookeeper(zk, every)
    objects = objects_in_s3(s3)
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            marked = await mark_trims(marker, model)
            side = await mark_cursor_and_schema_trims(marker, model)
        odd = unmarked(model) + GARBAGE
        await publish(broker, odd)
        published = sum(len(ids) for ids in marked.values()) + len(side) + len(odd)
        yield Workload(model, ledgers, objects, published, verifier)


def unmarked(model: ClusterModel) -> list[OutgoingMessage]:
    """PDLIs nobody marked, about ledgers no marked PDLI deletes (so that the deleters find
    each as the preview did): a listed ledger under its owner (IN_USE) and under another
    (MISMATCH), a missing ledger (NOT_FOUND), one without a ledger type (INVALID), one of
    another cluster (FOREIGN)."""
    ml = next(m for m in model.managed_ledgers.values() if len(m.ledger_ids) > 1)
    other = next(m for m in model.managed_ledgers.values() if m.name != ml.name)
    current = ml.ledger_ids[-1]

    pdlis = [
        unsigned_pdli(current, ml.name),
        unsigned_pdli(current, other.name),
        unsigned_pdli(999_999, ml.name),
        unsigned_pdli(current, ml.name, ledger_type=_pd.LEDGER_TYPE_UNSPECIFIED),
        unsigned_pdli(999_998, ml.name, cluster="another-cluster"),
    ]
    return [encode_intent(p) for p in pdlis]


GARBAGE = [OutgoingMessage(b"\x00\xff not a pdli", "x", {}), OutgoingMessage(b"", "y", {})]
DEAD_LETTERS = {"mismatch": 1, "invalid": 1, "foreign": 1, "undecodable": 2}
"""What a deleter dead-letters of `unmarked` and `GARBAGE`."""


def verdicts(
    logs: list[MutableMapping[str, Any]], event: str, **match: str
) -> collections.Counter[Verdict]:
    """(ledger id, tier) of every audit line `event` (with `match`), counted."""
    found: collections.Counter[Verdict] = collections.Counter()
    for line in logs:
        if line.get("event") != event or any(line.get(k) != v for k, v in match.items()):
            continue
        found[(int(line["ledger_id"]), str(line.get("tier") or line.get("detail")))] += 1
    return found


def total(report: PreviewReport) -> int:
    counts = (report.would_delete, report.settled, report.would_dead_letter)
    return sum(sum(c.values()) for c in counts)


@contextmanager
def audit_lines() -> Iterator[list[MutableMapping[str, Any]]]:
    with capture_logs() as logs:
        yield logs


async def preview_until_drained(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str
) -> tuple[PreviewReport, list[MutableMapping[str, Any]]]:
    config = deleter_config(zk, s3, broker, verifier, mode="preview")
    with audit_lines() as logs:
        async with running_deleter(config) as running:
            status = await drained(running.deleter)
    assert status.preview is not None
    return status.preview, list(logs)


async def delete_until_drained(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str
) -> tuple[dict[str, int], list[MutableMapping[str, Any]]]:
    """Deletion enabled: setup in delete mode (the preview subscription goes), then the
    deleters run to the end of their backlog. Returns the dead letters by reason and the
    lines."""
    setup_topics(broker, preview=False)
    with audit_lines() as logs:
        async with running_e2e_deleter(zk, s3, broker, verifier) as running:
            await drained(running.deleter)

            async def every_dead_letter() -> dict[str, int]:
                status = await running.deleter.admin.status()
                assert status.preview is None
                assert sum(status.dead_letters_by_reason.values()) == sum(DEAD_LETTERS.values())
                return status.dead_letters_by_reason

            by_reason = await assert_eventually(every_dead_letter, timeout=20)
    return by_reason, list(logs)


async def test_a_preview_deletes_nothing_and_the_deleters_then_delete_what_it_said(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, workload: Workload
) -> None:
    """The preview verifies every PDLI and deletes nothing: every ledger znode and every
    object is still there, the deleters' subscription still holds every PDLI, and the
    preview's status accounts for each PDLI once. Then deletion is enabled: the preview
    subscription is removed, and the deleters delete exactly, one for one, the (ledger, tier)
    pairs the preview said they would, and dead-letter as many as it said."""
    before = await backlog(broker, DELETERS)
    assert before > 0
    report, preview_logs = await preview_until_drained(zk, s3, broker, workload.verifier)

    assert await ledgers_in_zookeeper(zk, workload.ledgers) == workload.ledgers
    assert objects_in_s3(s3) == workload.objects
    # The broker counts entries (the marker batches PDLIs): the deleters' backlog is as it was.
    assert await backlog(broker, DELETERS) == before
    assert report.deleter_backlog == before
    assert total(report) == workload.published
    would = verdicts(preview_logs, "preview_verdict", outcome="would_delete")
    assert sum(would.values()) == sum(report.would_delete.values()) > 0
    assert {tier for _, tier in would} == {"bookkeeper", "s3"}
    assert not [line for line in preview_logs if line.get("event") == "ledger_deleted"]
    assert await dead_letter_backlog(broker) == 0  # nothing sent there
    assert report.would_dead_letter == DEAD_LETTERS
    assert report.settled == {"in_use": 1, "not_found": 1}

    dead_letters, delete_logs = await delete_until_drained(zk, s3, broker, workload.verifier)

    assert PREVIEW not in broker.control.subscriptions(f"{SYSTEM}-partition-0")
    assert verdicts(delete_logs, "ledger_deleted") == would
    assert dead_letters == report.would_dead_letter
    gone = {ledger for ledger, tier in would if tier == "bookkeeper"}
    assert await ledgers_in_zookeeper(zk, workload.ledgers) == workload.ledgers - gone


class Stalling:
    """Backends whose would-deletes stall after the first `free` ones (the preview's own
    backends underneath: nothing is deleted either way)."""

    def __init__(self, backends: Backends, free: int) -> None:
        self.inner = backends
        self.free = free
        self.calls = 0
        self.stalled = 0
        self.gate = asyncio.Event()

    async def _pass(self) -> None:
        self.calls += 1
        if self.calls > self.free:
            self.stalled += 1
            await self.gate.wait()

    def wrap(self) -> Backends:
        stalling = self

        class Ledgers:
            async def delete_ledger(self, **kwargs: Any) -> DeleteResult:
                await stalling._pass()
                assert stalling.inner.bookkeeper is not None
                return await stalling.inner.bookkeeper.delete_ledger(**kwargs)

        class Offloads:
            async def delete_offloaded(
                self, *, ledger_id: int, evidence: _vf.OffloadEvidence
            ) -> DeleteResult:
                await stalling._pass()
                assert stalling.inner.s3 is not None
                return await stalling.inner.s3.delete_offloaded(
                    ledger_id=ledger_id, evidence=evidence
                )

        return Backends(bookkeeper=Ledgers(), s3=Offloads())


async def test_a_preview_that_stops_mid_way_loses_and_double_counts_nothing(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, workload: Workload
) -> None:
    """A first preview stops while several decisions are unsettled (its stop cancels them:
    never acknowledged, they are delivered again); a second one takes over. Each PDLI is
    counted by exactly one of them: the two statuses add up to every PDLI, no message is in
    both audit trails, and the would-deletes of both together are exactly what the deleters
    then delete."""
    stalling: Stalling | None = None

    def wrap(backends: Backends) -> Backends:
        nonlocal stalling
        stalling = Stalling(backends, free=3)
        return stalling.wrap()

    config = deleter_config(
        zk, s3, broker, workload.verifier, mode="preview", drain_timeout=timedelta(0)
    )
    with audit_lines() as first_logs:
        async with running_deleter(config, wrap_backends=wrap) as running:

            async def some_stalled() -> None:
                assert stalling is not None
                assert stalling.stalled >= 2

            await assert_eventually(some_stalled, timeout=60)
            tally = running.deleter.preview
    # Read once stopped: what was acknowledging as it stopped is counted, not cancelled.
    assert tally is not None
    first = tally.report()
    first_lines = list(first_logs)
    assert sum(first.would_delete.values()) <= 3

    second, second_lines = await preview_until_drained(zk, s3, broker, workload.verifier)

    assert total(first) + total(second) == workload.published
    first_ids = {line["message_id"] for line in first_lines if line["event"] == "preview_verdict"}
    second_ids = {line["message_id"] for line in second_lines if line["event"] == "preview_verdict"}
    assert len(first_ids) == total(first)
    assert len(second_ids) == total(second)
    assert first_ids.isdisjoint(second_ids)
    would = verdicts(first_lines, "preview_verdict", outcome="would_delete") + verdicts(
        second_lines, "preview_verdict", outcome="would_delete"
    )
    assert await ledgers_in_zookeeper(zk, workload.ledgers) == workload.ledgers
    assert objects_in_s3(s3) == workload.objects

    _, delete_logs = await delete_until_drained(zk, s3, broker, workload.verifier)
    assert verdicts(delete_logs, "ledger_deleted") == would


async def test_a_preview_without_its_subscription_refuses_to_start(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Topics set up for deleting only: the preview refuses to start, naming the subscription
    and `tombstone setup`, and creates no subscription of its own (subscribing would have made
    one at the latest position, missing what came before)."""
    setup_topics(broker, preview=False)
    async with ZkMetadataStore.connect(zk.address) as store:
        await World(store).bookkeeper_root()
    config = deleter_config(zk, s3, broker, "127.0.0.1:1", mode="preview")
    with pytest.raises(StartupRefused, match="preview subscription 'tombstone-preview'"):
        async with running_deleter(config):
            pass
    assert broker.control.subscriptions(f"{SYSTEM}-partition-0") == [DELETERS]


async def test_the_refusal_is_one_line_and_exit_2(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """`python -m services.deleter` in preview without the subscription: exit 2, one line
    that says what to run, no traceback."""
    setup_topics(broker, preview=False)
    async with ZkMetadataStore.connect(zk.address) as store:
        await World(store).bookkeeper_root()
    env = deleter_env(zk, s3, broker, "127.0.0.1:1", TOMBSTONE_DELETER_MODE="preview")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.deleter",
        cwd=ROOT,
        env={**inherited, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    refusals = [line for line in err.decode().splitlines() if line.startswith("deleter: ")]
    assert (process.returncode, len(refusals)) == (2, 1), err.decode()
    assert "preview subscription 'tombstone-preview' is missing" in refusals[0]
    assert "tombstone setup" in refusals[0]
    assert "Traceback" not in out.decode() + err.decode()


async def test_a_killed_preview_process_and_its_successor_miss_nothing(
    trimmed: Trimmed,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """`python -m services.deleter` in preview, killed (SIGKILL) as soon as it recorded a first
    verdict, then a second preview process: every PDLI has a verdict in one of the two audit
    trails, neither trail names a message twice, the successor's `tombstone deleter status`
    counts exactly its own lines, and nothing was deleted."""
    setup_topics(broker, preview=True)
    every = {led.ledger_id for led in trimmed.model.bookkeeper_ledgers()}
    present = await ledgers_in_zookeeper(zk, every)
    published = sum(len(ids) for ids in trimmed.marked.values())
    env = deleter_env(
        zk,
        s3,
        broker,
        trimmed.verifier,
        TOMBSTONE_DELETER_MODE="preview",
        TOMBSTONE_DELETER_RELEASE_DELAY="500ms",
    )
    first = await DeleterProcess.start(env, tmp_path / "first.log")
    try:
        await first.wait_for("preview_verdict", timeout=60)
        first.process.kill()
        await first.process.wait()
    finally:
        await first.stop()
    second = await DeleterProcess.start(env, tmp_path / "second.log")
    try:
        ready = await second.wait_for("service_ready")
        address = f"127.0.0.1:{ready['port']}"

        async def drained_preview() -> dict[str, Any]:
            code, out = await cli("deleter", "status", "--json", "--address", address)
            assert code == 0, out
            status: dict[str, Any] = json.loads(out)
            assert (status["mode"], status["estimated_in_flight"], status["in_process"]) == (
                "preview",
                0,
                0,
            )
            return status

        status = await assert_eventually(drained_preview, timeout=90, interval=0.5)
    finally:
        await second.stop()
    trails = [
        [e["message_id"] for e in p.events() if e.get("event") == "preview_verdict"]
        for p in (first, second)
    ]
    assert trails[0]
    assert all(len(trail) == len(set(trail)) for trail in trails)
    assert len(set(trails[0]) | set(trails[1])) == published
    preview = status["preview"]
    counted = sum(
        sum(int(v) for v in preview.get(key, {}).values())
        for key in ("would_delete", "settled", "would_dead_letter")
    )
    assert counted == len(trails[1])
    assert await ledgers_in_zookeeper(zk, every) == present
    assert objects_in_s3(s3) == trimmed.objects_before
