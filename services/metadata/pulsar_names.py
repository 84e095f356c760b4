"""Pulsar names and their metadata-store paths: topics, managed ledgers, cursors, schemas.

Restates `NamedEntity`, `NamespaceName`, `TopicName` and `Codec` (formats reference, sections
5.1, 6 and 8.2). Local names are encoded with Java's `URLEncoder` rules (space → `+`; only
`A-Za-z0-9.-*_` kept, every other byte of the UTF-8 form as an uppercase `%XX`).

Every name that reaches ZooKeeper, a filesystem or S3 goes through the checks here, and a name
is accepted only in the one form Pulsar itself writes (its *canonical* form). Anything else is
rejected with `InvalidArgument` naming the field, never normalised into another name: a
normalised alias (`t/ns/./persistent/x`, `t/ns/persistent/x/`, `%2e%2e`) would pass the
in-use check on one owner while a filesystem or key built from it named another.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from dataclasses import dataclass

from services.core.errors import InvalidArgument

MANAGED_LEDGERS_ROOT = "/managed-ledgers"
SCHEMAS_ROOT = "/schemas"
PARTITIONED_TOPICS_ROOT = "/admin/partitioned-topics"
PERSISTENT = "persistent"
NON_PERSISTENT = "non-persistent"
DOMAINS = (PERSISTENT, NON_PERSISTENT)
PARTITION_SUFFIX = "-partition-"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"

MAX_ENTITY_LENGTH = 255
"""Longest tenant, cluster or namespace name: one filesystem name (NAME_MAX)."""
MAX_ENCODED_LENGTH = 2048
"""Longest encoded local topic name or cursor name (Pulsar sets no limit; ZooKeeper's packet
size does, far above this)."""

# NamedEntity.checkName: `^[-=:.\w]*$` with Java's ASCII-only `\w` (Python's `\w` would also
# take every Unicode letter). NamespaceName adds "not empty".
_NAMED_ENTITY = re.compile(r"[-=:.A-Za-z0-9_]+")
# What URLEncoder.encode(UTF-8) can produce: kept characters, `+`, and uppercase escapes.
_URL_ENCODED = re.compile(r"(?:[A-Za-z0-9.*_+-]|%[0-9A-F]{2})+")
_DOT_SEGMENTS = (".", "..")
_SEPARATORS = ("/", "\\")
# Java's Integer.parseInt accepts up to 2^31-1; "-partition-01" is not a partition (no
# leading zeros), nor is a negative or oversized number.
_PARTITION_NUMBER = re.compile(r"0|[1-9][0-9]{0,9}")
_MAX_PARTITION = 2**31 - 1


def java_url_encode(text: str) -> str:
    """`URLEncoder.encode(text, UTF_8)`: space → `+`, `*` kept, `~` escaped."""
    return urllib.parse.quote_plus(text, safe="*").replace("~", "%7E")


def java_url_decode(text: str, field: str = "name") -> str:
    """`URLDecoder.decode(text, UTF_8)`; malformed escapes raise `InvalidArgument`."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise InvalidArgument(field, f"{text!r} has a malformed %-escape")
    try:
        return urllib.parse.unquote_plus(text, errors="strict")
    except UnicodeDecodeError as e:
        raise InvalidArgument(field, f"{text!r} does not decode to UTF-8") from e


def _is_control(char: str) -> bool:
    # C0, DEL and C1 (NUL included); lone surrogates have no UTF-8 form at all.
    return unicodedata.category(char) in ("Cc", "Cs")


def check_named_entity(value: str, field: str) -> str:
    """A tenant, namespace or cluster name: `[-=:.A-Za-z0-9_]{1,255}`, not `.` or `..`.

    Pulsar's own pattern admits `.` and `..`; ZooKeeper refuses such path segments, so no
    real owner has them, and a filesystem path would resolve them into another directory.
    """
    if not isinstance(value, str) or not _NAMED_ENTITY.fullmatch(value):
        raise InvalidArgument(field, f"{value!r} is not a valid name ([-=:.A-Za-z0-9_]+)")
    if value in _DOT_SEGMENTS:
        raise InvalidArgument(field, f"{value!r} is a dot segment")
    if len(value) > MAX_ENTITY_LENGTH:
        raise InvalidArgument(field, f"is longer than {MAX_ENTITY_LENGTH} characters")
    return value


