"""Sequential keys, as Oxia's `db_sequences.go` makes them.

A put with sequence deltas on prefix `p` looks up the greatest key below `p-<2^64-1>`; when it
starts with `p`, its `-`-separated parts after the prefix are the sequence's last values.
The new key is `p-<last_1 + delta_1>-<last_2 + delta_2>…` (missing parts count as 0), each
part zero-padded to 20 digits.
"""

from __future__ import annotations

from . import keys
from .storage import SortedRecords

_MAX = 2**64 - 1


class SequenceError(ValueError):
    """A sequential put Oxia refuses as a whole."""


def last_parts(records: SortedRecords, prefix: str) -> list[str]:
    below = records.floor(keys.sequence_key(prefix, [_MAX]), inclusive=False)
    if below is None or not below[0].startswith(prefix):
        return []
    return below[0][len(prefix) :].split("-")[1:]


def next_key(last: list[str], prefix: str, deltas: list[int]) -> tuple[str, list[str]]:
    """The new key after a sequence whose last parts are `last`, and its own parts."""
    if deltas[0] == 0:
        raise SequenceError("the first sequence delta must be greater than 0")
    if len(last) > len(deltas):
        raise SequenceError("the put has fewer sequence deltas than the sequence has parts")
    values = []
    for i, delta in enumerate(deltas):
        part = last[i] if i < len(last) else "0"
        if not part.isdigit():
            raise SequenceError(f"the last key of sequence {prefix!r} has a part {part!r}")
        values.append(int(part) + delta)
    new = keys.sequence_key(prefix, values)
    return new, new[len(prefix) :].split("-")[1:]


def last_key(records: SortedRecords, prefix: str) -> str | None:
    """The greatest key in [prefix-0…0, prefix-<2^63-1>): what a new follower of the
    sequence is told first."""
    low = keys.sequence_key(prefix, [0])
    below = records.floor(keys.sequence_key(prefix, [2**63 - 1]), inclusive=False)
    if below is None or keys.encode(below[0]) < keys.encode(low):
        return None
    return below[0]
