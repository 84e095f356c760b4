"""Pulsar names and their metadata-store paths: topics, managed ledgers, cursors, schemas.

Restates `TopicName` and `Codec` (formats reference, sections 5.1, 6 and 8.2). Local names
are encoded with Java's `URLEncoder` rules (space → `+`; only `A-Za-z0-9.-*_` kept).
"""

from __future__ import annotations

import re
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

# Pulsar's NamedEntity rule for tenants, namespaces and clusters.
_NAMED_ENTITY = re.compile(r"[-=:.\w]+")


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


def check_named_entity(value: str, field: str) -> str:
    """A tenant, namespace or cluster name: non-empty, `[-=:.\\w]+`."""
    if not isinstance(value, str) or not _NAMED_ENTITY.fullmatch(value):
        raise InvalidArgument(field, f"{value!r} is not a valid name")
    return value


def check_segment(value: str, field: str) -> str:
    """A single path segment: non-empty, no `/`."""
    if not isinstance(value, str) or not value or "/" in value:
        raise InvalidArgument(field, f"{value!r} must be a non-empty name without '/'")
    return value


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
        if not self.local_name:
            raise InvalidArgument("topic", "local name is empty")
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
        at = self.local_name.rfind(PARTITION_SUFFIX)
        if at < 0:
            return -1
        suffix = self.local_name[at + len(PARTITION_SUFFIX) :]
        return int(suffix) if suffix.isascii() and suffix.isdigit() else -1

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


def check_managed_ledger_name(ml_name: str) -> str:
    """`tenant/ns/domain/local` or `tenant/cluster/ns/domain/local`, every part valid."""
    if not isinstance(ml_name, str):
        raise InvalidArgument("ml_name", "must be a string")
    parts = ml_name.split("/")
    if len(parts) not in (4, 5):
        raise InvalidArgument("ml_name", f"{ml_name!r} needs tenant/namespace/domain/topic")
    for part in parts[:-2]:
        check_named_entity(part, "ml_name")
    if parts[-2] not in DOMAINS:
        raise InvalidArgument("ml_name", f"{ml_name!r} has no persistent/non-persistent domain")
    if not parts[-1]:
        raise InvalidArgument("ml_name", f"{ml_name!r} has an empty topic part")
    return ml_name


def managed_ledger_path(ml_name: str) -> str:
    """`/managed-ledgers/<mlName>`."""
    return f"{MANAGED_LEDGERS_ROOT}/{check_managed_ledger_name(ml_name)}"


def cursor_path(ml_name: str, cursor_name: str) -> str:
    """`/managed-ledgers/<mlName>/<cursor>`; `cursor_name` is the encoded name as stored."""
    return f"{managed_ledger_path(ml_name)}/{check_segment(cursor_name, 'cursor_name')}"


def check_schema_id(schema_id: str) -> str:
    """`tenant/ns/<encoded base topic>` (or with a cluster for V1)."""
    if not isinstance(schema_id, str):
        raise InvalidArgument("schema_id", "must be a string")
    parts = schema_id.split("/")
    if len(parts) not in (3, 4) or not all(parts):
        raise InvalidArgument("schema_id", f"{schema_id!r} needs tenant/namespace/topic")
    for part in parts[:-1]:
        check_named_entity(part, "schema_id")
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