def check_local_name(value: str, field: str) -> str:
    """A decoded local topic (or subscription) name: non-empty, not `.` or `..`, no `/`, `\\`
    or control character (NUL included)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(field, "local name is empty")
    if value in _DOT_SEGMENTS:
        raise InvalidArgument(field, f"{value!r} is a dot segment")
    bad = next((c for c in value if c in _SEPARATORS or _is_control(c)), None)
    if bad is not None:
        raise InvalidArgument(field, f"{value!r} contains {bad!r} (separator or control)")
    return value


def check_encoded_name(value: str, field: str) -> str:
    """A URL-encoded name segment exactly as `Codec.encode` writes it (local topic names,
    subscription cursors, a schema id's topic part).

    Only the canonical encoding is accepted (uppercase escapes, no escape of a character the
    encoder keeps, `+` for space), and its decoding must be a valid local name: so no escape
    decodes to a separator, a dot segment or a control character.
    """
    if not isinstance(value, str) or not value:
        raise InvalidArgument(field, "must be a non-empty name")
    if len(value) > MAX_ENCODED_LENGTH:
        raise InvalidArgument(field, f"is longer than {MAX_ENCODED_LENGTH} characters")
    if not _URL_ENCODED.fullmatch(value):
        raise InvalidArgument(field, f"{value!r} is not a URL-encoded name")
    decoded = java_url_decode(value, field)
    check_local_name(decoded, field)
    if java_url_encode(decoded) != value:
        raise InvalidArgument(
            field, f"{value!r} is not the canonical encoding {java_url_encode(decoded)!r}"
        )
    return value


def check_cursor_name(value: str, field: str = "cursor_name") -> str:
    """A cursor znode name: an encoded subscription (`Codec.encode`), or a replicator cursor
    `pulsar.repl.<cluster>`, which Pulsar opens unencoded (cluster names may hold `:`, `=`)."""
    if isinstance(value, str) and _NAMED_ENTITY.fullmatch(value):
        return check_named_entity(value, field)
    return check_encoded_name(value, field)


def partition_index_of(local_name: str) -> int:
    """`TopicName.getPartitionIndex`: the `-partition-<n>` number, or -1."""
    at = local_name.rfind(PARTITION_SUFFIX)
    if at < 0:
        return -1
    suffix = local_name[at + len(PARTITION_SUFFIX) :]
    if not _PARTITION_NUMBER.fullmatch(suffix) or int(suffix) > _MAX_PARTITION:
        return -1
    return int(suffix)


@dataclass(frozen=True)
class TopicName:
    """A parsed topic name. `cluster` is set only for legacy (V1) names."""

    domain: str
    tenant: str
    namespace: str
    local_name: str
    cluster: str | None = None

    @classmethod
    def parse(cls, name: str) -> TopicName:
        """Parse `persistent://t/ns/x`, `t/ns/x`, a bare `x` (public/default) or a V1 name."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("topic", "must be a non-empty string")
        domain, sep, rest = name.partition("://")
        if not sep:
            domain, rest = PERSISTENT, name
            if "/" not in name:
                rest = f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{name}"
        if domain not in DOMAINS:
            raise InvalidArgument("topic", f"unknown domain {domain!r} in {name!r}")
        parts = rest.split("/", 3)
        if len(parts) == 3:
            topic = cls(domain, parts[0], parts[1], parts[2])
        elif len(parts) == 4:
            topic = cls(domain, parts[0], parts[2], parts[3], cluster=parts[1])
        else:
            raise InvalidArgument("topic", f"{name!r} needs tenant/namespace/topic")
        topic.validate()
        return topic

    def validate(self) -> None:
        """Raise `InvalidArgument` naming the first malformed part."""
        check_named_entity(self.tenant, "tenant")
        check_named_entity(self.namespace, "namespace")
        if self.cluster is not None:
            check_named_entity(self.cluster, "cluster")
        check_local_name(self.local_name, "topic")
        if len(self.encoded_local_name) > MAX_ENCODED_LENGTH:
            raise InvalidArgument("topic", f"local name encodes to over {MAX_ENCODED_LENGTH}")
        if self.domain not in DOMAINS:
            raise InvalidArgument("domain", f"unknown domain {self.domain!r}")

    @property
    def namespace_portion(self) -> str:
        """`tenant/ns`, or `tenant/cluster/ns` for V1 names."""
        if self.cluster is None:
            return f"{self.tenant}/{self.namespace}"
        return f"{self.tenant}/{self.cluster}/{self.namespace}"

    @property
    def encoded_local_name(self) -> str:
        return java_url_encode(self.local_name)

    @property
    def partition_index(self) -> int:
        """The partition number, or -1 when the name is not a partition."""
        return partition_index_of(self.local_name)

    @property
    def base_local_name(self) -> str:
        """The local name with a `-partition-<n>` suffix removed."""
        if self.partition_index < 0:
            return self.local_name
        return self.local_name[: self.local_name.rfind(PARTITION_SUFFIX)]

    def __str__(self) -> str:
        return f"{self.domain}://{self.namespace_portion}/{self.local_name}"

    @property
    def managed_ledger_name(self) -> str:
        """`TopicName.getPersistenceNamingEncoding()`: `t/ns/persistent/<encoded local>`."""
        return f"{self.namespace_portion}/{self.domain}/{self.encoded_local_name}"

    @property
    def schema_id(self) -> str:
        """`TopicName.getSchemaName()`: no domain, partition suffix stripped."""
        return f"{self.namespace_portion}/{java_url_encode(self.base_local_name)}"


def managed_ledger_name(topic: str) -> str:
    """The ML name of a persistent topic, e.g. `t/ns/persistent/my+topic`."""
    parsed = TopicName.parse(topic)
    if parsed.domain != PERSISTENT:
        raise InvalidArgument("topic", f"{topic!r} is not persistent: it has no managed ledger")
    return parsed.managed_ledger_name


def topic_from_managed_ledger_name(ml_name: str) -> TopicName:
    """Invert `managed_ledger_name`: `t/ns/persistent/<enc>` (or the V1 5-part form)."""
    parts = check_managed_ledger_name(ml_name).split("/")
    local = java_url_decode(parts[-1], "ml_name")
    if len(parts) == 4:
        return TopicName(parts[2], parts[0], parts[1], local)
    return TopicName(parts[3], parts[0], parts[2], local, cluster=parts[1])


def schema_id_of(topic: str) -> str:
    """The schema id shared by all partitions and domains of a topic."""
    return TopicName.parse(topic).schema_id


def _check_namespace_parts(parts: list[str], field: str) -> None:
    """tenant/ns or tenant/cluster/ns, each a valid, non-dot named entity."""
    for part in parts:
        try:
            check_named_entity(part, field)
        except InvalidArgument as e:
            raise InvalidArgument(field, f"{'/'.join(parts)!r}: {e.problem}") from e


def check_managed_ledger_name(ml_name: str) -> str:
    """`tenant/ns/persistent/<encoded local>` or `tenant/cluster/ns/persistent/<encoded>`,
    exactly as `getPersistenceNamingEncoding` writes it (no empty, dot or extra segment)."""
    field = "ml_name"
    if not isinstance(ml_name, str):
        raise InvalidArgument(field, "must be a string")
    parts = ml_name.split("/")
    if len(parts) not in (4, 5):
        raise InvalidArgument(field, f"{ml_name!r} needs tenant/namespace/persistent/topic")
    _check_namespace_parts(parts[:-2], field)
    if parts[-2] != PERSISTENT:
        raise InvalidArgument(field, f"{ml_name!r}: domain must be {PERSISTENT!r}")
    try:
        check_encoded_name(parts[-1], field)
    except InvalidArgument as e:
        raise InvalidArgument(field, f"{ml_name!r}: topic part {e.problem}") from e
    return ml_name


def managed_ledger_path(ml_name: str) -> str:
    """`/managed-ledgers/<mlName>`."""
    return f"{MANAGED_LEDGERS_ROOT}/{check_managed_ledger_name(ml_name)}"


def cursor_path(ml_name: str, cursor_name: str) -> str:
    """`/managed-ledgers/<mlName>/<cursor>`; `cursor_name` is the encoded name as stored."""
    return f"{managed_ledger_path(ml_name)}/{check_cursor_name(cursor_name, 'cursor_name')}"


def check_schema_id(schema_id: str) -> str:
    """`tenant/ns/<encoded base topic>` (or with a cluster for V1), as `getSchemaName` writes
    it: canonical parts, and no `-partition-<n>` suffix (the base topic's name is used)."""
    field = "schema_id"
    if not isinstance(schema_id, str):
        raise InvalidArgument(field, "must be a string")
    parts = schema_id.split("/")
    if len(parts) not in (3, 4):
        raise InvalidArgument(field, f"{schema_id!r} needs tenant/namespace/topic")
    _check_namespace_parts(parts[:-1], field)
    try:
        check_encoded_name(parts[-1], field)
    except InvalidArgument as e:
        raise InvalidArgument(field, f"{schema_id!r}: topic part {e.problem}") from e
    if partition_index_of(java_url_decode(parts[-1], field)) >= 0:
        raise InvalidArgument(field, f"{schema_id!r} names a partition, not the base topic")
    return schema_id


def schema_path(schema_id: str) -> str:
    """`/schemas/<schemaId>`."""
    return f"{SCHEMAS_ROOT}/{check_schema_id(schema_id)}"


def partitioned_topic_path(topic: str) -> str:
    """`/admin/partitioned-topics/<tenant>/<ns>/<domain>/<encodedLocal>` of the base topic.

    A partition's `-partition-<n>` suffix is stripped: the metadata (with the partition
    count) belongs to the partitioned topic, not to each partition.
    """
    parsed = TopicName.parse(topic)
    encoded = java_url_encode(parsed.base_local_name)
    return f"{PARTITIONED_TOPICS_ROOT}/{parsed.namespace_portion}/{parsed.domain}/{encoded}"
