"""The ranges of the Oxia adapter's batched children check, against Oxia's key order as the
devstack server models it (`devstack/oxia/keys.py`): every child of every member is in its
range, and the members found with children are exactly those that have some."""

from __future__ import annotations

import itertools
import random

from devstack.oxia.keys import encode
from services.metadata.oxia._children import children_range, sibling_ranges
from services.metadata.oxia._watches import parent_of

NAMES = ["a", "aa", "ab", "b", "a0", "z", "é"]
"""Names one of which is a prefix of others, and a byte above ASCII."""


def _keys() -> list[str]:
    """Every key up to three levels of `NAMES` below `/p`, and the root's children."""
    levels = [["/p"]]
    for _ in range(3):
        levels.append([f"{parent}/{name}" for parent in levels[-1] for name in NAMES])
    return [key for level in levels for key in level] + [f"/{name}" for name in NAMES]


def _in_range(key: str, start: str, end: str) -> bool:
    return encode(start) <= encode(key) < encode(end)


def test_one_key_s_range_holds_its_children_and_nothing_else():
    keys = _keys()
    for path in ["/", "/p", "/p/a", "/p/aa/b"]:
        start, end = children_range(path)
        held = {key for key in keys if _in_range(key, start, end)}
        assert held == {key for key in keys if key != "/" and parent_of(key) == path}


def test_a_batch_finds_exactly_the_members_with_children():
    keys = _keys()
    order = {key: encode(key) for key in keys}
    rng = random.Random(7)
    candidates = [key for key in keys if key.count("/") <= 3]
    for _ in range(150):
        stored = set(rng.sample(keys, len(keys) // 3))
        members = rng.sample(candidates, rng.randint(1, 12))
        expected = {m for m in members if any(parent_of(k) == m for k in stored if k != m)}
        found = set()
        for siblings in sibling_ranges(members):
            start, end = encode(siblings.start), encode(siblings.end)
            listed = [key for key in stored if start <= order[key] < end]
            found |= siblings.with_children(listed)
        assert found == expected


def test_members_of_one_parent_share_one_range():
    members = ["/p/b", "/p/a", "/p/aa", "/q/a", "/p/z"]
    ranges = sibling_ranges(members)
    assert sorted(len(r.members) for r in ranges) == [1, 4]
    (shared,) = [r for r in ranges if len(r.members) == 4]
    # "/p/aa"'s children sort before "/p/a"'s ("/" is above every other byte).
    assert (shared.start, shared.end) == ("/p/aa/", "/p/z//")
    assert list(itertools.chain.from_iterable(r.members for r in ranges)).count("/q/a") == 1
