"""The `--json` output of the command-line clients: a response as scripts want to read it.

Protobuf's JSON mapping leaves out fields at their zero value (a status with nothing pending
prints `{}`), renames fields to camelCase and writes 64-bit integers as strings. Here every
field is printed (zeros too), under its proto name (snake_case, as in the docs), and every
integer is a JSON number: ledger ids and counts fit exactly in the integers `json` writes.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_INT64 = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


def message_dict(message: Message) -> dict[str, Any]:
    """Every field by its proto name, zero values included, 64-bit integers as numbers."""
    data = json_format.MessageToDict(
        message,
        always_print_fields_with_no_presence=True,
        preserving_proto_field_name=True,
    )
    return _numbers(message.DESCRIPTOR, data)  # type: ignore[arg-type]  # upb's own class


def message_json(message: Message) -> str:
    return json.dumps(message_dict(message), indent=2, sort_keys=False)


def _numbers(descriptor: Descriptor, data: dict[str, Any]) -> dict[str, Any]:
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        if _is_map(field):
            value_field = _message_type(field).fields_by_name["value"]
            data[field.name] = {k: _value(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            data[field.name] = [_value(field, v) for v in value]
        else:
            data[field.name] = _value(field, value)
    return data


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type in _INT64 and isinstance(value, str):
        return int(value)
    if field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(value, dict):
        message_type = _message_type(field)
        if message_type.full_name.startswith("google.protobuf."):
            return value  # well-known types have their own JSON forms
        return _numbers(message_type, value)
    return value


def _message_type(field: FieldDescriptor) -> Descriptor:
    message = field.message_type
    if message is None:
        raise TypeError(f"{field.full_name} is not a message field")
    return message


def _is_map(field: FieldDescriptor) -> bool:
    message = field.message_type
    return (
        field.type == FieldDescriptor.TYPE_MESSAGE
        and message is not None
        and message.GetOptions().map_entry
    )
