"""Hypothesis strategies for the gRPC surface, built by walking the proto descriptors.

`message_bytes(descriptor)` draws a message of any type the services take: every scalar field
type with its edge values, enums including numbers the proto does not define, proto3 optional
presence, oneofs, repeated fields, maps and nested messages, with string fields drawn from
hostile names (dot segments, escapes, NUL, bidi marks, huge strings). On top of the well-formed
message, `payload(descriptor)` adds raw malformed protobuf (truncated varints, bad wire types,
lengths past the end, unknown fields, random bytes) and `metadata(roles)` the authorization
header: the right role's token, another role's, an unknown one, none, or a malformed header.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

MAX_DEPTH = 3
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
INT32 = (-(2**31), 2**31 - 1)
UINT32 = (0, 2**32 - 1)

# Names a path-building service must never turn into another znode or object key.
HOSTILE_NAMES = (
    "",
    ".",
    "..",
    "../..",
    "a/../b",
    "public/default/../../x",
    "%2F",
    "%2e%2e",
    "%2e%2e%2fledgers",
    "persistent://public/default/..",
    "persistent://public/default/%2e%2e",
    "persistent://../../ledgers/x",
    "public/default/persistent/t\x00x",
    "\x00",
    "public/default/persistent/\u202et-cipsid",
    "\u200f\u200e\u2066",
    "public//default",
    "/",
    "//",
    "~/x",
    "public/default/persistent/" + "\ud7ff" * 3,
    "zookeeper",
    "/zookeeper/quota",
    "managed-ledgers/public/default/persistent/t",
    "ledgers/00/0000/L0000",
    "\\..\\..",
    "a" * 1025,
    "x" * 70_000,
)

# Names shaped like Pulsar's, none of which exists in the fuzz world.
PLAUSIBLE_NAMES = st.builds(
    "{}/{}/{}/{}".format,
    st.sampled_from(["fuzz-tenant", "public", "t"]),
    st.sampled_from(["fuzz-ns", "default", "n"]),
    st.sampled_from(["persistent", "non-persistent", "p"]),
    st.text(min_size=0, max_size=20) | st.text(alphabet="abz09-_.:", min_size=1, max_size=12),
)

NAMES: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(HOSTILE_NAMES),
    PLAUSIBLE_NAMES,
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from("./%2eF\x00\u202e\u200f\\"), max_size=12),
)


def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [v for v in (0, 1, -1, 2, low, high, low + 1, high - 1) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


_SCALARS: Mapping[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_INT64: _integers(*INT64),
    FieldDescriptor.TYPE_SINT64: _integers(*INT64),
    FieldDescriptor.TYPE_SFIXED64: _integers(*INT64),
    FieldDescriptor.TYPE_UINT64: _integers(*UINT64),
    FieldDescriptor.TYPE_FIXED64: _integers(*UINT64),
    FieldDescriptor.TYPE_INT32: _integers(*INT32),
    FieldDescriptor.TYPE_SINT32: _integers(*INT32),
    FieldDescriptor.TYPE_SFIXED32: _integers(*INT32),
    FieldDescriptor.TYPE_UINT32: _integers(*UINT32),
    FieldDescriptor.TYPE_FIXED32: _integers(*UINT32),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32),
    FieldDescriptor.TYPE_DOUBLE: st.floats(),
    FieldDescriptor.TYPE_STRING: NAMES,
    FieldDescriptor.TYPE_BYTES: st.one_of(
        st.binary(max_size=64), st.sampled_from([b"", b"\x00" * 64, b"\xff" * 512])
    ),
}


def message_type(field: FieldDescriptor) -> Descriptor:
    """The message type of a message field."""
    assert field.message_type is not None, field.full_name
    return field.message_type


def _real_oneof(field: FieldDescriptor) -> bool:
    """In a oneof of the proto, not the synthetic one proto3 `optional` makes."""
    oneof = field.containing_oneof
    return oneof is not None and not oneof.name.startswith("_")


def _enum(field: FieldDescriptor) -> st.SearchStrategy[int]:
    assert field.enum_type is not None, field.full_name
    known = [value.number for value in field.enum_type.values]
    # proto3 enums are open: a number the proto does not name travels as is.
    return st.one_of(st.sampled_from(known), _integers(*INT32))


def _value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum(field)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return messages(message_type(field), depth + 1)
    return _SCALARS[field.type]


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE and message_type(field).GetOptions().map_entry


def _field(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    """What to put in one field: None leaves it unset (absent, or default in proto3)."""
    if _is_map(field):
        entry = message_type(field)
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return st.none() | st.dictionaries(_value(key, depth), _value(value, depth), max_size=4)
    if field.is_repeated:
        size = 4 if depth < MAX_DEPTH else 1
        return st.none() | st.lists(_value(field, depth), max_size=size)
    return st.none() | _value(field, depth)


def _assign(message: Message, field: FieldDescriptor, value: Any) -> None:
    target = getattr(message, field.name)
    if _is_map(field):
        entry_value = message_type(field).fields_by_name["value"]
        for key, item in value.items():
            if entry_value.type == FieldDescriptor.TYPE_MESSAGE:
                target[key].CopyFrom(item)
            else:
                target[key] = item
    elif field.is_repeated:
        target.extend(value)
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        target.CopyFrom(value)
    else:
        setattr(message, field.name, value)


@st.composite
def _message(draw: st.DrawFn, descriptor: Descriptor, depth: int) -> Message:
    message = GetMessageClass(descriptor)()
    for oneof in descriptor.oneofs:
        if oneof.name.startswith("_"):  # proto3 `optional`: a synthetic oneof of one field
            continue
        chosen = draw(st.none() | st.sampled_from(list(oneof.fields)))
        if chosen is not None:
            value = draw(_value(chosen, depth))
            _assign(message, chosen, value)
    for field in descriptor.fields:
        if _real_oneof(field):
            continue
        if depth >= MAX_DEPTH and field.type == FieldDescriptor.TYPE_MESSAGE:
            continue
        value = draw(_field(field, depth))
        if value is not None:
            _assign(message, field, value)
    return message


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Any message of this type, down to MAX_DEPTH levels of nesting."""
    return _message(descriptor, depth)


