"""The final check, read from the real ZooKeeper and S3.

S1: every ledger a load-test ML still lists exists — its BookKeeper znode (unless its offload
context says `bookkeeperDeleted`) and both offloaded objects (when it has an offload uuid).
L1: every (ledger, tier) the marker (or, in broker-style runs, a broker) unlinked is gone — the
znode from ZooKeeper, both objects from S3. Each one that remains is a leak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import Workload, object_keys
from services.core.errors import NotFound
from tombstone.v1 import pending_delete_pb2 as _pd


@dataclass
class CheckResult:
    listed_checked: int = 0
    unlinked_checked: int = 0
    s1_violations: list[str] = field(default_factory=list)
    l1_remaining: list[str] = field(default_factory=list)
    leaked: set[tuple[int, int]] = field(default_factory=set)
    """(ledger id, tier) pairs that were unlinked and remain (in any part)."""

    @property
    def passed(self) -> bool:
        return not self.s1_violations and not self.l1_remaining


async def _object_exists(tracker: Tracker, key: str) -> bool:
    try:
        await tracker.objects.head_metadata(bucket=tracker.bucket, key=key)
    except NotFound:
        return False
    return True


async def check_s1(workload: Workload, tracker: Tracker, result: CheckResult) -> None:
    for topic in workload.topics:
        info = (await workload.mls.read(topic.ml_name)).value
        for entry in info.ledgerInfo:
            result.listed_checked += 1
            ledger_id, context = entry.ledgerId, entry.offloadContext
            if not context.bookkeeperDeleted:
                path = tracker.paths.ledger_path(ledger_id)
                if await tracker.store.exists(path) is None:
                    result.s1_violations.append(f"listed ledger {ledger_id} missing: {path}")
            if context.HasField("uidMsb"):
                for key in object_keys(ledger_id, context):
                    if not await _object_exists(tracker, key):
                        result.s1_violations.append(f"listed ledger {ledger_id} missing: {key}")


async def check_l1(tracker: Tracker, result: CheckResult) -> None:
    for marked in tracker.marked:
        result.unlinked_checked += 1
        if marked.tier == _pd.LEDGER:
            path = tracker.paths.ledger_path(marked.ledger_id)
            if await tracker.store.exists(path) is not None:
                result.l1_remaining.append(f"unlinked ledger {marked.ledger_id} remains: {path}")
                result.leaked.add((marked.ledger_id, marked.tier))
            continue
        for key in marked.object_keys:
            if await _object_exists(tracker, key):
                result.l1_remaining.append(f"unlinked ledger {marked.ledger_id} remains: {key}")
                result.leaked.add((marked.ledger_id, marked.tier))


async def final_check(workload: Workload, tracker: Tracker) -> CheckResult:
    """S1 over every listed ledger, then L1 over every unlinked one."""
    result = CheckResult()
    await check_s1(workload, tracker, result)
    await check_l1(tracker, result)
    return result


def undone_work(workload: Workload, tracker: Tracker) -> list[str]:
    """Why the run did less than it was asked, if it did: its figures would describe a
    smaller or different load (and S1/L1 would have been checked over less)."""
    reasons = []
    if workload.stats.errors:
        reasons.append(f"{len(workload.stats.errors)} workload errors, the first: "
                       f"{workload.stats.errors[0]}")  # fmt: skip
    if not workload.stats.ledgers_created:
        reasons.append("no ledger was created")
    if not tracker.marked:
        reasons.append("no ledger was unlinked, so none was checked for deletion")
    return reasons


def exit_code(check: CheckResult, drained: bool) -> int:
    """0 only when S1 held, nothing unlinked remains (L1: no leak) and the backlog drained."""
    return 0 if check.passed and not check.leaked and drained else 1
