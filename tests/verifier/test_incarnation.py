"""A ledger id given again is never deleted on the old ledger's intent (`incarnation.py`).

The decision runs on in-memory ports: the situations are about stamps, which the fakes set
exactly. The same situation on the devstack Oxia server, with ids drawn as Pulsar draws them
there, is `tests/verifier/test_reused_ids_oxia.py`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.metadata.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from services.metadata.paths import LAYOUT_ZNODE, LedgerLayout, LedgerPaths, layout_text
from services.metadata.pulsar_formats import ManagedLedgerInfo, encode_managed_ledger_info
from services.metadata.pulsar_names import managed_ledger_path
from services.verifier.decision import DecisionEngine, DecisionPolicy
from services.verifier.incarnation import other_incarnation
from services.verifier.model import Decision, SkipReason, Target, Tier, Verdict
from services.verifier.offload import OffloadInspector, OffloadPolicy
from services.verifier.owners import OwnerCache
from services.verifier.validation import parse_target
from tests.verifier.memory import MemoryObjects, MemoryZnodes, NothingBelieved
from tests.verifier.world import ML, data_meta, pdli
from tombstone.v1 import pending_delete_pb2 as pb

PATHS = LedgerPaths()
MARKED_AT = 1_800_000_000_000
"""When the intent was recorded (the marker's clock), ms."""
REUSED = 5
"""The id given again: below the lowest ledger the owner lists (11), as ids that start again
from 1 after a migration are."""


class Believing:
    """A believed set holding every key: the marker reported the old ledger as unlinked."""

    def __contains__(self, key: int) -> bool:
        return True

    async def refresh(self) -> None:
        return None


def ledger_bytes(state: LedgerState, ctime: int | None) -> bytes:
    return encode_ledger_metadata(
        LedgerMetadata(
            ledger_id=REUSED,
            ensemble_size=1,
            write_quorum=1,
            ack_quorum=1,
            state=state,
            length=10 if state is LedgerState.CLOSED else 0,
            last_entry_id=0 if state is LedgerState.CLOSED else -1,
            custom_metadata=data_meta(ML),
            ctime=ctime,
        )
    )


def cluster(*, node_ctime: int, metadata_ctime: int | None, state: LedgerState) -> MemoryZnodes:
    """The owner lists ledgers 11 and 12; the ledger at id 5 is of the same owner (its custom
    metadata names the ML, as `ManagedLedgerImpl` writes it for every ledger it creates)."""
    znodes = MemoryZnodes()
    znodes.put(f"{PATHS.root}/{LAYOUT_ZNODE}", layout_text(LedgerLayout.HIERARCHICAL))
    info = ManagedLedgerInfo()
    for listed in (11, 12):
        info.ledgerInfo.add(ledgerId=listed, entries=1, size=10, timestamp=1)
    znodes.put(managed_ledger_path(ML), encode_managed_ledger_info(info), version=7)
    znodes.put(PATHS.ledger_path(REUSED), ledger_bytes(state, metadata_ctime), ctime_ms=node_ctime)
    return znodes


def engine(
    znodes: MemoryZnodes, *, believed: bool = True, allowance: timedelta = timedelta(0)
) -> DecisionEngine:
    return DecisionEngine(
        store=znodes,
        owners=OwnerCache(znodes),
        believed=Believing() if believed else NothingBelieved(),
        offload=OffloadInspector(MemoryObjects(), OffloadPolicy()),
        policy=DecisionPolicy(incarnation_allowance=allowance),
        clock=lambda: (MARKED_AT + 60_000) / 1000,
    )


def intent(marked_at: int = MARKED_AT) -> pb.PendingDeleteLedgerInfo:
    message = pdli(REUSED, fence=8)
    message.marked_at_ms = marked_at
    return message


async def verdict(
    znodes: MemoryZnodes, message: pb.PendingDeleteLedgerInfo, **kw: object
) -> Verdict:
    return await engine(znodes, **kw).verify(message)  # type: ignore[arg-type]


def assert_other_incarnation(got: Verdict) -> None:
    assert (got.decision, got.skip_reason, got.code) == (
        Decision.SKIP,
        SkipReason.MISMATCH,
        "other_incarnation",
    ), got


@pytest.mark.parametrize("state", [LedgerState.OPEN, LedgerState.CLOSED])
async def test_a_ledger_created_after_the_intent_is_not_deleted(state: LedgerState) -> None:
    """The owner's ledger in creation (OPEN, below its lowest reference: the OPEN rule would
    take it as long unlinked) or closed, created after the intent, believed unlinked: MISMATCH."""
    znodes = cluster(node_ctime=MARKED_AT + 1, metadata_ctime=None, state=state)
    assert_other_incarnation(await verdict(znodes, intent()))
    assert_other_incarnation(await verdict(znodes, intent(), believed=False))


@pytest.mark.parametrize("state", [LedgerState.OPEN, LedgerState.CLOSED])
async def test_the_ledger_the_intent_names_is_still_deleted(state: LedgerState) -> None:
    """The same situation with the ledger created before the intent (the same millisecond
    included): DELETE, as before."""
    for created in (MARKED_AT - 86_400_000, MARKED_AT):
        znodes = cluster(node_ctime=created, metadata_ctime=None, state=state)
        got = await verdict(znodes, intent())
        assert got.decision is Decision.DELETE, got


async def test_the_metadata_ctime_is_the_creation_time_when_stored() -> None:
    """A record PIP-454 copied carries the copy's time; the ledger metadata's own `ctime`
    (`LedgerCreateOp`, `storeSystemtimeAsLedgerCreationTime`) is kept by the copy and wins,
    in both directions."""
    copied = cluster(
        node_ctime=MARKED_AT + 3_600_000, metadata_ctime=MARKED_AT - 1, state=LedgerState.CLOSED
    )
    assert (await verdict(copied, intent())).decision is Decision.DELETE
    later = cluster(
        node_ctime=MARKED_AT - 1, metadata_ctime=MARKED_AT + 1, state=LedgerState.CLOSED
    )
    assert_other_incarnation(await verdict(later, intent()))


async def test_a_copied_record_without_a_metadata_ctime_is_refused() -> None:
    """Without a stored `ctime` the store's creation time is all there is: a record copied
    after the intent was recorded is refused (dead-lettered), never deleted."""
    znodes = cluster(
        node_ctime=MARKED_AT + 3_600_000, metadata_ctime=None, state=LedgerState.CLOSED
    )
    assert_other_incarnation(await verdict(znodes, intent(), believed=False))


async def test_the_allowance_covers_a_store_clock_behind_the_marker_s() -> None:
    znodes = cluster(node_ctime=MARKED_AT - 500, metadata_ctime=None, state=LedgerState.CLOSED)
    assert (await verdict(znodes, intent())).decision is Decision.DELETE
    assert_other_incarnation(await verdict(znodes, intent(), allowance=timedelta(seconds=1)))


async def test_an_intent_without_a_stamp_is_not_checked() -> None:
    """`marked_at_ms` 0: nothing to compare (the marker always stamps its intents)."""
    znodes = cluster(node_ctime=MARKED_AT, metadata_ctime=None, state=LedgerState.CLOSED)
    assert (await verdict(znodes, intent(marked_at=0))).decision is Decision.DELETE


def test_the_rule_alone() -> None:
    target = parse_target(intent())
    assert isinstance(target, Target)
    assert target.tier is Tier.BOOKKEEPER
    assert other_incarnation(target, created_ms=MARKED_AT, allowance_ms=0) is None
    refused = other_incarnation(target, created_ms=MARKED_AT + 1, allowance_ms=0)
    assert refused is not None
    assert refused.differences[0].field == "created_ms"
    assert other_incarnation(target, created_ms=MARKED_AT - 10, allowance_ms=10) is None
    assert other_incarnation(target, created_ms=MARKED_AT - 9, allowance_ms=10) is not None


SEEN_AT = MARKED_AT - 30_000
"""When the follower read the last owner version listing the ledger: before it recorded the
intent, as a follower that lagged behind the unlink does."""


def seen_intent(seen_at: int = SEEN_AT, marked_at: int = MARKED_AT) -> pb.PendingDeleteLedgerInfo:
    message = intent(marked_at)
    message.source = pb.OBSERVED
    message.seen_at_ms = seen_at
    return message


@pytest.mark.parametrize("state", [LedgerState.OPEN, LedgerState.CLOSED])
async def test_a_ledger_created_between_seen_at_and_marked_at_is_not_deleted(
    state: LedgerState,
) -> None:
    """The follower's known limit, closed: the id was given again after the follower last
    saw the old ledger listed and before it recorded the intent. `marked_at_ms` alone would
    pass the new ledger; `seen_at_ms` refuses it, believed or not."""
    created = SEEN_AT + 1_000
    znodes = cluster(node_ctime=created, metadata_ctime=None, state=state)
    assert (await verdict(znodes, intent())).decision is Decision.DELETE  # the stamp alone
    assert_other_incarnation(await verdict(znodes, seen_intent()))
    assert_other_incarnation(await verdict(znodes, seen_intent(), believed=False))


async def test_the_ledger_seen_is_still_deleted() -> None:
    """A ledger created before (or at) `seen_at_ms` is the one the sender saw."""
    znodes = cluster(node_ctime=SEEN_AT, metadata_ctime=None, state=LedgerState.CLOSED)
    assert (await verdict(znodes, seen_intent())).decision is Decision.DELETE


async def test_the_allowance_applies_to_seen_at() -> None:
    """The clock allowance is taken off `seen_at_ms` as off `marked_at_ms`."""
    znodes = cluster(node_ctime=SEEN_AT - 500, metadata_ctime=None, state=LedgerState.CLOSED)
    assert (await verdict(znodes, seen_intent())).decision is Decision.DELETE
    refused = await verdict(znodes, seen_intent(), allowance=timedelta(seconds=1))
    assert_other_incarnation(refused)


def test_the_rule_alone_with_seen_at() -> None:
    """`seen_at_ms` replaces `marked_at_ms` as the bound, and the reason says which."""
    target = parse_target(seen_intent())
    assert (target.seen_at_ms, target.marked_at_ms) == (SEEN_AT, MARKED_AT)
    assert other_incarnation(target, created_ms=SEEN_AT, allowance_ms=0) is None
    refused = other_incarnation(target, created_ms=SEEN_AT + 1, allowance_ms=0)
    assert refused is not None
    assert "seen_at_ms" in refused.reason
    assert refused.differences[0].expected == f"<= {SEEN_AT}"
    assert other_incarnation(target, created_ms=SEEN_AT - 10, allowance_ms=10) is None
    assert other_incarnation(target, created_ms=SEEN_AT - 9, allowance_ms=10) is not None


@pytest.mark.parametrize(
    ("seen_at", "marked_at", "problem"),
    [
        (-1, MARKED_AT, "must be non-negative"),
        (MARKED_AT + 1, MARKED_AT, "later than marked_at_ms"),
        (1, 0, "later than marked_at_ms"),
    ],
)
async def test_an_impossible_seen_at_is_invalid(seen_at: int, marked_at: int, problem: str) -> None:
    """Negative, or later than the intent's recording (no sender stamps so, and the bound
    would be weaker than the one `marked_at_ms` proves): SKIP INVALID naming the field."""
    znodes = cluster(node_ctime=1, metadata_ctime=None, state=LedgerState.CLOSED)
    got = await verdict(znodes, seen_intent(seen_at, marked_at))
    assert (got.decision, got.skip_reason) == (Decision.SKIP, SkipReason.INVALID), got
    assert got.reason.startswith("seen_at_ms"), got.reason
    assert problem in got.reason, got.reason


async def test_seen_at_equal_to_marked_at_is_accepted() -> None:
    """The bound itself is a possible stamp (the same instant)."""
    znodes = cluster(node_ctime=MARKED_AT, metadata_ctime=None, state=LedgerState.CLOSED)
    got = await verdict(znodes, seen_intent(MARKED_AT, MARKED_AT))
    assert got.decision is Decision.DELETE