# Raw protobuf wire-format damage.
def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


MALFORMED: st.SearchStrategy[bytes] = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.sampled_from(
        [
            b"\x08",  # field 1 varint, value missing
            b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # an 11-byte varint
            b"\x0a\xff\xff\xff\xff\x0f",  # a length far past the end
            b"\x0a\x05abc",  # a length past the end
            b"\x0f",  # wire type 7 does not exist
            b"\x0e\x00",  # wire type 6 does not exist
            b"\x0b\x08\x01",  # a group start never closed
            b"\x0c",  # a group end without a start
            b"\x00\x00",  # field number 0
            b"\xf8\xff\xff\xff\x7f\x01",  # field number past 2**29
            b"\x0d\x00\x00",  # a fixed32 cut short
            b"\x09\x00\x00\x00",  # a fixed64 cut short
            b"\x12\x02\xc3\x28",  # invalid UTF-8 in a string field
            b"\x22\x03\xed\xa0\x80",  # a UTF-8-encoded surrogate
        ]
    ),
    st.builds(
        lambda number, wire, body: _varint((number << 3) | wire) + body,
        st.integers(1, 40),
        st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7]),
        st.binary(max_size=24),
    ),
)


@st.composite
def _damaged(draw: st.DrawFn, descriptor: Descriptor) -> bytes:
    """A well-formed message, then cut, flipped or padded with unknown fields."""
    data = draw(messages(descriptor)).SerializeToString()
    how = draw(st.sampled_from(["truncate", "flip", "unknown", "append"]))
    if how == "truncate" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        index = draw(st.integers(0, len(data) - 1))
        return data[:index] + bytes([data[index] ^ draw(st.integers(1, 255))]) + data[index + 1 :]
    if how == "unknown":
        number = draw(st.integers(20, 2**29 - 1))
        return data + _varint(number << 3 | 2) + _varint(3) + b"abc"
    return data + draw(MALFORMED)


@dataclass(frozen=True)
class Payload:
    kind: str
    """`message` (well formed), `damaged`, `malformed` (raw bytes) or `huge`."""
    data: bytes


