"""How the report writes numbers, durations, names and reasons (pure text, no I/O)."""

from __future__ import annotations

import math
import urllib.parse

#: Binary units: BookKeeper and S3 sizes are bytes, and operators compare them with `du`.
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DURATION_UNITS = (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0))

#: Why an item is (or is not) proposed, by finding kind (services.scan.analysis.classify).
KIND_REASONS = {
    "topic_gone": "its topic (managed ledger) no longer exists",
    "not_in_list": "its topic exists but no longer lists this ledger",
    "cursor_moved_on": "its cursor is gone or now keeps its position in another ledger",
    "schema_not_in_locator": "its schema's locator no longer lists it",
    "bk_copy_after_offload": "offloaded, and its topic marks the BookKeeper copy deleted",
    "offload_no_match": "no topic lists this ledger with this offload uuid",
    "too_young": "inside the age window: its reference may not be written yet",
    "in_use_open": "OPEN inside the age window and its owner exists: a rollover in progress",
    "unknown_ownership": "no Pulsar owner metadata: not Pulsar's to delete",
    "unreadable": "its metadata znode could not be decoded",
    "reference_unknown": "a compacted ledger of an active __compaction cursor whose live "
    "reference was not read, and not older than the reference the cursor znode persisted",
    "other_cluster": "excluded: the object belongs to another Pulsar cluster (shared bucket)",
    "noncanonical_name": "its owner's name is not canonical, so no PDLI can name it",
    "compacted_unreferenced": "its topic's __compaction cursor does not name this compacted "
    "ledger (moved on, or a compaction that never finished)",
    "bucket_unreferenced": "its subscription's cursor does not name this delayed-delivery "
    "bucket (merged or dropped, or a seal that never finished)",
    "neighbour_owner": "never proposed: its owner exists in another cluster sharing this "
    "BookKeeper",
    "unknown_namespace": "never proposed: its namespace does not exist here (another "
    "cluster's, or deleted: see --deleted-namespace)",
    "replicated_undeclared": "held back: its namespace replicates to a cluster not declared "
    "with --shared-cluster",
    "referenced": "referenced",
}
#: Reasons that replace the kind's when a deletable finding is not proposed after all.
HELD_BACK = "held back: another object of the same offload upload is not deletable"
REFUSED_RUN = "would be proposed, but the run refused"
#: An `other_cluster` item's reason is this followed by the cluster's name.
OTHER_CLUSTER_PREFIX = "excluded: belongs to cluster"
#: Appended to the reason of an object whose cluster was not read (`--no-head-objects`).
CLUSTER_UNKNOWN = "its cluster is unknown (pulsarclustername not read with HEAD)"


def human_bytes(value: float) -> str:
    """1536 → '1.5 KiB'; bytes stay whole."""
    unit, scaled = byte_unit(value)
    return f"{value:.0f} B" if unit == "B" else f"{scaled:.1f} {unit}"


def byte_unit(value: float) -> tuple[str, float]:
    """The largest binary unit in which `value` is at least 1, and the value in it."""
    scaled = float(value)
    for unit in BYTE_UNITS:
        if abs(scaled) < 1024 or unit == BYTE_UNITS[-1]:
            return unit, scaled
        scaled /= 1024
    raise AssertionError("unreachable")


def human_duration(seconds: float | None) -> str:
    """90061 → '1 d 1 h'; two units at most, rounded down; sub-second values in ms."""
    if seconds is None or math.isnan(seconds):
        return "unknown"
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    parts: list[str] = []
    rest = int(seconds)
    for unit, size in _DURATION_UNITS:
        amount, rest = divmod(rest, int(size))
        if amount or (parts and len(parts) < 2):
            parts.append(f"{amount} {unit}")
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if not p.startswith("0 ")) or "0 s"


def human_count(value: float) -> str:
    """12345 → '12,345'."""
    return f"{int(value):,}"


def plural(count: int, word: str, words: str | None = None) -> str:
    """'1 candidate', '2 candidates' (count written with thousands separators)."""
    return f"{human_count(count)} {word if count == 1 else (words or word + 's')}"


def decode_name(name: str | None) -> str:
    """A znode name as Pulsar means it: `Codec.decode` is java.net.URLDecoder (`%xx`, and
    `+` for a space). A malformed escape is shown as stored."""
    if not name:
        return ""
    try:
        return urllib.parse.unquote_plus(name, errors="strict")
    except UnicodeDecodeError:
        return name


def topic_of_ml(ml_name: str | None) -> str:
    """`t/ns/persistent/a%20b` → `persistent://t/ns/a b` (V1 names keep their cluster);
    anything else is only decoded."""
    if not ml_name:
        return ""
    parts = ml_name.split("/")
    for domain_at in (2, 3):
        if len(parts) == domain_at + 2 and parts[domain_at] in ("persistent", "non-persistent"):
            namespace = "/".join(parts[:domain_at])
            return f"{parts[domain_at]}://{namespace}/{decode_name(parts[-1])}"
    return decode_name(ml_name)


def zxid_text(zxid: int | None) -> str:
    """ZooKeeper's own notation: hex, epoch in the high 32 bits."""
    return "unknown" if zxid is None else f"0x{zxid:x}"


def kind_reason(kind: str | None, orphan_reason: str | None = None) -> str:
    """The reason text of a finding kind; a young orphan also says what it would be."""
    text = KIND_REASONS.get(kind or "", kind or "unknown")
    if kind in ("too_young", "replicated_undeclared") and orphan_reason:
        return f"{text} (else: {KIND_REASONS.get(orphan_reason, orphan_reason)})"
    return text
