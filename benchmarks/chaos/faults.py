"""The faults of one run: a seeded plan (what, when) and how each is done to the real
processes. Every fault heals by itself (a killed service is restarted, an outage ends) so a
run ends with a whole stack; `heal()` makes sure of it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import signal
import time
from dataclasses import dataclass, field

from benchmarks.chaos.intruder import Intruder
from benchmarks.chaos.stack import DELETERS, SESSION_TIMEOUT_S, ChaosStack

KINDS = (
    "kill_marker",
    "kill_verifier",
    "kill_deleter",
    "broker_restart",
    "zk_restart",
    "zk_expire",
    "s3_errors",
    "s3_slow",
    "duplicate",
    "forged",
    "garbage",
)
FAULT_EVERY_S = 6.0
"""One fault per this many seconds of workload, on average."""


@dataclass(frozen=True)
class Fault:
    at: float
    """Seconds after the workload starts."""
    kind: str
    pause: float
    """How long the fault lasts (a process down, an outage), in seconds."""
    seed: int
    """For the fault's own choices (which deleter, which messages)."""


def plan(rng: random.Random, duration: float) -> list[Fault]:
    """Faults at uniform moments in the first 90 % of the workload, kinds uniform."""
    count = max(1, round(duration / FAULT_EVERY_S))
    faults = [
        Fault(
            at=rng.uniform(1.0, max(1.5, duration * 0.9)),
            kind=rng.choice(KINDS),
            pause=rng.uniform(0.2, 3.0),
            seed=rng.getrandbits(32),
        )
        for _ in range(count)
    ]
    return sorted(faults, key=lambda f: f.at)


@dataclass
class FaultLog:
    done: collections.Counter[str] = field(default_factory=collections.Counter)
    errors: list[str] = field(default_factory=list)
    """A fault that could not be done (e.g. the broker unreachable for a forgery)."""
    restarted: collections.Counter[str] = field(default_factory=collections.Counter)
    """Services found dead (not by a kill of ours) and started again."""


class Injector:
    def __init__(self, stack: ChaosStack, intruder: Intruder, targets: list[int]) -> None:
        self.stack = stack
        self.intruder = intruder
        self.targets = targets
        """Ledger ids forgeries name (planted foreign ones; listed ones are added live)."""
        self.listed: list[int] = []
        self.log = FaultLog()
        self.lifecycle = asyncio.Lock()
        """Held while a service is being killed and restarted, so the watchdog waits."""

    async def run(self, faults: list[Fault], started: float) -> None:
        """Each fault at its moment; one at a time (a fault's pause delays the next)."""
        for fault in faults:
            delay = started + fault.at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                await self.do(fault)
                self.log.done[fault.kind] += 1
            except Exception as exc:  # a fault that failed to happen is reported, not fatal
                self.log.errors.append(f"{fault.kind}: {type(exc).__name__}: {exc}")

    async def do(self, fault: Fault) -> None:
        rng = random.Random(fault.seed)
        stack = self.stack
        match fault.kind:
            case "kill_marker" | "kill_verifier" | "kill_deleter":
                name = fault.kind.removeprefix("kill_")
                name = rng.choice(DELETERS) if name == "deleter" else name
                service = stack.services[name]
                async with self.lifecycle:
                    await service.stop(signal.SIGKILL)
                    await asyncio.sleep(fault.pause)
                    await service.start()
            case "broker_restart":
                await asyncio.to_thread(stack.broker.restart, kill=rng.random() < 0.5)
            case "zk_restart":
                await asyncio.to_thread(stack.zookeeper.stop)
                await asyncio.sleep(fault.pause)
                await asyncio.to_thread(stack.zookeeper.start)
            case "zk_expire":
                # Longer than the session timeout: the services' sessions expire.
                stack.zk_proxy.cut(SESSION_TIMEOUT_S + 1.5 + fault.pause)
                await asyncio.sleep(SESSION_TIMEOUT_S + 1.5 + fault.pause)
            case "s3_errors":
                status, code = rng.choice([(503, "SlowDown"), (500, "InternalError")])
                stack.s3_proxy.fail(seconds=2.0 + fault.pause, status=status, code=code)
                await asyncio.sleep(2.0 + fault.pause)
                stack.s3_proxy.clear()
            case "s3_slow":
                stack.s3_proxy.slow(rng.uniform(0.5, 3.0), seconds=2.0 + fault.pause)
                await asyncio.sleep(2.0 + fault.pause)
            case "duplicate":
                await asyncio.to_thread(self.intruder.duplicates, rng, rng.randint(1, 20))
            case "forged":
                targets = self.targets + self.listed
                await asyncio.to_thread(self.intruder.forgeries, rng, targets, rng.randint(1, 10))
            case "garbage":
                await asyncio.to_thread(self.intruder.garbage, rng, rng.randint(1, 10))
            case _:
                raise ValueError(f"unknown fault {fault.kind}")

    async def watchdog(self, stop: asyncio.Event) -> None:
        """Start again any service that exited by itself (e.g. after its session expired),
        as a supervisor would."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)
            async with self.lifecycle:
                try:
                    for name in await self.stack.ensure_running():
                        self.log.restarted[name] += 1
                except Exception as exc:
                    self.log.errors.append(f"watchdog: {type(exc).__name__}: {exc}")

    async def heal(self) -> None:
        """Every fault off, every part up."""
        self.stack.s3_proxy.clear()
        self.stack.zk_proxy.restore()
        if not self.stack.zookeeper.running:
            await asyncio.to_thread(self.stack.zookeeper.start)
        if not self.stack.broker.running:
            await asyncio.to_thread(self.stack.broker.start)
        for name in await self.stack.ensure_running():
            self.log.restarted[name] += 1
