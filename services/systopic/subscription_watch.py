"""Is anyone there to keep what we publish? The deleters' durable subscription, checked on
every partition of the system topic through the admin API.

Without it (and without a retention policy), Pulsar keeps no intent published now for a
subscription created later: the ledger would already be unlinked and its intent gone, an
orphan with no record. So the marker and the follower publish only while the subscription is
known to exist (`GatedPublisher`); the marker reports NOT_SERVING and answers UNAVAILABLE
meanwhile.

Unknown is not present: when the admin API does not answer, the last known answer stands for
`unknown_grace` after the last successful check, then the subscription counts as missing.
At start there is no last answer: nothing is published until a check succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import structlog
from prometheus_client import Gauge

from services.core.errors import PermissionDenied, TombstoneError, Unavailable
from services.systopic.admin import PulsarAdmin, partition_names
from services.systopic.ports import IntentPublisher, OutgoingMessage, SendResult

_log = structlog.get_logger(__name__)

SETUP_HINT = "run `tombstone setup`"


@dataclass(frozen=True)
class WatchSettings:
    topic: str
    subscription: str
    partitions: int
    interval: timedelta = timedelta(seconds=30)
    """Time between two checks."""
    unknown_grace: timedelta = timedelta(minutes=2)
    """How long the last known answer stands while the admin API does not answer."""


class SubscriptionWatch:
    def __init__(
        self,
        admin: PulsarAdmin,
        settings: WatchSettings,
        *,
        gauge: Gauge | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admin = admin
        self._settings = settings
        self._gauge = gauge
        self._clock = clock
        self._present = False
        self._confirmed_at: float | None = None
        self.reason = f"the deleters' subscription was not checked yet; {SETUP_HINT}"
        """Why publishing is held (meaningful while not `ready`)."""
        self.version = 0
        self._changed = asyncio.Event()
        self._set_gauge()

    @property
    def ready(self) -> bool:
        return self._present

    def unready_reason(self) -> str | None:
        """None when publishing may go on; else the one-line reason."""
        return None if self._present else self.reason

    async def check(self) -> bool:
        """One check of every partition; returns whether publishing may go on."""
        try:
            lacking = await self._lacking()
        except TombstoneError as exc:
            self._unknown(exc)
        else:
            self._confirmed_at = self._clock()
            if lacking:
                where = ", ".join(lacking)
                self._set(
                    False,
                    f"the deleters' subscription {self._settings.subscription} is missing on "
                    f"{where}: what is published now would not be kept; {SETUP_HINT}",
                )
            else:
                self._set(True, "")
        return self._present

    async def _lacking(self) -> Sequence[str]:
        names = partition_names(self._settings.topic, self._settings.partitions)
        subscriptions = await asyncio.gather(*(self._admin.subscriptions(n) for n in names))
        return [
            name
            for name, found in zip(names, subscriptions, strict=True)
            if self._settings.subscription not in (found or [])
        ]

    def _unknown(self, exc: TombstoneError) -> None:
        grace = self._settings.unknown_grace.total_seconds()
        confirmed = self._confirmed_at
        if self._present and confirmed is not None and self._clock() - confirmed <= grace:
            _log.info("deleter_subscription_check_failed", error=str(exc), keeping="present")
            return
        kind = "unreachable" if isinstance(exc, Unavailable) else "refused the check"
        check = "TOMBSTONE_DELETER_PULSAR_ADMIN_URL"
        if isinstance(exc, PermissionDenied):
            check = "the credentials (TOMBSTONE_PULSAR_AUTH_PLUGIN and its settings)"
        self._set(
            False,
            f"cannot confirm the deleters' subscription {self._settings.subscription}: the "
            f"Pulsar admin API {kind} ({exc}); check {check}, then {SETUP_HINT}",
        )

    def _set(self, present: bool, reason: str) -> None:
        changed = present != self._present or (not present and reason != self.reason)
        self._present = present
        if reason:
            self.reason = reason
        if not changed:
            return
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()
        self._set_gauge()
        if present:
            _log.info("deleter_subscription_present", subscription=self._settings.subscription)
        else:
            _log.warning("publishing_held", reason=self.reason)

    def _set_gauge(self) -> None:
        if self._gauge is not None:
            self._gauge.set(0 if self._present else 1)

    async def wait_change(self, seen: int) -> int:
        """Return the version once it differs from `seen`."""
        while self.version == seen:
            await self._changed.wait()
        return self.version

    async def wait_ready(self) -> None:
        while not self._present:
            await self.wait_change(self.version)

    async def run(self, stopping: asyncio.Event) -> None:
        """Check every `interval` until `stopping` is set."""
        interval = self._settings.interval.total_seconds()
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval)
            if not stopping.is_set():
                await self.check()


class GatedPublisher:
    """An `IntentPublisher` that refuses (`Unavailable`, nothing accepted) while the watch
    says the deleters' subscription is missing: every path that publishes (a Mark, a late
    re-send, the follower) goes through it."""

    def __init__(self, inner: IntentPublisher, watch: SubscriptionWatch) -> None:
        self._inner = inner
        self._watch = watch

    @property
    def producer_name(self) -> str:
        return self._inner.producer_name

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        reason = self._watch.unready_reason()
        if reason is not None and messages:
            raise Unavailable(reason)
        return await self._inner.publish(messages)

    async def close(self) -> None:
        await self._inner.close()
