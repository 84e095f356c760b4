"""The outage gate: while ZooKeeper, S3 or the verifier is unreachable the deleter takes no work.

Spending the retry budget on an outage would move the whole backlog to the dead-letter topic
once the outage outlasts the budget, and releasing messages would count toward the client's
redelivery backstop. So a message that meets an outage is neither retried nor released: it
reports the dependency here and waits, held, until a probe finds the dependency back, then is
decided again from the start. The receive loops wait here too before taking a message.

One log line and one gauge change per transition; the gRPC health follows `wait_change`.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import structlog

from services.core.tasks import is_cancelled
from services.deleter.metrics import DeleterMetrics
from tombstone.v1 import verifier_pb2 as _vf

_log = structlog.get_logger(__name__)

Probe = Callable[[], Awaitable[object]]
"""A cheap call on the dependency; it returns when the dependency answers, raises otherwise."""


class Dependency(enum.StrEnum):
    """What can be out (the `dependency` label of `deleter_paused`)."""

    VERIFIER = "verifier"
    ZOOKEEPER = "zookeeper"
    S3 = "s3"


# The verifier names the dependency that did not answer at the start of a RETRY's reason
# (`unavailable_zookeeper: ...`). A bare `unavailable` (an answer that refused, such as a 403)
# is not an outage: it is retried like any RETRY, so that a misconfiguration cannot stall all.
_VERDICT_OUTAGES = {
    "unavailable_zookeeper": Dependency.ZOOKEEPER,
    "unavailable_s3": Dependency.S3,
}


def verdict_outage(verdict: _vf.VerifyResponse) -> Dependency | None:
    """The dependency a RETRY verdict blames, or None for any other verdict."""
    if verdict.decision != _vf.RETRY:
        return None
    code = verdict.reason.split(":", 1)[0].strip()
    return _VERDICT_OUTAGES.get(code)


@dataclass(frozen=True)
class GateSettings:
    probe_interval: timedelta = timedelta(seconds=2)
    """Time between two probes of a dependency that is out."""
    probe_timeout: timedelta = timedelta(seconds=5)
    """A probe that takes longer failed."""
    max_waits: int = 10
    """Outage waits of one delivery of a message before an outage verdict counts as an
    ordinary RETRY. A real outage costs a message one wait however long it lasts; only a
    dependency the deleter reaches and the verifier does not (the verifier's session not back
    yet, a 5xx on one object, a verifier slow for its own reasons) makes a message come back
    here repeatedly, and this bounds that."""


class OutageGate:
    def __init__(
        self,
        probes: Mapping[Dependency, Probe],
        *,
        metrics: DeleterMetrics,
        settings: GateSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`probes` checks each dependency; one without a probe is taken to be back after one
        probe interval (its messages then meet the outage again, up to `max_waits`)."""
        self._probes = dict(probes)
        self._metrics = metrics
        self.settings = settings or GateSettings()
        self._clock = clock
        self._out: dict[Dependency, float] = {}
        self._resumed_at: dict[Dependency, float] = {}
        self._open = asyncio.Event()
        self._open.set()
        self._changed = asyncio.Event()
        self._version = 0
        self._probing: dict[Dependency, asyncio.Task[None]] = {}
        for dependency in Dependency:
            metrics.paused.labels(dependency.value).set(0)

    @property
    def paused(self) -> frozenset[Dependency]:
        """The dependencies out now (empty: the gate is open)."""
        return frozenset(self._out)

    def now(self) -> float:
        """The gate's clock: what `report(..., since=)` compares with."""
        return self._clock()

    def report(self, dependency: Dependency, detail: str, *, since: float | None = None) -> None:
        """A message met an outage of `dependency`: pause (once) and probe until it is back.

        `since`: when the failed attempt began (`now()`). A probe that found the dependency
        back after that time already answered this report: the message is simply tried again,
        and a late answer from before the resume does not pause everything once more."""
        if dependency in self._out:
            return
        if since is not None and self._resumed_at.get(dependency, float("-inf")) > since:
            return
        self._out[dependency] = self._clock()
        self._metrics.paused.labels(dependency.value).set(1)
        _log.warning("deleter_paused", dependency=dependency.value, detail=detail)
        if len(self._out) == 1:
            self._open.clear()
            self._notify()
        self._probing[dependency] = asyncio.create_task(
            self._probe_until_back(dependency), name=f"probe:{dependency}"
        )

    async def wait_open(self) -> None:
        """Return at once when nothing is out, else when every dependency is back."""
        while not self._open.is_set():
            await self._open.wait()

    @property
    def version(self) -> int:
        """Counts the transitions between open and paused."""
        return self._version

    async def wait_change(self, seen: int) -> int:
        """Wait until `version` is no longer `seen` (no transition is missed); return it."""
        while self._version == seen:
            await self._changed.wait()
        return self._version

    async def aclose(self) -> None:
        tasks = list(self._probing.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _notify(self) -> None:
        self._version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _probe_until_back(self, dependency: Dependency) -> None:
        probe = self._probes.get(dependency)
        interval = self.settings.probe_interval.total_seconds()
        probes = 0
        while True:
            await asyncio.sleep(interval)
            probes += 1
            if probe is None or await self._answers(dependency, probe):
                break
        self._resume(dependency, probes)

    async def _answers(self, dependency: Dependency, probe: Probe) -> bool:
        try:
            await asyncio.wait_for(probe(), self.settings.probe_timeout.total_seconds())
        except BaseException as exc:
            if is_cancelled(exc) or not isinstance(exc, Exception):
                raise
            _log.debug("probe_failed", dependency=dependency.value, error=repr(exc))
            return False
        return True

    def _resume(self, dependency: Dependency, probes: int) -> None:
        since = self._out.pop(dependency)
        self._resumed_at[dependency] = self._clock()
        self._probing.pop(dependency, None)
        self._metrics.paused.labels(dependency.value).set(0)
        _log.warning(
            "deleter_resumed",
            dependency=dependency.value,
            paused_seconds=round(self._clock() - since, 3),
            probes=probes,
        )
        if not self._out:
            self._open.set()
            self._notify()


__all__ = ["Dependency", "GateSettings", "OutageGate", "Probe", "verdict_outage"]
