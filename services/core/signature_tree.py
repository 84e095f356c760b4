"""One Ed25519 signature for a batch of PDLIs: a hash tree over their canonical encodings.

An Ed25519 signature costs the marker 35-40 µs and the verifier three times that, and
`cryptography` holds the GIL meanwhile, so one signature per PDLI would halve the marker's
rate and cut the verifier's several-fold (docs/benchmarks.md). Instead the marker signs the
root of a SHA-256 tree over the PDLIs it sends together (at most `MAX_LEAVES`), and each PDLI
carries the signature, its position and the sibling hashes up to the root: it still verifies
alone, and a verifier that has checked the root once checks the others by hashing.

    leaf  = SHA-256(0x00 || canonical bytes)      node = SHA-256(0x01 || left || right)
    A level with an odd count carries its last node up unchanged.
    signed message = b"tombstone/pdli-batch\\x00" || version || uint32 count || root
    signature field = Ed25519 signature (64) || uint32 index || uint32 count || siblings

The count is signed, so the tree's shape is fixed: a sibling list that does not fit the
index and count, or any changed byte, gives another root and fails. The leaf and node
prefixes keep a leaf from passing for an inner node.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

MAX_LEAVES = 64
"""Largest batch the marker signs at once: at most 6 sibling hashes (192 bytes) per PDLI."""
ACCEPTED_LEAVES = 4096
"""Largest batch a verifier accepts (a bound on the work a forged field can ask for), above
`MAX_LEAVES` so that a marker may sign larger batches without a verifier upgrade."""
VERSION = 1
_ROOT_PREFIX = b"tombstone/pdli-batch\x00" + bytes([VERSION])
_HEAD = struct.Struct(">II")
_HASH = 32
SIGNATURE = 64
HEADER = SIGNATURE + _HEAD.size


LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_sha256 = hashlib.sha256


def leaf_hash(canonical: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + canonical).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def root_message(count: int, root: bytes) -> bytes:
    """The bytes the Ed25519 signature covers."""
    return _ROOT_PREFIX + struct.pack(">I", count) + root


def build(leaves: Sequence[bytes]) -> tuple[bytes, list[bytes]]:
    """The root of `leaves` (leaf hashes) and, for each leaf, its sibling hashes joined."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        level = levels[-1]
        # `_node` inline: no Python call per node.
        up = [
            _sha256(_NODE_PREFIX + level[i] + level[i + 1]).digest()
            for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            up.append(level[-1])
        levels.append(up)
    # A node's path is its sibling (none for a carried odd node) then its parent's path, so
    # one pass from the root down builds every leaf's path with one join per node.
    paths = [b""]
    for level in reversed(levels[:-1]):
        width = len(level)
        paths = [
            level[i ^ 1] + paths[i >> 1] if i ^ 1 < width else paths[i >> 1] for i in range(width)
        ]
    return levels[-1][0], paths


def encode(signature: bytes, index: int, count: int, path: bytes) -> bytes:
    return signature + encode_position(index, count) + path


def encode_position(index: int, count: int) -> bytes:
    """The index and count that follow the signature in the field."""
    return _HEAD.pack(index, count)


def root_of(leaf: bytes, blob: bytes) -> tuple[bytes, bytes] | None:
    """(signature, signed message) that `blob` claims for `leaf`; None if malformed."""
    if len(blob) < HEADER or (len(blob) - HEADER) % _HASH:
        return None
    index, count = _HEAD.unpack_from(blob, SIGNATURE)
    if not 0 <= index < count <= ACCEPTED_LEAVES:
        return None
    path = blob[HEADER:]
    node, used, width, position = leaf, 0, count, index
    while width > 1:
        sibling = position ^ 1
        if sibling < width:
            if used + _HASH > len(path):
                return None
            other = path[used : used + _HASH]
            used += _HASH
            node = _node(node, other) if position % 2 == 0 else _node(other, node)
        position, width = position // 2, (width + 1) // 2
    if used != len(path):
        return None
    return blob[:SIGNATURE], root_message(count, node)
