"""The Oxia client protocol's messages, declared here and built at import time.

Oxia's `OxiaClient` service (package `io.streamnative.oxia.proto`, file `client.proto` in
the Oxia repository and in the `oxia` Python client) is small and stable. Declaring its
messages as a table and building the descriptors with protobuf's own `descriptor_pb2` keeps
the devstack free of generated code and of the client package: only field numbers and wire
types matter on the wire, and those are what the table holds.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "io.streamnative.oxia.proto"
SERVICE = f"{PACKAGE}.OxiaClient"

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "bool": _F.TYPE_BOOL,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "fixed32": _F.TYPE_FIXED32,
    "fixed64": _F.TYPE_FIXED64,
}

_ENUMS: dict[str, list[str]] = {
    "ShardKeyRouter": ["UNKNOWN", "XXHASH3"],
    "KeyComparisonType": ["EQUAL", "FLOOR", "CEILING", "LOWER", "HIGHER"],
    "Status": ["OK", "KEY_NOT_FOUND", "UNEXPECTED_VERSION_ID", "SESSION_DOES_NOT_EXIST"],
    "NotificationType": ["KEY_CREATED", "KEY_MODIFIED", "KEY_DELETED", "KEY_RANGE_DELETED"],
}

# name -> [(field name, number, type, label)], label: "" (plain), "opt" (proto3 optional,
# with presence), "rep" (repeated) or "map:<value type>" (map<string, value type>).
_MESSAGES: dict[str, list[tuple[str, int, str, str]]] = {
    "ShardAssignmentsRequest": [("namespace", 1, "string", "")],
    "ShardAssignments": [("namespaces", 1, "NamespaceShardsAssignment", "map")],
    "NamespaceShardsAssignment": [
        ("assignments", 1, "ShardAssignment", "rep"),
        ("shard_key_router", 2, "ShardKeyRouter", ""),
    ],
    # In client.proto `int32_hash_range` is the one member of oneof `shard_boundaries`:
    # a lone oneof member and an optional message field are the same on the wire.
    "ShardAssignment": [
        ("shard", 1, "int64", ""),
        ("leader", 2, "string", ""),
        ("int32_hash_range", 3, "Int32HashRange", ""),
    ],
    "Int32HashRange": [
        ("min_hash_inclusive", 1, "fixed32", ""),
        ("max_hash_inclusive", 2, "fixed32", ""),
    ],
    "WriteRequest": [
        ("shard", 1, "int64", "opt"),
        ("puts", 2, "PutRequest", "rep"),
        ("deletes", 3, "DeleteRequest", "rep"),
        ("delete_ranges", 4, "DeleteRangeRequest", "rep"),
    ],
    "WriteResponse": [
        ("puts", 1, "PutResponse", "rep"),
        ("deletes", 2, "DeleteResponse", "rep"),
        ("delete_ranges", 3, "DeleteRangeResponse", "rep"),
    ],
    "ReadRequest": [("shard", 1, "int64", "opt"), ("gets", 2, "GetRequest", "rep")],
    "ReadResponse": [("gets", 1, "GetResponse", "rep")],
    "SecondaryIndex": [("index_name", 1, "string", ""), ("secondary_key", 2, "string", "")],
    "PutRequest": [
        ("key", 1, "string", ""),
        ("value", 2, "bytes", ""),
        ("expected_version_id", 3, "int64", "opt"),
        ("session_id", 4, "int64", "opt"),
        ("client_identity", 5, "string", "opt"),
        ("partition_key", 6, "string", "opt"),
        ("sequence_key_delta", 7, "uint64", "rep"),
        ("secondary_indexes", 8, "SecondaryIndex", "rep"),
    ],
    "PutResponse": [
        ("status", 1, "Status", ""),
        ("version", 2, "Version", ""),
        ("key", 3, "string", "opt"),
    ],
    "DeleteRequest": [("key", 1, "string", ""), ("expected_version_id", 2, "int64", "opt")],
    "DeleteResponse": [("status", 1, "Status", "")],
    "GetRequest": [
        ("key", 1, "string", ""),
        ("include_value", 2, "bool", ""),
        ("comparison_type", 3, "KeyComparisonType", ""),
        ("secondary_index_name", 4, "string", "opt"),
    ],
    "GetResponse": [
        ("status", 1, "Status", ""),
        ("version", 2, "Version", ""),
        ("value", 3, "bytes", "opt"),
        ("key", 4, "string", "opt"),
        ("secondary_index_key", 5, "string", "opt"),
    ],
    "DeleteRangeRequest": [
        ("start_inclusive", 1, "string", ""),
        ("end_exclusive", 2, "string", ""),
    ],
    "DeleteRangeResponse": [("status", 1, "Status", "")],
    "ListRequest": [
        ("shard", 1, "int64", "opt"),
        ("start_inclusive", 2, "string", ""),
        ("end_exclusive", 3, "string", ""),
        ("secondary_index_name", 4, "string", "opt"),
    ],
    "ListResponse": [("keys", 1, "string", "rep")],
    "RangeScanRequest": [
        ("shard", 1, "int64", "opt"),
        ("start_inclusive", 2, "string", ""),
        ("end_exclusive", 3, "string", ""),
        ("secondary_index_name", 4, "string", "opt"),
    ],
    "RangeScanResponse": [("records", 1, "GetResponse", "rep")],
    "GetSequenceUpdatesRequest": [("shard", 1, "int64", ""), ("key", 2, "string", "")],
    "GetSequenceUpdatesResponse": [("highest_sequence_key", 1, "string", "")],
    "Version": [
        ("version_id", 1, "int64", ""),
        ("modifications_count", 2, "int64", ""),
        ("created_timestamp", 3, "fixed64", ""),
        ("modified_timestamp", 4, "fixed64", ""),
        ("session_id", 5, "int64", "opt"),
        ("client_identity", 6, "string", "opt"),
    ],
    "CreateSessionRequest": [
        ("shard", 1, "int64", ""),
        ("session_timeout_ms", 2, "uint32", ""),
        ("client_identity", 3, "string", ""),
    ],
    "CreateSessionResponse": [("session_id", 1, "int64", "")],
    "SessionHeartbeat": [("shard", 1, "int64", ""), ("session_id", 2, "int64", "")],
    "KeepAliveResponse": [],
    "CloseSessionRequest": [("shard", 1, "int64", ""), ("session_id", 2, "int64", "")],
    "CloseSessionResponse": [],
    "NotificationsRequest": [
        ("shard", 1, "int64", ""),
        ("start_offset_exclusive", 2, "int64", "opt"),
    ],
    "NotificationBatch": [
        ("shard", 1, "int64", ""),
        ("offset", 2, "int64", ""),
        ("timestamp", 3, "fixed64", ""),
        ("notifications", 4, "Notification", "map"),
    ],
    "Notification": [
        ("type", 1, "NotificationType", ""),
        ("version_id", 2, "int64", "opt"),
        ("key_range_last", 3, "string", "opt"),
    ],
}

# rpc name -> (request, response, client streams, server streams)
METHODS: dict[str, tuple[str, str, bool, bool]] = {
    "GetShardAssignments": ("ShardAssignmentsRequest", "ShardAssignments", False, True),
    "Write": ("WriteRequest", "WriteResponse", False, False),
    "WriteStream": ("WriteRequest", "WriteResponse", True, True),
    "Read": ("ReadRequest", "ReadResponse", False, True),
    "List": ("ListRequest", "ListResponse", False, True),
    "RangeScan": ("RangeScanRequest", "RangeScanResponse", False, True),
    "GetSequenceUpdates": ("GetSequenceUpdatesRequest", "GetSequenceUpdatesResponse", False, True),
    "GetNotifications": ("NotificationsRequest", "NotificationBatch", False, True),
    "CreateSession": ("CreateSessionRequest", "CreateSessionResponse", False, False),
    "KeepAlive": ("SessionHeartbeat", "KeepAliveResponse", False, False),
    "CloseSession": ("CloseSessionRequest", "CloseSessionResponse", False, False),
}


def _field(
    message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: str, label: str
) -> None:
    field = message.field.add(name=name, number=number, json_name=_camel(name))
    field.label = _F.LABEL_REPEATED if label in ("rep", "map") else _F.LABEL_OPTIONAL
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    elif kind in _ENUMS:
        field.type = _F.TYPE_ENUM
        field.type_name = f".{PACKAGE}.{kind}"
    else:
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{kind}"
    if label == "map":
        entry_name = _camel(name)[0].upper() + _camel(name)[1:] + "Entry"
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, json_name="key", type=_F.TYPE_STRING)
        entry.field[0].label = _F.LABEL_OPTIONAL
        _field(entry, "value", 2, kind, "")
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{message.name}.{entry_name}"
    elif label == "opt":
        # proto3 `optional`: a synthetic one-member oneof gives the field presence.
        field.proto3_optional = True
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name=f"_{name}")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="devstack/oxia/client.proto", package=PACKAGE, syntax="proto3"
    )
    for enum_name, values in _ENUMS.items():
        enum = file.enum_type.add(name=enum_name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    for message_name, fields in _MESSAGES.items():
        message = file.message_type.add(name=message_name)
        # Synthetic oneofs must come after real ones; there are no real ones here.
        for name, number, kind, label in fields:
            _field(message, name, number, kind, label)
    return file


# A pool of its own: the names cannot clash with another copy of the schema (such as the
# `oxia` client's) loaded in the same process.
_POOL = descriptor_pool.DescriptorPool()
_CLASSES: dict[str, Any] = message_factory.GetMessages([_file()], pool=_POOL)


def message(name: str) -> Any:
    """The message class for `name` (e.g. "PutRequest")."""
    return _CLASSES[f"{PACKAGE}.{name}"]


def enum_value(enum: str, name: str) -> int:
    """The number of value `name` in `enum` (e.g. ("Status", "KEY_NOT_FOUND") -> 1)."""
    return _ENUMS[enum].index(name)
