"""Settings of one reconciler analysis."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from services.core import durations
from services.core.errors import InvalidArgument

#: Shorter age windows are refused unless `allow_short_min_age` is set: a ledger's reference
#: is written after the ledger is created (rollover, cursor, schema, compaction), and a broker
#: stalled for hours between the two must not lose its new ledger.
MIN_AGE_FLOOR = timedelta(days=1)
DEFAULT_MIN_AGE = timedelta(days=3)


def parse_duration(text: str, field: str = "duration") -> timedelta:
    """`text` in the suite's one duration syntax (`services.core.durations`: 90s, 1h30m, 3d,
    plain seconds), the same the services' `TOMBSTONE_*` durations use."""
    try:
        return durations.parse_duration(text)
    except ValueError as exc:
        raise InvalidArgument(field, f"{text!r}: {exc}") from None


@dataclass(frozen=True)
class AnalyzeConfig:
    """What counts as an orphan, and when the run refuses to propose deletions."""

    cluster: str
    """The Pulsar cluster name: the extract's must be it; offloaded objects naming another
    cluster are excluded (a shared bucket), never proposed."""
    min_age: timedelta = DEFAULT_MIN_AGE
    """Unreferenced ledgers and objects younger than this are `too_young`, never deleted."""
    allow_short_min_age: bool = False
    """Accept a `min_age` below MIN_AGE_FLOOR (logged loudly)."""
    max_orphan_share: float = 0.2
    """Refuse when more than this share of Pulsar-owned ledgers (or objects) is orphaned."""
    inactive_cursor_age: timedelta = timedelta(days=30)
    """Cursors whose lastActive is older than this are reported as inactive."""
    dormant_topic_age: timedelta = timedelta(days=7)
    """Topics whose znode is older than this and show no sign of being loaded are reported."""
    deleted_namespaces: tuple[str, ...] = ()
    """Namespaces without policies here that the operator names as deleted
    (`--deleted-namespace`): their unreferenced ledgers may be proposed instead of being
    set apart as `unknown_namespace` (a risky option: another cluster sharing the
    BookKeeper may hold a namespace of that name)."""

    def __post_init__(self) -> None:
        if not self.cluster:
            raise InvalidArgument("cluster", "the Pulsar cluster name is required")
        if self.min_age < MIN_AGE_FLOOR and not self.allow_short_min_age:
            raise InvalidArgument(
                "min_age",
                f"{self.min_age} is below the floor of {MIN_AGE_FLOOR}; "
                "pass the explicit override to use it",
            )
        if self.min_age < timedelta(0):
            raise InvalidArgument("min_age", "must not be negative")
        if not 0.0 <= self.max_orphan_share <= 1.0:
            raise InvalidArgument("max_orphan_share", "must be between 0 and 1")

    @property
    def min_age_ms(self) -> int:
        return int(self.min_age.total_seconds() * 1000)

    @property
    def below_floor(self) -> bool:
        """True when the override is in effect: callers must log it loudly."""
        return self.min_age < MIN_AGE_FLOOR
