"""Topic names as the client sends them: `persistent://tenant/ns/local[-partition-N]`."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d+)$")
DOMAINS = ("persistent", "non-persistent")


class InvalidTopicName(ValueError):
    """A topic name the broker cannot parse."""


@dataclass(frozen=True, slots=True)
class TopicName:
    """A fully qualified topic name, split into its parts."""

    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, text: str) -> TopicName:
        """Parse a full name; short forms are expanded as the client does."""
        if "://" in text:
            domain, _, rest = text.partition("://")
        else:
            domain, rest = "persistent", text
        parts = rest.split("/")
        if len(parts) == 1:
            parts = ["public", "default", parts[0]]
        if domain not in DOMAINS or len(parts) < 3 or not all(parts[:3]):
            raise InvalidTopicName(f"invalid topic name {text!r}")
        return cls(domain, parts[0], parts[1], "/".join(parts[2:]))

    @property
    def full(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def ns(self) -> str:
        """`tenant/namespace`."""
        return f"{self.tenant}/{self.namespace}"

    @property
    def partition_index(self) -> int:
        """The partition number for a `-partition-N` name, else -1."""
        match = _PARTITION.match(self.local)
        return int(match["index"]) if match else -1

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself when not a partition)."""
        match = _PARTITION.match(self.local)
        if not match:
            return self
        return TopicName(self.domain, self.tenant, self.namespace, match["base"])

    def partition(self, index: int) -> TopicName:
        return TopicName(
            self.domain, self.tenant, self.namespace, f"{self.local}-partition-{index}"
        )
