"""BookKeeper ledger znode paths: id → path, path → id, and which root children are ledgers.

Restates `StringUtils` and the ZK ledger managers of BookKeeper (see the formats reference,
section 1). The default layout is the hybrid hierarchical one: ids below 2147483647 use the
short 2-4-4 path (`00/0000/L0001`), larger ids the long 3-4-4-4-4 path.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from services.core.errors import InvalidArgument
from services.metadata.errors import CorruptMetadata

DEFAULT_LEDGERS_ROOT = "/ledgers"
MAX_LEDGER_ID = 2**63 - 1
# Integer.MAX_VALUE: the first id that the hybrid layout stores under the long path.
HYBRID_LONG_THRESHOLD = 2**31 - 1
LEDGER_NODE_PREFIX = "L"

SPECIAL_ZNODES = frozenset(
    {"available", "cookies", "LAYOUT", "INSTANCEID", "underreplication", "idgen", "idgen-long"}
)
ID_GEN_PREFIX = "ID-"
LAYOUT_ZNODE = "LAYOUT"
LAYOUT_FORMAT_VERSION = 2

_SHORT_PARENT = re.compile(r"\d{2}")
_LONG_PARENT = re.compile(r"\d{3}")
_HYBRID_PARENT = re.compile(r"\d{2,3}")
_DIGITS = re.compile(r"\d+")


class LedgerLayout(enum.Enum):
    """How ledger ids map to znode paths (the BookKeeper ledger manager in use)."""

    HIERARCHICAL = "hierarchical"
    """The default since BK 4.7 and what Pulsar's own driver always uses: short below
    2147483647, long from there on."""
    LONG_HIERARCHICAL = "longhierarchical"
    """Every id on the long 3-4-4-4-4 path."""
    LEGACY_HIERARCHICAL = "legacyhierarchical"
    """Every id on the short 2-4-4 path (ids ≥ 10^10 cannot be stored)."""
    FLAT = "flat"
    """`L%010d` directly under the root (pre-4.7 default)."""


def check_ledger_id(ledger_id: int, field: str = "ledger_id") -> int:
    """Return `ledger_id` if it is a valid (non-negative 64-bit) ledger id, else raise."""
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int):
        raise InvalidArgument(field, f"must be an integer, got {ledger_id!r}")
    if not 0 <= ledger_id <= MAX_LEDGER_ID:
        raise InvalidArgument(field, f"must be in [0, 2^63-1], got {ledger_id}")
    return ledger_id


def short_hierarchical_path(ledger_id: int) -> str:
    """`%010d` split 2-4-4 with `L` before the last part: 1 → `00/0000/L0001`."""
    digits = f"{check_ledger_id(ledger_id):010d}"
    if len(digits) > 10:
        raise InvalidArgument("ledger_id", f"{ledger_id} does not fit the short (2-4-4) layout")
    return f"{digits[0:2]}/{digits[2:6]}/{LEDGER_NODE_PREFIX}{digits[6:10]}"


def long_hierarchical_path(ledger_id: int) -> str:
    """`%019d` split 3-4-4-4-4 with `L` before the last part."""
    d = f"{check_ledger_id(ledger_id):019d}"
    return f"{d[0:3]}/{d[3:7]}/{d[7:11]}/{d[11:15]}/{LEDGER_NODE_PREFIX}{d[15:19]}"


def hybrid_hierarchical_path(ledger_id: int) -> str:
    """Short path below Integer.MAX_VALUE, long path from it on (BK's default layout)."""
    if check_ledger_id(ledger_id) < HYBRID_LONG_THRESHOLD:
        return short_hierarchical_path(ledger_id)
    return long_hierarchical_path(ledger_id)


def flat_path(ledger_id: int) -> str:
    """`L%010d` (the flat layout)."""
    return f"{LEDGER_NODE_PREFIX}{check_ledger_id(ledger_id):010d}"


def hierarchical_ledger_id(relative_path: str) -> int:
    """Parse a path relative to the root back to an id (`StringUtils.stringToHierarchicalLedgerId`).

    The parts are concatenated after dropping the leaf's `L`; both 3-part (short) and 5-part
    (long) paths parse this way. Anything else is an `InvalidArgument` naming `path`.
    """
    parts = relative_path.strip("/").split("/")
    if len(parts) not in (3, 5):
        raise InvalidArgument("path", f"{relative_path!r} is not a 3- or 5-level ledger path")
    leaf = parts[-1]
    if not leaf.startswith(LEDGER_NODE_PREFIX):
        raise InvalidArgument("path", f"leaf of {relative_path!r} does not start with 'L'")
    digits = [*parts[:-1], leaf[len(LEDGER_NODE_PREFIX) :]]
    if not all(_DIGITS.fullmatch(part) for part in digits):
        raise InvalidArgument("path", f"{relative_path!r} has non-digit parts")
    value = int("".join(digits))
    if value > MAX_LEDGER_ID:
        raise InvalidArgument("path", f"{relative_path!r} is beyond the 64-bit id range")
    return value


def flat_ledger_id(name: str) -> int:
    """Parse a flat-layout leaf name `L%010d`."""
    if not name.startswith(LEDGER_NODE_PREFIX) or not _DIGITS.fullmatch(name[1:]):
        raise InvalidArgument("path", f"{name!r} is not a flat ledger znode name")
    return check_ledger_id(int(name[1:]), "path")


def is_special_znode(name: str) -> bool:
    """Root children that are never ledger buckets (`AbstractZkLedgerManager.isSpecialZnode`)."""
    return name in SPECIAL_ZNODES or name.startswith(ID_GEN_PREFIX)


def normalize_root(root: str) -> str:
    """A root path in canonical form: leading `/`, no trailing `/`."""
    if not root.startswith("/") or "//" in root:
        raise InvalidArgument("root", f"{root!r} is not an absolute znode path")
    stripped = root.rstrip("/")
    if not stripped:
        raise InvalidArgument("root", "the ledgers root cannot be '/'")
    return stripped


@dataclass(frozen=True)
class LedgerPaths:
    """Path rules of one ledgers root under one layout."""

    root: str = DEFAULT_LEDGERS_ROOT
    layout: LedgerLayout = LedgerLayout.HIERARCHICAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", normalize_root(self.root))

    def relative_path(self, ledger_id: int) -> str:
        """The ledger's path below the root, per the layout."""
        match self.layout:
            case LedgerLayout.HIERARCHICAL:
                return hybrid_hierarchical_path(ledger_id)
            case LedgerLayout.LONG_HIERARCHICAL:
                return long_hierarchical_path(ledger_id)
            case LedgerLayout.LEGACY_HIERARCHICAL:
                return short_hierarchical_path(ledger_id)
            case LedgerLayout.FLAT:
                return flat_path(ledger_id)

    def ledger_path(self, ledger_id: int) -> str:
        """The full znode path of a ledger's metadata."""
        return f"{self.root}/{self.relative_path(ledger_id)}"

    def ledger_id(self, path: str) -> int:
        """The ledger id a full znode path names; `InvalidArgument` if it names none."""
        prefix = self.root + "/"
        if not path.startswith(prefix):
            raise InvalidArgument("path", f"{path!r} is not under {self.root}")
        relative = path[len(prefix) :]
        if self.layout is LedgerLayout.FLAT:
            return flat_ledger_id(relative)
        return hierarchical_ledger_id(relative)

    def is_ledger_parent(self, name: str) -> bool:
        """Whether a root child may hold ledgers (special znodes and other names do not)."""
        if is_special_znode(name):
            return False
        match self.layout:
            case LedgerLayout.HIERARCHICAL:
                return _HYBRID_PARENT.fullmatch(name) is not None
            case LedgerLayout.LONG_HIERARCHICAL:
                return _LONG_PARENT.fullmatch(name) is not None
            case LedgerLayout.LEGACY_HIERARCHICAL:
                return _SHORT_PARENT.fullmatch(name) is not None
            case LedgerLayout.FLAT:
                return False

    def depth(self, top_level: str) -> int:
        """Levels below the root down to the leaves, for a given top-level directory."""
        if self.layout is LedgerLayout.FLAT:
            return 1
        return 3 if len(top_level) == 2 else 5


_BK_META = "org.apache.bookkeeper.meta."
_FACTORIES = {
    LedgerLayout.HIERARCHICAL: _BK_META + "HierarchicalLedgerManagerFactory",
    LedgerLayout.LONG_HIERARCHICAL: _BK_META + "LongHierarchicalLedgerManagerFactory",
    LedgerLayout.LEGACY_HIERARCHICAL: _BK_META + "LegacyHierarchicalLedgerManagerFactory",
    LedgerLayout.FLAT: _BK_META + "FlatLedgerManagerFactory",
}
_LAYOUTS = {factory: layout for layout, factory in _FACTORIES.items()}


def layout_text(layout: LedgerLayout) -> bytes:
    """The `LAYOUT` znode content BookKeeper writes: `2\n<factoryClass>:1`."""
    return f"{LAYOUT_FORMAT_VERSION}\n{_FACTORIES[layout]}:1".encode()


def parse_layout(data: bytes, *, path: str) -> LedgerLayout:
    """The layout a `LAYOUT` znode names (`CorruptMetadata` for unknown or garbled content).

    Pulsar's own ledger manager factory always uses the hybrid (hierarchical) paths.
    """
    lines = data.decode("utf-8", errors="replace").splitlines()
    if len(lines) < 2 or not lines[0].strip().isdigit():
        raise CorruptMetadata(path, "bad LAYOUT: expected '<version>\\n<factory>:<version>'")
    factory = lines[1].split(":", 1)[0].strip()
    if factory.endswith("PulsarLedgerManagerFactory"):
        return LedgerLayout.HIERARCHICAL
    if factory not in _LAYOUTS:
        raise CorruptMetadata(path, f"unsupported ledger manager factory {factory!r}")
    return _LAYOUTS[factory]


@dataclass(frozen=True)
class LedgerLocations:
    """Every path a ledger id can have under the layouts in play on one root.

    Pulsar ≥ 2.10's own driver writes the hybrid path whatever `LAYOUT` says, while bookies
    and clients configured with `zk+longhierarchical://` or a flat layout write `LAYOUT`'s
    path (formats reference §1.1). So a ledger may sit at either: absence is proved only when
    it is absent at each of them.
    """

    root: str = DEFAULT_LEDGERS_ROOT
    layout: LedgerLayout = LedgerLayout.HIERARCHICAL
    """What `<root>/LAYOUT` names."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", normalize_root(self.root))

    @property
    def layout_path(self) -> str:
        return f"{self.root}/{LAYOUT_ZNODE}"

    def _rules(self) -> tuple[LedgerPaths, ...]:
        hybrid = LedgerPaths(self.root, LedgerLayout.HIERARCHICAL)
        if self.layout is LedgerLayout.HIERARCHICAL:
            return (hybrid,)
        return (LedgerPaths(self.root, self.layout), hybrid)

    def paths(self, ledger_id: int) -> tuple[str, ...]:
        """The distinct paths of `ledger_id`, `LAYOUT`'s first (ids the legacy layout cannot
        store have only the hybrid path)."""
        found: list[str] = []
        for rules in self._rules():
            try:
                path = rules.ledger_path(ledger_id)
            except InvalidArgument:
                if rules.layout is not LedgerLayout.LEGACY_HIERARCHICAL:
                    raise
                continue
            if path not in found:
                found.append(path)
        return tuple(found)

    def ledger_id(self, path: str) -> int:
        """The id `path` names if it is one of that id's paths here; else `InvalidArgument`."""
        for rules in self._rules():
            try:
                ledger_id = rules.ledger_id(path)
            except InvalidArgument:
                continue
            if path in self.paths(ledger_id):
                return ledger_id
        raise InvalidArgument("path", f"{path!r} is not a ledger path under {self.root}")

    def parents(self, path: str) -> tuple[str, ...]:
        """The directory znodes between a ledger path and the root, deepest first: the only
        ones an empty-parent sweep may remove (never the root, nothing above it)."""
        self.ledger_id(path)
        relative = path[len(self.root) + 1 :].split("/")
        return tuple(
            f"{self.root}/{'/'.join(relative[:depth])}" for depth in range(len(relative) - 1, 0, -1)
        )
