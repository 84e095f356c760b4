"""The demo's broker-style part: beside the trims through the marker, part of the cluster is
unlinked the way unmodified brokers do it (`devstack.simulator.broker_run`: trims, cursor
switches and unsubscribes, a share of the brokers' own deletes failing), and the marker's
follower (`TOMBSTONE_MARKER_FOLLOW=true`) must turn each unlink into intents the deleter
completes. The final S1/L1 check covers these unlinks with the protocol's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

from devstack.demo_outcome import BOOKKEEPER, OFFLOAD, Unlinked, artifact, outcome
from devstack.demo_stores import DemoMetadata
from devstack.s3 import S3Locations
from devstack.simulator.broker import DeleteFaults
from devstack.simulator.broker_run import (
    SWITCH,
    TRIM,
    BrokerStylePlan,
    BrokerStyleResult,
    unlink_like_brokers,
)
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import ReadBack
from devstack.simulator.s3 import open_object_stores

FOLLOW_ENV = {"TOMBSTONE_MARKER_FOLLOW": "true"}
"""The marker's follower on: every unlink a broker makes becomes intents (source OBSERVED)."""
PREFIX = "broker-style"
Letters = Mapping[tuple[int, str], str]
Reader = Callable[[], Awaitable[tuple[ReadBack, Letters]]]


async def unlink(
    model: ClusterModel,
    plan: BrokerStylePlan,
    *,
    metadata: DemoMetadata,
    s3: S3Locations,
    faults: DeleteFaults,
) -> BrokerStyleResult:
    """Run the brokers' unlinks against the demo's cluster (no backoff between attempts:
    a failing delete fails every attempt anyway)."""
    async with (
        metadata.cluster(model.spec.ledgers_root) as store,
        open_object_stores(s3.client_config(), s3.routes()) as objects,
    ):
        return await unlink_like_brokers(model, plan, store=store, objects=objects, faults=faults)


def unlinked_items(model: ClusterModel, result: BrokerStyleResult) -> list[Unlinked]:
    """Each (ledger, tier) the brokers unlinked, named by artifact for the summary."""
    items = []
    for operation, done in result.outcomes:
        item = done.item
        tier = BOOKKEEPER if item.tier == BOOKKEEPER else OFFLOAD
        name = artifact(model, item.ledger_id, tier, cursor=operation != TRIM)
        if operation == SWITCH:
            name = name.replace("(asyncDeleteCursorLedger)", "(switchToNewLedger)")
        items.append(Unlinked(item.ledger_id, tier, f"{PREFIX} {name}", item.object_keys))
    return items


def summary_line(
    result: BrokerStyleResult,
    items: list[Unlinked],
    now: ReadBack,
    dead_letters: Letters,
) -> str:
    """`broker-style: <n> unlinked by brokers, <d> delete failures injected, <l> leaked`:
    leaked = unlinked and neither deleted nor dead-lettered with a reason (L1)."""
    leaked = sum(1 for item in items if outcome(item, now, dead_letters) == "kept")
    return (
        f"{PREFIX}: {result.unlinked} unlinked by brokers, {result.failures_injected} delete "
        f"failures injected, {leaked} leaked"
    )


def new_ledger_problems(result: BrokerStyleResult, now: ReadBack) -> list[str]:
    """S1 for the cursor ledgers the switches created: referenced, so never deleted."""
    return [
        f"S1: new cursor ledger {ledger_id} was deleted"
        for ledger_id in result.new_cursor_ledgers
        if ledger_id not in now.ledgers
    ]


async def wait_settled(
    items: list[Unlinked],
    read: Reader,
    *,
    timeout: float,
    poll: float = 1.0,
) -> bool:
    """Poll `read()` (a coroutine function returning (ReadBack, dead letters)) until every
    item is deleted or dead-lettered, or `timeout` passes; True when settled. The follower's
    intents reach the deleter after the brokers' writes, so the deleter's backlog alone
    does not say they were all handled."""
    deadline = time.monotonic() + timeout
    while True:
        now, letters = await read()
        if all(outcome(item, now, letters) != "kept" for item in items):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll)