def _plausible_mark() -> st.SearchStrategy[Message]:
    """A MarkLedgersRequest that passes validation more often than not, so calls reach the
    marking flow: a known component and mode, a Pulsar-shaped name the cluster does not have,
    a few distinct ledger ids."""
    from tombstone.v1 import marker_pb2, pending_delete_pb2

    def build(component: int, name: str, ids: list[int], mode: int, source: int) -> Message:
        request = marker_pb2.MarkLedgersRequest(
            component=pending_delete_pb2.LedgerComponent.ValueType(component),
            ledger_ids=ids,
            write_mode=marker_pb2.WriteMode.ValueType(mode),
            source=pending_delete_pb2.Source.ValueType(source),
        )
        if component == pending_delete_pb2.SCHEMA_STORAGE:
            request.schema_id = name.replace("/persistent", "", 1)
        else:
            request.managed_ledger_name = name
        if component == pending_delete_pb2.MANAGED_CURSOR:
            request.cursor_name = "fuzz-cursor"
        return request

    return st.builds(
        build,
        st.sampled_from([1, 2, 3]),
        PLAUSIBLE_NAMES,
        st.lists(st.integers(0, 2**40), min_size=1, max_size=20, unique=True),
        st.sampled_from([0, 1, 2]),
        st.sampled_from([0, 1, 3]),
    )


# Per request type, a strategy of messages shaped to get past validation.
PLAUSIBLE = {"tombstone.v1.MarkLedgersRequest": _plausible_mark}


def payloads(descriptor: Descriptor) -> st.SearchStrategy[Payload]:
    plausible = PLAUSIBLE.get(descriptor.full_name)
    shaped = plausible() if plausible is not None else messages(descriptor)
    return st.one_of(
        messages(descriptor).map(lambda m: Payload("message", m.SerializeToString())),
        shaped.map(lambda m: Payload("message", m.SerializeToString())),
        shaped.map(lambda m: Payload("message", m.SerializeToString())),
        _damaged(descriptor).map(lambda b: Payload("damaged", b)),
        MALFORMED.map(lambda b: Payload("malformed", b)),
    )


@dataclass(frozen=True)
class Credentials:
    kind: str
    """`allowed`, `wrong_role`, `unknown`, `missing` or `malformed`."""
    metadata: tuple[tuple[str, str], ...]


def credentials(
    tokens: Mapping[str, str], allowed: frozenset[str]
) -> st.SearchStrategy[Credentials]:
    """`tokens` maps role -> token; `allowed` are the roles the method admits."""
    good = [t for role, t in tokens.items() if role in allowed]
    wrong = [t for role, t in tokens.items() if role not in allowed]
    options = [
        st.sampled_from(good).map(
            lambda t: Credentials("allowed", (("authorization", f"Bearer {t}"),))
        ),
        st.sampled_from(good).map(
            lambda t: Credentials("allowed", (("authorization", f"Bearer {t}"),))
        ),
        st.sampled_from(good).map(
            lambda t: Credentials("allowed", (("authorization", f"Bearer {t}"),))
        ),
        st.just(Credentials("missing", ())),
        st.text(
            alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40
        )
        .filter(lambda t: t not in tokens.values())
        .map(lambda t: Credentials("unknown", (("authorization", f"Bearer {t}"),))),
        st.sampled_from(
            ["Bearer", "Bearer ", "Basic dXNlcjpwdw==", "bearer", "Token x", " ", "Bearer  "]
        ).map(lambda h: Credentials("malformed", (("authorization", h),))),
    ]
    if wrong:
        options.append(
            st.sampled_from(wrong).map(
                lambda t: Credentials("wrong_role", (("authorization", f"Bearer {t}"),))
            )
        )
    if good:
        # The right token under another scheme or header name is still no token.
        options.append(
            st.sampled_from(good).map(
                lambda t: Credentials("malformed", (("authorization", f"Basic {t}"),))
            )
        )
        options.append(
            st.sampled_from(good).map(lambda t: Credentials("missing", (("x-token", t),)))
        )
    return st.one_of(options)
