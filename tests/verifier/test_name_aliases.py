"""No alias of a live owner's name is ever deleted (docs/design.md §4.6), property-based.

Hypothesis generates live owners -- tenants, namespaces, V1 clusters, unicode local topic
names (percent-encoded in the ML name as `Codec.encode` does), subscriptions and schema ids --
writes each into in-memory stores as Pulsar would (ML list with a BookKeeper, a filesystem
and an S3 offloaded ledger; a cursor; a schema locator; every ledger with the custom metadata
`ManagedLedgerImpl`/`ManagedCursorImpl`/`BookkeeperSchemaStorage` give it, and the objects
with the `managedledgername` user metadata of `BlobStoreManagedLedgerOffloader` since 2.10),
then sends the real `DecisionEngine` PDLIs whose owner is an alias of the live one.

Aliases that spell the same owner differently (dot segments, doubled, leading or trailing
slashes, escapes of separators and dots, non-canonical escapes, NUL) must be rejected as
INVALID. Aliases that are other valid names (case variants, since ZooKeeper, S3 keys and the
filesystem under test are case-sensitive; other Unicode normalisation forms, which encode to
other ASCII names) name a different owner that is not live: the artifacts carrying owner
metadata answer MISMATCH, and a filesystem offload -- which carries none the verifier can
read -- may only be approved at that other owner's own path, never at the live one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.metadata.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from services.metadata.offload import (
    data_object_key,
    filesystem_offload_path,
    index_object_key,
    uuid_to_bits,
)
from services.metadata.paths import LedgerPaths
from services.metadata.pulsar_formats import (
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)
from services.metadata.pulsar_names import (
    TopicName,
    cursor_path,
    java_url_encode,
    managed_ledger_path,
    schema_path,
)
from services.verifier.decision import DecisionEngine
from services.verifier.model import Decision, SkipReason, Verdict
from services.verifier.offload import OffloadInspector, OffloadPolicy
from services.verifier.owners import OwnerCache
from services.verifier.ports import ObjectHead
from tests.verifier.memory import MemoryObjects, MemoryZnodes, NothingBelieved
from tests.verifier.world import BUCKET, CLUSTER, UUID, cursor_meta, data_meta, pdli, schema_meta
from tombstone.v1 import pending_delete_pb2 as pb

BASE = "file:///offload"
FS_UUID = "5b0e2c4a-1d3f-4e5a-8b6c-7d8e9f0a1b2c"
DATA, FS_OFFLOADED, S3_OFFLOADED, CURSOR_LEDGER, SCHEMA_LEDGER = 11, 12, 13, 21, 31
PATHS = LedgerPaths()

_ENTITY = st.from_regex(r"[-=:.A-Za-z0-9_]{1,8}", fullmatch=True).filter(
    lambda s: s not in (".", "..")
)
# Local names as users type them: any printable text, '%' and spaces included, combining
# marks and precomposed letters (so that NFC and NFD differ), no separator or control.
_LOCAL = st.text(
    alphabet=st.one_of(
        st.sampled_from("aZ0-_.*% +~:é\u0065\u0301Åﬁ"),
        st.characters(exclude_categories=("Cc", "Cs"), exclude_characters="/\\"),
    ),
    min_size=1,
    max_size=10,
).filter(lambda s: s not in (".", ".."))


@dataclass(frozen=True)
class Live:
    """One live owner set: a topic (its ML), a cursor of it and its schema."""

    topic: TopicName
    subscription: str

    @property
    def ml(self) -> str:
        return self.topic.managed_ledger_name

    @property
    def cursor(self) -> str:
        return java_url_encode(self.subscription)

    @property
    def schema_id(self) -> str:
        return self.topic.schema_id


@st.composite
def live_owners(draw: st.DrawFn) -> Live:
    cluster = draw(st.one_of(st.none(), _ENTITY))
    local = draw(_LOCAL)
    topic = TopicName("persistent", draw(_ENTITY), draw(_ENTITY), local, cluster=cluster)
    return Live(topic, draw(_LOCAL))


def _ledger(ledger_id: int, custom: dict[str, bytes]) -> bytes:
    return encode_ledger_metadata(
        LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=1,
            write_quorum=1,
            ack_quorum=1,
            state=LedgerState.CLOSED,
            length=10,
            last_entry_id=0,
            custom_metadata=custom,
        )
    )


def _offloaded(info: ManagedLedgerInfo, ledger_id: int, uuid: str, driver: str) -> None:
    entry = info.ledgerInfo.add(ledgerId=ledger_id, entries=1, size=10, timestamp=1)
    ctx = entry.offloadContext
    ctx.uidMsb, ctx.uidLsb = uuid_to_bits(uuid)
    ctx.complete, ctx.bookkeeperDeleted = True, True
    ctx.driverMetadata.name = driver


def write_live(live: Live) -> tuple[MemoryZnodes, MemoryObjects]:
    znodes, objects = MemoryZnodes(), MemoryObjects()
    info = ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=DATA, entries=1, size=10, timestamp=1)
    _offloaded(info, FS_OFFLOADED, FS_UUID, "filesystem")
    _offloaded(info, S3_OFFLOADED, UUID, "aws-s3")
    info.ledgerInfo[-1].offloadContext.driverMetadata.properties.add(key="bucket", value=BUCKET)
    znodes.put(managed_ledger_path(live.ml), encode_managed_ledger_info(info), version=3)
    cursor = encode_cursor_info(ManagedCursorInfo(cursorsLedgerId=CURSOR_LEDGER))
    znodes.put(cursor_path(live.ml, live.cursor), cursor, version=3)
    locator = SchemaLocator()
    entry = locator.index.add(version=0, hash=b"h")
    entry.position.ledgerId, entry.position.entryId = SCHEMA_LEDGER, 0
    locator.info.CopyFrom(entry)
    znodes.put(schema_path(live.schema_id), encode_schema_locator(locator), version=3)
    for ledger_id, custom in (
        (DATA, data_meta(live.ml)),
        (CURSOR_LEDGER, cursor_meta(live.ml, live.cursor)),
        (SCHEMA_LEDGER, schema_meta(live.schema_id)),
    ):
        znodes.put(PATHS.ledger_path(ledger_id), _ledger(ledger_id, custom))
    head = ObjectHead({"managedledgername": live.ml, "pulsarclustername": CLUSTER}, 1)
    for key in (data_object_key(UUID, S3_OFFLOADED), index_object_key(UUID, S3_OFFLOADED)):
        objects.heads[(BUCKET, key)] = head
    return znodes, objects


def engine(znodes: MemoryZnodes, objects: MemoryObjects) -> DecisionEngine:
    policy = OffloadPolicy(
        allowed_buckets=frozenset({BUCKET}),
        cluster_name=CLUSTER,
        allowed_filesystem_bases=frozenset({BASE}),
        filesystem_base=BASE,
    )
    return DecisionEngine(
        store=znodes,
        owners=OwnerCache(znodes),
        believed=NothingBelieved(),
        offload=OffloadInspector(objects, policy),
    )


# --- aliases ---------------------------------------------------------------------------------


def _same_owner_spellings(name: str) -> Iterator[str]:
    """Other spellings of `name` (a slash-separated owner name) that a path resolver, a URL
    decoder or a lax parser would take for the same owner."""
    parts = name.split("/")
    for at in range(len(parts) + 1):
        yield "/".join([*parts[:at], ".", *parts[at:]])
        yield "/".join([*parts[:at], "x", "..", *parts[at:]])
    for at in range(len(parts) - 1):
        yield "/".join(parts[: at + 1]) + "//" + "/".join(parts[at + 1 :])
    yield from (name + "/", "/" + name, name + "/.", name + "\x00", "\x00" + name)
    last = parts[-1]
    stem = "/".join(parts[:-1])
    for local in _escaped_aliases(last):
        yield f"{stem}/{local}"


def _escaped_aliases(encoded: str) -> Iterator[str]:
    """Escapes of separators and dots around an encoded segment, escapes of characters the
    encoder keeps, lowercase escapes, `%20` for `+`, and NUL."""
    yield from ("%2E", "%2E%2E", "%2e%2e", ".", "..")
    for sep in ("%2F", "%2f", "%5C", "%5c"):
        yield f"..{sep}{encoded}"
        yield f"{encoded}{sep}..{sep}{encoded}"
        yield f"%2E%2E{sep}{encoded}"
        yield f"{encoded}{sep}"
    yield from (f"{encoded}%00", f"%00{encoded}", f"{encoded}\x00")
    kept = next((c for c in encoded if c.isalnum() and c.isascii()), None)
    if kept is not None:
        yield encoded.replace(kept, f"%{ord(kept):02X}", 1)
    lowered = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)
    if lowered != encoded:
        yield lowered  # lowercase hex in the escapes only
    if "+" in encoded:
        yield encoded.replace("+", "%20")


def _other_valid_names(name: str, decoded_last: str) -> Iterator[str]:
    """Different valid names close to `name`: case variants and Unicode normalisation forms
    of the local part (which URL-encode to other ASCII names)."""
    parts = name.split("/")
    for at in range(len(parts)):
        if parts[at] == "persistent":
            continue
        varied = parts[at].swapcase() if at < len(parts) - 1 else _swap_kept(parts[at])
        yield "/".join([*parts[:at], varied, *parts[at + 1 :]])
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        normal = unicodedata.normalize(form, decoded_last)
        if normal and normal not in (".", ".."):
            yield "/".join([*parts[:-1], java_url_encode(normal)])


def _swap_kept(encoded: str) -> str:
    """Swap the case of the characters the encoder keeps, leaving escapes as they are."""
    out, i = [], 0
    while i < len(encoded):
        if encoded[i] == "%":
            out.append(encoded[i : i + 3])
            i += 3
        else:
            out.append(encoded[i].swapcase())
            i += 1
    return "".join(out)


# --- the property ------------------------------------------------------------------------------


Probe = Callable[[str], pb.PendingDeleteLedgerInfo]


def ml_probes(live: Live) -> dict[str, Probe]:
    """PDLIs, one per artifact of the live ML, naming `ml` as their owner."""
    return {
        "bookkeeper": lambda ml: pdli(DATA, ml=ml),
        "filesystem": lambda ml: pdli(
            FS_OFFLOADED, ml=ml, tier=pb.OFFLOAD_LEDGER, uuid=FS_UUID, driver="filesystem"
        ),
        "s3": lambda ml: pdli(S3_OFFLOADED, ml=ml, tier=pb.OFFLOAD_LEDGER, uuid=UUID),
        "cursor-of-ml": lambda ml: pdli(
            CURSOR_LEDGER, ml=ml, component=pb.MANAGED_CURSOR, cursor=live.cursor
        ),
    }


def assert_not_deleted(verdict: Verdict, alias: str, valid_other: bool) -> None:
    """Rejected as INVALID when it spells the live owner; never DELETE otherwise."""
    if not valid_other:
        assert verdict.skip_reason is SkipReason.INVALID, (alias, verdict)
    assert verdict.decision is not Decision.DELETE, (alias, verdict)


async def check_ml_aliases(live: Live, verifier: DecisionEngine) -> None:
    decoded = live.topic.local_name
    structural = set(_same_owner_spellings(live.ml)) - {live.ml}
    others = set(_other_valid_names(live.ml, decoded)) - {live.ml}
    live_fs = filesystem_offload_path(BASE, live.ml, FS_OFFLOADED, FS_UUID)
    for alias in structural | others:
        valid_other = alias in others
        for tier, probe in ml_probes(live).items():
            verdict = await verifier.verify(probe(alias))
            if tier == "filesystem" and valid_other and verdict.decision is Decision.DELETE:
                # Another, non-live owner: approved only at that owner's own path.
                assert verdict.offload is not None
                own = filesystem_offload_path(BASE, alias, FS_OFFLOADED, FS_UUID)
                assert (verdict.offload.filesystem_path, own != live_fs) == (own, True)
                continue
            assert_not_deleted(verdict, alias, valid_other)


async def check_cursor_aliases(live: Live, verifier: DecisionEngine) -> None:
    structural = {a.rsplit("/", 1)[-1] for a in _same_owner_spellings("x/" + live.cursor)}
    structural |= {".", "..", live.cursor + "/", "./" + live.cursor, live.cursor + "/.."}
    others = {_swap_kept(live.cursor)}
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        normal = unicodedata.normalize(form, live.subscription)
        if normal not in (".", ".."):
            others.add(java_url_encode(normal))
    for alias in (structural | others) - {live.cursor}:
        probe = pdli(CURSOR_LEDGER, ml=live.ml, component=pb.MANAGED_CURSOR, cursor=alias)
        assert_not_deleted(await verifier.verify(probe), alias, alias in others)


async def check_schema_aliases(live: Live, verifier: DecisionEngine) -> None:
    decoded = live.topic.base_local_name
    structural = set(_same_owner_spellings(live.schema_id))
    others = set(_other_valid_names(live.schema_id, decoded))
    for alias in (structural | others) - {live.schema_id}:
        probe = pdli(SCHEMA_LEDGER, component=pb.SCHEMA_STORAGE, schema_id=alias)
        assert_not_deleted(await verifier.verify(probe), alias, alias in others - structural)


@settings(
    max_examples=40,
    deadline=None,  # a loaded machine must not turn slowness into failure
    suppress_health_check=[HealthCheck.too_slow],
)
@given(live=live_owners())
async def test_no_alias_of_a_live_owner_is_ever_deleted(live: Live) -> None:
    """Every alias of a live ML, cursor or schema is rejected (same owner spelled otherwise)
    or names a different owner that is not live; no artifact of the live owner gets DELETE."""
    znodes, objects = write_live(live)
    verifier = engine(znodes, objects)
    # The live owner itself: every listed artifact is IN_USE (the setup is right).
    for probe in ml_probes(live).values():
        assert (await verifier.verify(probe(live.ml))).skip_reason is SkipReason.IN_USE
    await check_ml_aliases(live, verifier)
    await check_cursor_aliases(live, verifier)
    await check_schema_aliases(live, verifier)


async def test_the_reviewed_dot_segment_forgery_is_invalid() -> None:
    """The forgery the review reproduced: a V1-shaped ML name whose namespace is `.` resolves
    to the live topic's directory. It is INVALID, naming the field, and nothing is approved."""
    live = Live(TopicName("persistent", "t", "ns", "orders"), "sub")
    verifier = engine(*write_live(live))
    forged = pdli(
        FS_OFFLOADED,
        ml="t/ns/./persistent/orders",
        tier=pb.OFFLOAD_LEDGER,
        uuid=FS_UUID,
        driver="filesystem",
    )
    verdict = await verifier.verify(forged)
    assert (verdict.skip_reason, verdict.reason.split(":")[0]) == (
        SkipReason.INVALID,
        "managed_ledger_name",
    )
