"""The ledger znode codec: hand-built bytes per the reference, round trips, and bad data."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import InvalidArgument
from services.metadata import (
    CorruptMetadata,
    DigestType,
    LedgerMetadata,
    LedgerState,
    Segment,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from tests.metadata.wire import lfield, varint, vfield

PATH = "/ledgers/00/0000/L0007"
V3_HEADER = b"BookieMetadataFormatVersion\t3\n"


def closed_ledger_body() -> bytes:
    """A CLOSED ledger written field by field from the LedgerMetadataFormat table."""
    segment = lfield(1, "b1:3181") + lfield(1, "b2:3181") + vfield(2, 0)
    custom = [
        lfield(11, lfield(1, "application") + lfield(2, b"pulsar")),
        lfield(11, lfield(1, "component") + lfield(2, b"managed-ledger")),
        lfield(11, lfield(1, "pulsar/managed-ledger") + lfield(2, b"t/ns/persistent/x")),
    ]
    return b"".join(
        [
            vfield(1, 2),  # quorumSize
            vfield(2, 2),  # ensembleSize
            vfield(3, 1234),  # length
            vfield(4, 9),  # lastEntryId
            vfield(5, 3),  # state CLOSED
            lfield(6, segment),
            vfield(7, 3),  # CRC32C
            lfield(8, b""),  # password
            vfield(9, 2),  # ackQuorumSize
            *custom,
            vfield(12, 77),  # cToken
        ]
    )


def test_v3_header_is_30_bytes() -> None:
    """The v3 header is exactly the 30 ASCII bytes of the reference."""
    assert len(V3_HEADER) == 30
    assert encode_ledger_metadata(sample()).startswith(V3_HEADER)


def test_decode_hand_built_v3() -> None:
    """Header + varint32 length + binary LedgerMetadataFormat decodes field by field."""
    body = closed_ledger_body()
    decoded = decode_ledger_metadata(V3_HEADER + varint(len(body)) + body, ledger_id=7, path=PATH)
    expected = LedgerMetadata(
        ledger_id=7,
        ensemble_size=2,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        length=1234,
        last_entry_id=9,
        segments=(Segment(0, ("b1:3181", "b2:3181")),),
        digest_type=DigestType.CRC32C,
        password=b"",
        custom_metadata={
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": b"t/ns/persistent/x",
        },
        ctoken=77,
        format_version=3,
    )
    assert expected == decoded
    assert (
        decoded.application,
        decoded.component,
        decoded.managed_ledger_name,
    ) == ("pulsar", "managed-ledger", "t/ns/persistent/x")


def test_v3_length_prefix_can_take_two_bytes() -> None:
    """A body longer than 127 bytes has a 2-byte varint prefix."""
    body = closed_ledger_body() + lfield(11, lfield(1, "k") + lfield(2, b"v" * 200))
    data = V3_HEADER + varint(len(body)) + body
    assert decode_ledger_metadata(data, ledger_id=7, path=PATH).custom_metadata["k"] == b"v" * 200


def test_decode_hand_written_v2_text() -> None:
    """A v2 znode (TextFormat, as BK 4.2–4.9 wrote) decodes; ack quorum defaults to quorum."""
    text = (
        "BookieMetadataFormatVersion\t2\n"
        "quorumSize: 2\nensembleSize: 3\nlength: 0\nstate: OPEN\n"
        'segment {\n  ensembleMember: "a:3181"\n  ensembleMember: "b:3181"\n'
        '  ensembleMember: "c:3181"\n  firstEntryId: 0\n}\n'
        'digestType: CRC32\npassword: "pw"\n'
        'customMetadata {\n  key: "pulsar/schemaId"\n  value: "t/ns/x"\n}\n'
    )
    decoded = decode_ledger_metadata(text.encode(), ledger_id=8, path=PATH)
    assert (
        decoded.state,
        decoded.ack_quorum,
        decoded.digest_type,
        decoded.password,
        decoded.schema_id,
        decoded.format_version,
    ) == (LedgerState.OPEN, 2, DigestType.CRC32, b"pw", "t/ns/x", 2)


@pytest.mark.parametrize(
    ("last_line", "state", "last_entry_id", "length"),
    [
        ("41\tCLOSED", LedgerState.CLOSED, 41, 512),
        ("-102\tCLOSED", LedgerState.IN_RECOVERY, -1, 0),
        ("", LedgerState.OPEN, -1, 0),
    ],
)
def test_decode_v1_text(
    last_line: str, state: LedgerState, last_entry_id: int, length: int
) -> None:
    """v1 lines: quorum, ensemble, length, segments, and the CLOSED / in-recovery marker."""
    segments = "0\ta:1\tb:1\tc:1\n10\ta:1\tb:1\td:1\n"
    text = f"BookieMetadataFormatVersion\t1\n2\n3\n512\n{segments}{last_line}"
    decoded = decode_ledger_metadata(text.encode(), ledger_id=9, path=PATH)
    assert (state, last_entry_id, length) == (decoded.state, decoded.last_entry_id, decoded.length)
    assert (
        Segment(0, ("a:1", "b:1", "c:1")),
        Segment(10, ("a:1", "b:1", "d:1")),
    ) == decoded.segments
    assert (decoded.digest_type, decoded.password, decoded.format_version) == (None, None, 1)


def test_open_ledger_ignores_stored_last_entry() -> None:
    """For a non-CLOSED ledger, lastEntryId and length are not taken from the message."""
    body = vfield(1, 1) + vfield(2, 1) + vfield(3, 99) + vfield(4, 5) + vfield(5, 1)
    decoded = decode_ledger_metadata(V3_HEADER + varint(len(body)) + body, ledger_id=1, path=PATH)
    assert (decoded.last_entry_id, decoded.length, decoded.password, decoded.digest_type) == (
        -1,
        0,
        None,
        None,
    )


def sample(**changes: object) -> LedgerMetadata:
    base = LedgerMetadata(
        ledger_id=2**40,
        ensemble_size=3,
        write_quorum=3,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        length=10,
        last_entry_id=0,
        segments=(Segment(0, ("a:3181", "b:3181", "c:3181")),),
        ctime=1_700_000_000_000,
        custom_metadata={"application": b"pulsar", "pulsar/compactedTo": b"\x08\x01\x10\xff\x01"},
        ctoken=-5,
    )
    return LedgerMetadata(**{**base.__dict__, **changes})


def test_v2_round_trip_drops_ctoken() -> None:
    """v2 carries everything but cToken (the BK rule)."""
    original = sample()
    decoded = decode_ledger_metadata(
        encode_ledger_metadata(original, format_version=2), ledger_id=original.ledger_id, path=PATH
    )
    assert sample(ctoken=0, format_version=2) == decoded


def test_encode_rejects_unknown_version() -> None:
    """Only v2 and v3 can be written."""
    with pytest.raises(InvalidArgument):
        encode_ledger_metadata(sample(), format_version=1)


bookies = st.lists(st.from_regex(r"[a-z]{1,8}:[0-9]{1,5}", fullmatch=True), min_size=1, max_size=5)


@st.composite
def ledgers(draw: st.DrawFn) -> LedgerMetadata:
    state = draw(st.sampled_from(list(LedgerState)))
    closed = state is LedgerState.CLOSED
    starts = sorted(draw(st.sets(st.integers(0, 2**40), min_size=1, max_size=4)))
    return LedgerMetadata(
        ledger_id=draw(st.integers(0, 2**63 - 1)),
        ensemble_size=draw(st.integers(1, 9)),
        write_quorum=draw(st.integers(1, 9)),
        ack_quorum=draw(st.integers(1, 9)),
        state=state,
        length=draw(st.integers(0, 2**62)) if closed else 0,
        last_entry_id=draw(st.integers(-1, 2**62)) if closed else -1,
        segments=tuple(Segment(s, tuple(draw(bookies))) for s in starts),
        digest_type=draw(st.sampled_from(list(DigestType))),
        password=draw(st.binary(max_size=20)),
        ctime=draw(st.none() | st.integers(0, 2**62)),
        custom_metadata=draw(st.dictionaries(st.text(max_size=10), st.binary(max_size=20))),
        ctoken=draw(st.integers(-(2**63), 2**63 - 1)),
    )


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(ledgers())
def test_v3_round_trip(metadata: LedgerMetadata) -> None:
    """Every ledger metadata survives encode v3 → decode."""
    data = encode_ledger_metadata(metadata)
    assert metadata == decode_ledger_metadata(data, ledger_id=metadata.ledger_id, path=PATH)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "bad header"),
        (b"garbage", "bad header"),
        (b"BookieMetadataFormatVersion\tx\n", "bad header"),
        (b"BookieMetadataFormatVersion\t3", "bad header"),
        (b"BookieMetadataFormatVersion\t12345678901\n", "bad header"),
        (b"BookieMetadataFormatVersion\t9\n", "unsupported"),
        (V3_HEADER, "truncated"),
        (V3_HEADER + b"\x80\x80", "truncated"),
        (V3_HEADER + b"\xff\xff\xff\xff\xff\xff", "varint"),
        (V3_HEADER + b"\x10" + b"\x08\x02", "truncated"),
        (V3_HEADER + b"\x02\x08\x02", "garbage protobuf"),
        (V3_HEADER + b"\x03\xff\xff\xff", "garbage protobuf"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: nope\n", "garbage text"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: 2\n", "missing required"),
        (b"BookieMetadataFormatVersion\t2\n\xff\xfe", "garbage text"),
        (b"BookieMetadataFormatVersion\t1\nx\n", "garbage v1"),
    ],
)
def test_bad_data_is_corrupt_and_names_the_path(data: bytes, problem: str) -> None:
    """Every kind of bad znode content raises CorruptMetadata with the path and the problem."""
    with pytest.raises(CorruptMetadata) as err:
        decode_ledger_metadata(data, ledger_id=7, path=PATH)
    assert err.value.path == PATH
    assert problem in str(err.value)


def test_truncated_encoding_is_corrupt() -> None:
    """Any strict prefix of a valid v3 znode is rejected."""
    data = encode_ledger_metadata(sample())
    for cut in (len(data) - 1, 31, 30, 10):
        with pytest.raises(CorruptMetadata):
            decode_ledger_metadata(data[:cut], ledger_id=1, path=PATH)


def test_segments_are_ordered_by_first_entry() -> None:
    """Segments stored out of order come back ordered by firstEntryId (an ordered map)."""
    late = lfield(6, lfield(1, "b:1") + vfield(2, 50))
    early = lfield(6, lfield(1, "a:1") + vfield(2, 0))
    body = vfield(1, 1) + vfield(2, 1) + vfield(3, 0) + vfield(5, 1) + late + early
    decoded = decode_ledger_metadata(V3_HEADER + varint(len(body)) + body, ledger_id=1, path=PATH)
    assert (Segment(0, ("a:1",)), Segment(50, ("b:1",))) == decoded.segments
