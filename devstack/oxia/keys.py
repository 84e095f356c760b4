"""Oxia's hierarchical key order, and the shape of sequential keys.

Oxia stores a key as a 2-byte big-endian count of its `/` separators followed by the key with
each `/` replaced by 0xff (`common/compare/encode.go`, "hierarchical" encoder). Keys therefore
sort first by depth, then byte-wise with `/` above every other byte: the children of
`/a/` are stored together and away from the grandchildren. Ranges `[start, end)` are compared
in this encoded form, so a range only holds keys of the depths between its bounds' depths.
"""

from __future__ import annotations

#: Keys Oxia keeps for itself (sessions, indexes); clients may not write them.
INTERNAL_PREFIX = "__oxia/"
_SEPARATOR = 0xFF
_MAX_DEPTH = (1 << 15) - 1
_INTERNAL_BIT = 1 << 15

#: Width of one component of a sequential key: `prefix-00000000000000000001`.
SEQUENCE_WIDTH = 20


def encode(key: str) -> bytes:
    """The bytes Oxia orders `key` by."""
    raw = key.encode()
    depth = raw.count(b"/")
    if depth:
        # A doubled trailing separator does not open a new level (as in Oxia).
        if raw.endswith(b"//"):
            depth -= 1
        depth = min(depth, _MAX_DEPTH)
        if key.startswith(INTERNAL_PREFIX):
            depth |= _INTERNAL_BIT
        raw = raw.replace(b"/", bytes([_SEPARATOR]))
    return depth.to_bytes(2, "big") + raw


def sequence_key(prefix: str, components: list[int]) -> str:
    """`prefix-<c1>-<c2>…`, each component zero-padded to 20 digits."""
    return prefix + "".join(f"-{c:0{SEQUENCE_WIDTH}d}" for c in components)
