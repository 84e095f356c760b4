"""What must exist before anything publishes to the system topic, made to exist (or checked).

On Pulsar, entries that no durable subscription holds and no retention policy keeps may be
trimmed at any moment, and `brokerDeleteInactiveTopicsEnabled` (on by default) may delete a
topic with no subscription. An intent published then is lost for a subscription created
later, and its ledger is already unlinked: an orphan with no record (docs/design.md §3, L1).
So, for the system, retry and dead-letter topics, through the admin API's `PersistentTopics`
resource:

1. the partitioned topic, with `TOMBSTONE_PULSAR_TOPIC_PARTITIONS` partitions
   (`createPartitionedTopic`); an existing topic with another count is an error naming both
   counts, never changed here (fewer partitions would strand messages; more change routing);
2. the deleters' subscription on the system and retry topics, the dead-letter subscription on
   the DLQ topic, at the earliest position, on every partition (`createSubscription`);
3. a topic-level retention policy (`setRetention`), so intents are kept even while no
   subscription exists (an operator dropped it, or a new one is being made);
4. a topic-level inactive-topic policy with `deleteWhileInactive=false`
   (`setInactiveTopicPolicies`), so an idle topic is never deleted with its policies;
5. while the deleters are a preview (`TOMBSTONE_DELETER_MODE=preview`), the preview
   subscription on the system and retry topics, at the earliest position on every partition,
   so the preview sees everything the deleters will; once they delete, its removal
   (`deleteSubscription`): a subscription nobody reads keeps its backlog forever. A preview
   deleter still connected makes the broker refuse the removal: stop the previews first.

Every step is idempotent; each reports one `Step`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from services.core.config import (
    ADMIN_URL,
    DELETER_MODE,
    DLQ_SUBSCRIPTION,
    PREVIEW_SUBSCRIPTION,
    SUBSCRIPTION,
    PulsarConfig,
    PulsarSecurity,
)
from services.core.errors import ConfigError, FailedPrecondition
from services.systopic.admin import PulsarAdmin, partition_names
from services.systopic.admin_auth import secured_admin

INFINITE = -1
"""Pulsar's value for "no limit" in `RetentionPolicies`."""
INACTIVE_DEFAULTS: Mapping[str, Any] = {
    "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
    "maxInactiveDurationSeconds": 60,
}
"""Pulsar's broker defaults, used when a topic has no inactive-topic policy of its own yet:
with `deleteWhileInactive=false` they never act."""


class Outcome(enum.StrEnum):
    CREATED = "created"
    PRESENT = "already there"
    CHANGED = "changed"
    MISSING = "missing"
    """`--check` only: the item is not there."""
    WRONG = "wrong"
    """The item exists in a form setup will not change (a partition count)."""
    REMOVED = "removed"
    """The preview subscription, once the deleters delete."""
    LEFTOVER = "leftover"
    """`--check` only: the preview subscription is there but the deleters delete."""


@dataclass(frozen=True)
class Step:
    outcome: Outcome
    item: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome not in (Outcome.MISSING, Outcome.WRONG, Outcome.LEFTOVER)

    def line(self) -> str:
        return f"{self.outcome}: {self.item}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class SetupPlan:
    """The topics, their subscriptions and the retention to set."""

    pulsar: PulsarConfig
    admin_url: str
    subscription: str
    dlq_subscription: str
    retention_minutes: int = INFINITE
    retention_size_mb: int = INFINITE
    preview: bool = False
    """The deleters are a preview: their preview subscription must exist (else must not)."""
    preview_subscription: str = PREVIEW_SUBSCRIPTION.default

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] = os.environ,
        *,
        retention_minutes: int = INFINITE,
        retention_size_mb: int = INFINITE,
    ) -> SetupPlan:
        preview_subscription = PREVIEW_SUBSCRIPTION.read(environ)
        if preview_subscription in (SUBSCRIPTION.read(environ), DLQ_SUBSCRIPTION.read(environ)):
            # Removing it once the preview is over would remove the deleters' own.
            raise ConfigError(PREVIEW_SUBSCRIPTION.name, "must differ from the deleters' names")
        return cls(
            pulsar=PulsarConfig.from_env(environ),
            admin_url=ADMIN_URL.read(environ),
            subscription=SUBSCRIPTION.read(environ),
            dlq_subscription=DLQ_SUBSCRIPTION.read(environ),
            retention_minutes=retention_minutes,
            retention_size_mb=retention_size_mb,
            preview=DELETER_MODE.read(environ) == "preview",
            preview_subscription=preview_subscription,
        )

    @classmethod
    def for_topic(
        cls,
        admin_url: str,
        topic: str,
        partitions: int,
        *,
        preview: bool = False,
        security: PulsarSecurity | None = None,
    ) -> SetupPlan:
        """The default subscriptions on `topic`, `topic-RETRY` and `topic-DLQ`."""
        pulsar = PulsarConfig(
            topic=topic,
            retry_topic=f"{topic}-RETRY",
            dlq_topic=f"{topic}-DLQ",
            partitions=partitions,
            security=security or PulsarSecurity(),
        )
        return cls(
            pulsar=pulsar,
            admin_url=admin_url,
            subscription=SUBSCRIPTION.default,
            dlq_subscription=DLQ_SUBSCRIPTION.default,
            preview=preview,
        )

    def topics(self) -> list[tuple[str, str]]:
        """(topic, subscription) pairs: the deleters read the system and retry topics; the
        dead letters wait in their own subscription."""
        pulsar = self.pulsar
        return [
            (pulsar.topic, self.subscription),
            (pulsar.retry_topic, self.subscription),
            (pulsar.dlq_topic, self.dlq_subscription),
        ]

    def previewed(self) -> list[str]:
        """The topics a preview reads, as the deleters do: the system and retry topics."""
        return [self.pulsar.topic, self.pulsar.retry_topic]

    @property
    def retention(self) -> dict[str, int]:
        return {
            "retentionTimeInMinutes": self.retention_minutes,
            "retentionSizeInMB": self.retention_size_mb,
        }


