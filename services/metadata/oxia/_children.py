"""Key ranges that hold a key's children, for one key and for many siblings at once.

Oxia orders keys by depth first (the count of `/`), then byte-wise with `/` above every
other byte (`common/compare/encode.go`, its "hierarchical" encoding; `devstack/oxia/keys.py`
models it). So `[p + "/", p + "//")` holds the keys one level below `p` and no others, and
for siblings (same parent) ordered as their children are, `a` first and `z` last,
`[a + "/", z + "//")` holds the children of `a`, of `z` and of every sibling between them,
all beginning with the parent's prefix: one list answers "which of these siblings have
children" for all of them, and the keys it returns that belong to siblings outside the set
are filtered out by their parent. Siblings are ordered by `name + "/"` in that byte order,
not by name: the children of `a` sort after those of `aa` (`/` is above `a`).

Grouping by parent keeps each range inside one directory: a range across directories would
also hold the children of every key in the directories between (by depth-first order, the
same depth), which for ledger keys are many levels of unrelated records to read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from services.metadata.oxia._watches import parent_of


def children_range(path: str) -> tuple[str, str]:
    """The range of `path`'s direct children."""
    base = "" if path == "/" else path
    return base + "/", base + "//"


@dataclass(frozen=True, slots=True)
class SiblingRange:
    """One list request covering the children of `members` (keys of one parent)."""

    start: str
    end: str
    members: frozenset[str]

    def with_children(self, listed: Iterable[str]) -> set[str]:
        """The members that are the parent of a key `listed` from this range."""
        return {parent_of(key) for key in listed} & self.members


def sibling_ranges(paths: Iterable[str]) -> list[SiblingRange]:
    """One range per parent of `paths` (valid absolute paths), covering their children."""
    by_parent: dict[str, set[str]] = {}
    for path in paths:
        # "/" has no parent and no siblings: its own group.
        by_parent.setdefault(parent_of(path) if path != "/" else "", set()).add(path)
    ranges = []
    for members in by_parent.values():
        start, _ = children_range(min(members, key=_children_order))
        _, end = children_range(max(members, key=_children_order))
        ranges.append(SiblingRange(start, end, frozenset(members)))
    return ranges


def _children_order(path: str) -> bytes:
    """Where `path`'s children sort among its siblings' (Oxia's bytes, `/` as 0xff)."""
    return (path + "/").encode().replace(b"/", b"\xff")
