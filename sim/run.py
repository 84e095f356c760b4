"""Run one seed on a fresh virtual loop; the result is its trace and its violations."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import structlog

from sim.loop import VirtualLoop
from sim.mutants import applied
from sim.pulsar import BUCKET, FOREIGN_BUCKET
from sim.world import Violation, World


@dataclass(frozen=True)
class Result:
    seed: int
    violations: list[Violation]
    trace: list[str]

    def trace_bytes(self) -> bytes:
        return "\n".join(self.trace).encode()

    def report(self, events: int = 40) -> str:
        """Seed, invariants, and the last events before the first violation (a minimal
        trace: the full one replays with `make sim SEED=<seed>`)."""
        lines = [f"seed {self.seed}: {len(self.violations)} violation(s)"]
        for v in self.violations[:5]:
            lines.append(f"  {v.invariant}: {v.detail}")
        first = next((i for i, e in enumerate(self.trace) if "VIOLATION" in e), len(self.trace))
        lines.append(f"  trace (events {max(0, first - events)}..{first}):")
        lines += [f"    {e}" for e in self.trace[max(0, first - events) : first + 1]]
        return "\n".join(lines)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The services' log lines cost more than the simulation: drop them during a run."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        structlog.configure(**saved)


@contextlib.contextmanager
def _virtual_time(world: World) -> Iterator[None]:
    """The two wall-clock reads the services make without an injectable clock."""
    import services.marker.marking as marking
    import services.systopic.dead_letter as dead_letter

    saved = getattr(marking, "now_ms"), dead_letter._now_ms  # noqa: B009 - not re-exported
    setattr(marking, "now_ms", world.sched.now_ms)  # noqa: B010
    dead_letter._now_ms = world.sched.now_ms
    try:
        yield
    finally:
        setattr(marking, "now_ms", saved[0])  # noqa: B010
        dead_letter._now_ms = saved[1]


def run_seed(seed: int, mutant: str | None = None) -> Result:
    loop = VirtualLoop()
    try:
        with _quiet(), applied(mutant) as allow_all_buckets:
            buckets = frozenset({BUCKET, FOREIGN_BUCKET}) if allow_all_buckets else None
            world = World(seed, allowed_buckets=buckets or frozenset({BUCKET}))
            loop.set_task_factory(world.registry.factory)  # type: ignore[arg-type]
            asyncio.set_event_loop(loop)
            with _virtual_time(world):
                loop.run_until_complete(world.run())
                _cancel_rest(loop)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    return Result(seed, world.violations, world.sched.trace)


def _cancel_rest(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