def keeps_entries(retention: Mapping[str, Any] | None) -> bool:
    """A retention policy under which entries outlive the subscriptions (0/0 keeps nothing)."""
    if not retention:
        return False
    return bool(retention.get("retentionTimeInMinutes")) or bool(retention.get("retentionSizeInMB"))


def _shown(retention: Mapping[str, Any] | None) -> str:
    if not retention:
        return "none"
    minutes = retention.get("retentionTimeInMinutes")
    size = retention.get("retentionSizeInMB")
    return f"{'infinite' if minutes == INFINITE else f'{minutes} min'}, " + (
        "infinite" if size == INFINITE else f"{size} MB"
    )


class TopicSetup:
    """Runs (or, with `check`, only verifies) the steps of one plan, reporting each."""

    def __init__(
        self, admin: PulsarAdmin, plan: SetupPlan, *, check: bool, report: Callable[[Step], None]
    ) -> None:
        self._admin = admin
        self._plan = plan
        self._check = check
        self._report = report
        self.steps: list[Step] = []

    def _step(self, outcome: Outcome, item: str, detail: str = "") -> Step:
        step = Step(outcome, item, detail)
        self.steps.append(step)
        self._report(step)
        return step

    async def run(self) -> bool:
        """True when every item is (now) as it should be."""
        for topic, subscription in self._plan.topics():
            step = await self._partitions(topic)
            previewed = topic in self._plan.previewed()
            if step.outcome == Outcome.MISSING:
                # --check: what hangs on the topic is missing with it, one line each.
                items = [
                    f"subscription {subscription} on {topic}",
                    f"retention of {topic}",
                    f"inactive-topic policy of {topic}",
                ]
                if previewed and self._plan.preview:
                    items.append(f"subscription {self._plan.preview_subscription} on {topic}")
                for item in items:
                    self._step(Outcome.MISSING, item, "no topic")
            if not step.ok:
                continue  # nothing more to do on a topic that is missing or not ours to change
            await self._subscription(topic, subscription)
            if previewed:
                await self._preview(topic)
            await self._retention(topic)
            await self._inactive(topic)
        return all(step.ok for step in self.steps)

    async def _preview(self, topic: str) -> Step | None:
        """The preview subscription while the deleters are a preview, else none: made like
        the deleters' own (earliest position, every partition), removed once it is over."""
        name = self._plan.preview_subscription
        if self._plan.preview:
            return await self._subscription(topic, name)
        names = partition_names(topic, self._plan.pulsar.partitions)
        holding = [p for p in names if name in (await self._admin.subscriptions(p) or [])]
        if not holding:
            return None  # the usual case: no preview, nothing to say
        item = f"subscription {name} on {topic}"
        where = _partitions_named(topic, holding, len(names))
        if self._check:
            return self._step(
                Outcome.LEFTOVER,
                item,
                f"{where}; TOMBSTONE_DELETER_MODE is delete, so `tombstone setup` removes it",
            )
        for partition in holding:
            try:
                await self._admin.delete_subscription(partition, name)
            except FailedPrecondition as exc:
                return self._step(
                    Outcome.WRONG, item, f"preview deleters still read it; stop them first ({exc})"
                )
        return self._step(Outcome.REMOVED, item, f"the preview is over; {where}")

    async def _partitions(self, topic: str) -> Step:
        want = self._plan.pulsar.partitions
        found = await self._admin.partitions(topic)
        item = f"topic {topic}"
        shape = f"{want} partitions" if want else "not partitioned"
        if found == want and want > 0:
            return self._step(Outcome.PRESENT, item, shape)
        if found > 0:
            return self._step(
                Outcome.WRONG,
                item,
                f"it has {found} partitions but TOMBSTONE_PULSAR_TOPIC_PARTITIONS is {want}; "
                "setup never changes a partition count",
            )
        # Pulsar answers 0 for an absent topic and for a non-partitioned one alike.
        exists = await self._admin.subscriptions(topic) is not None
        if want == 0 and exists:
            return self._step(Outcome.PRESENT, item, shape)
        if exists:
            return self._step(
                Outcome.WRONG,
                item,
                "it exists as a non-partitioned topic (0 partitions) but "
                f"TOMBSTONE_PULSAR_TOPIC_PARTITIONS is {want}",
            )
        if self._check:
            return self._step(Outcome.MISSING, item, shape)
        if want > 0:
            await self._admin.create_partitioned_topic(topic, want)
        else:
            await self._admin.create_topic(topic)
        return self._step(Outcome.CREATED, item, shape)

    async def _subscription(self, topic: str, subscription: str) -> Step:
        """On every partition: a partition without it would drop what is routed there."""
        names = partition_names(topic, self._plan.pulsar.partitions)
        lacking = []
        for name in names:
            subscriptions = await self._admin.subscriptions(name)
            if subscription not in (subscriptions or []):
                lacking.append(name)
        item = f"subscription {subscription} on {topic}"
        if not lacking:
            return self._step(Outcome.PRESENT, item)
        where = _partitions_named(topic, lacking, len(names))
        if self._check:
            return self._step(Outcome.MISSING, item, where)
        for name in lacking:
            await self._admin.create_subscription(name, subscription)  # 409: made meanwhile
        return self._step(Outcome.CREATED, item, f"earliest position; {where}")

    async def _retention(self, topic: str) -> Step:
        current = await self._admin.retention(topic)
        want = self._plan.retention
        item = f"retention of {topic}"
        if current is not None and all(current.get(k) == v for k, v in want.items()):
            return self._step(Outcome.PRESENT, item, _shown(current))
        if self._check:
            if keeps_entries(current):
                return self._step(Outcome.PRESENT, item, _shown(current))
            return self._step(Outcome.MISSING, item, f"{_shown(current)}: not kept")
        await self._admin.set_retention(
            topic, minutes=self._plan.retention_minutes, size_mb=self._plan.retention_size_mb
        )
        if current is None:
            return self._step(Outcome.CREATED, item, _shown(want))
        return self._step(Outcome.CHANGED, item, f"{_shown(current)} -> {_shown(want)}")

    async def _inactive(self, topic: str) -> Step:
        current = await self._admin.inactive_topic_policies(topic)
        item = f"inactive-topic policy of {topic}"
        if current is not None and current.get("deleteWhileInactive") is False:
            return self._step(Outcome.PRESENT, item, "deleteWhileInactive=false")
        if self._check:
            shown = "not set" if current is None else "deleteWhileInactive=true"
            return self._step(Outcome.MISSING, item, shown)
        policies = {**INACTIVE_DEFAULTS, **(current or {}), "deleteWhileInactive": False}
        await self._admin.set_inactive_topic_policies(topic, policies)
        outcome = Outcome.CREATED if current is None else Outcome.CHANGED
        return self._step(outcome, item, "deleteWhileInactive=false")


def _partitions_named(topic: str, lacking: list[str], total: int) -> str:
    if lacking == [topic]:
        return "the topic"
    if len(lacking) == total:
        return f"all {total} partitions"
    indexes = ", ".join(name.rsplit("-partition-", 1)[-1] for name in lacking)
    return f"partitions {indexes} of {total}"


def prepare_topics(plan: SetupPlan) -> list[Step]:
    """`tombstone setup` from synchronous code (test stacks, benchmarks, the demo), on a loop
    of its own in a worker thread so that it also works under a running loop. Raises
    `RuntimeError` naming the first item that is not in place."""

    async def go() -> list[Step]:
        async with aiohttp.ClientSession() as http:
            admin = secured_admin(http, plan.admin_url, plan.pulsar.security)
            runner = TopicSetup(admin, plan, check=False, report=lambda _step: None)
            await runner.run()
            return runner.steps

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        steps = pool.submit(asyncio.run, go()).result()
    for step in steps:
        if not step.ok:
            raise RuntimeError(f"tombstone setup: {step.line()}")
    return steps
