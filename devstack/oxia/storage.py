"""One shard's records, kept in Oxia's hierarchical key order (see `keys`)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from .keys import encode


@dataclass
class Record:
    """A stored value and the state Oxia reports as its `Version`."""

    value: bytes
    version_id: int
    modifications_count: int
    created_ms: int
    modified_ms: int
    session_id: int | None = None
    client_identity: str | None = None
    #: (index name, secondary key) pairs written with the record.
    secondary_indexes: list[tuple[str, str]] = field(default_factory=list)


class SortedRecords:
    """Records by key, with the ordered look-ups Oxia answers (floor, ceiling, ranges)."""

    def __init__(self) -> None:
        self._order: list[bytes] = []
        self._by_encoded: dict[bytes, tuple[str, Record]] = {}

    def __len__(self) -> int:
        return len(self._order)

    def get(self, key: str) -> Record | None:
        found = self._by_encoded.get(encode(key))
        return found[1] if found else None

    def put(self, key: str, record: Record) -> None:
        encoded = encode(key)
        if encoded not in self._by_encoded:
            bisect.insort(self._order, encoded)
        self._by_encoded[encoded] = (key, record)

    def delete(self, key: str) -> Record | None:
        encoded = encode(key)
        found = self._by_encoded.pop(encoded, None)
        if found is None:
            return None
        del self._order[bisect.bisect_left(self._order, encoded)]
        return found[1]

    def floor(self, key: str, *, inclusive: bool) -> tuple[str, Record] | None:
        """The greatest key at or below `key` (strictly below unless `inclusive`)."""
        encoded = encode(key)
        cut = bisect.bisect_right if inclusive else bisect.bisect_left
        i = cut(self._order, encoded)
        return self._by_encoded[self._order[i - 1]] if i > 0 else None

    def ceiling(self, key: str, *, inclusive: bool) -> tuple[str, Record] | None:
        """The least key at or above `key` (strictly above unless `inclusive`)."""
        encoded = encode(key)
        cut = bisect.bisect_left if inclusive else bisect.bisect_right
        i = cut(self._order, encoded)
        return self._by_encoded[self._order[i]] if i < len(self._order) else None

    def range(self, start: str, end: str) -> list[tuple[str, Record]]:
        """Records with start <= key < end, in order (a copy: the caller may delete them)."""
        lo = bisect.bisect_left(self._order, encode(start))
        hi = bisect.bisect_left(self._order, encode(end))
        return [self._by_encoded[encoded] for encoded in self._order[lo:hi]]

    def below(self, key: str) -> Iterator[tuple[str, Record]]:
        """Records with keys strictly below `key`, greatest first (lazily: do not mutate
        while iterating)."""
        i = bisect.bisect_left(self._order, encode(key))
        for encoded in reversed(self._order[:i]):
            yield self._by_encoded[encoded]


class SecondaryIndex:
    """One named index: entries (secondary key, primary key), ordered by secondary key
    (in the hierarchical order) and then primary key, as Oxia's
    `__oxia/idx/<name>/<secondary>\\x01<primary>` keys are."""

    def __init__(self) -> None:
        self._entries: list[tuple[bytes, bytes, str, str]] = []

    def add(self, secondary: str, primary: str) -> None:
        bisect.insort(self._entries, (encode(secondary), encode(primary), secondary, primary))

    def remove(self, secondary: str, primary: str) -> None:
        entry = (encode(secondary), encode(primary), secondary, primary)
        i = bisect.bisect_left(self._entries, entry)
        if i < len(self._entries) and self._entries[i] == entry:
            del self._entries[i]

    def range(self, start: str, end: str) -> list[tuple[str, str]]:
        """(secondary, primary) pairs with start <= secondary < end."""
        lo = bisect.bisect_left(self._entries, (encode(start),))
        hi = bisect.bisect_left(self._entries, (encode(end),))
        return [(e[2], e[3]) for e in self._entries[lo:hi]]

    def first_at_or_above(self, secondary: str, *, inclusive: bool) -> tuple[str, str] | None:
        target = encode(secondary)
        i = bisect.bisect_left(self._entries, (target,))
        while i < len(self._entries) and not inclusive and self._entries[i][0] == target:
            i += 1
        return (self._entries[i][2], self._entries[i][3]) if i < len(self._entries) else None

    def last_at_or_below(self, secondary: str, *, inclusive: bool) -> tuple[str, str] | None:
        target = encode(secondary)
        i = bisect.bisect_left(self._entries, (target,))
        if inclusive:
            while i < len(self._entries) and self._entries[i][0] == target:
                i += 1
        if i == 0:
            return None
        # Among the entries of one secondary key the first primary key is reported, as an
        # index scan positioned on that secondary key would.
        last = self._entries[i - 1][0]
        j = bisect.bisect_left(self._entries, (last,))
        return self._entries[j][2], self._entries[j][3]
