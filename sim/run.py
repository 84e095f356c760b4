"""Run one seed on a fresh virtual loop; the result is its trace and its violations."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

import structlog

from sim.follower import following
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
        focus = _ledger_of(self.violations[0].detail) if self.violations else None
        if focus is not None:
            # The events that name the ledger, plus crashes and the heal: usually a handful.
            marks = _ledger_marks(focus)
            shown = [
                e
                for e in self.trace[: first + 1]
                if any(m in e for m in marks) or " crash " in e or e.endswith(" heal")
            ]
            lines.append(f"  events naming ledger {focus}, crashes and the heal:")
        else:
            shown = self.trace[max(0, first - events) : first + 1]
            lines.append(f"  the last {len(shown)} events:")
        lines += [f"    {e}" for e in shown]
        return "\n".join(lines)


def _ledger_of(detail: str) -> int | None:
    found = re.search(r"ledger (\d+)|/L(\d{4,})\b|-ledger-(\d+)", detail)
    if found is None:
        return None
    return int(next(g for g in found.groups() if g is not None))


def _ledger_marks(ledger_id: int) -> tuple[str, ...]:
    return (
        f"/L{ledger_id:04d}",
        f"-ledger-{ledger_id}",
        f"key={ledger_id}",
        f"Verify {ledger_id}",
        f"verdict {ledger_id} ",
        f"({ledger_id},",
        f"({ledger_id},)",
        f" {ledger_id})",
        f"[{ledger_id},",
        f"[{ledger_id}]",
        f" {ledger_id}]",
        f" {ledger_id}->",
        f"->{ledger_id}:",
    )


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
            with _virtual_time(world), following(world.sched.now, world.sched.now_ms):
                loop.run_until_complete(world.run())
                _cancel_rest(loop)
    finally:
        loop.close()
    return Result(seed, world.violations, world.sched.trace)


def _cancel_rest(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
