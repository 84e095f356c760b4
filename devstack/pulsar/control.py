"""`BrokerControl`: drive a running devstack broker's admin HTTP API from a test (blocking).

The calls are plain blocking HTTP; from async code wrap them in `asyncio.to_thread`.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from .names import TopicName


class BrokerAdminError(Exception):
    """The admin API answered with an error status."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


def _topic_path(topic: str) -> str:
    name = TopicName.parse(topic)
    return f"/admin/v2/{name.domain}/{name.tenant}/{name.namespace}/{name.local}"


class BrokerControl:
    def __init__(
        self,
        admin_url: str,
        *,
        timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        token: str | None = None,
    ) -> None:
        self.admin_url = admin_url.rstrip("/")
        self.timeout = timeout
        self.ssl_context = ssl_context
        """Trusts a secured broker's test CA (`https://` admin URLs)."""
        self.token = token
        """Bearer token for a broker that authenticates admin calls."""

    def _call(self, method: str, path: str, body: object | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.admin_url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self.ssl_context
            ) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise BrokerAdminError(exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    # faults ---------------------------------------------------------------------------

    def drop_connections(self) -> int:
        """Abort every client connection; returns how many there were."""
        return int(self._call("POST", "/admin/devstack/drop-connections")["dropped"])

    def fail_sends(
        self,
        count: int | None = None,
        *,
        seconds: float | None = None,
        error: str = "PersistenceError",
    ) -> None:
        """Answer the next `count` SENDs (or all SENDs for `seconds`) with SEND_ERROR `error`."""
        args = {"count": count, "seconds": seconds, "error": error}
        self._call("POST", "/admin/devstack/faults/fail-sends", args)

    def refuse_sends(self, count: int | None = None, *, seconds: float | None = None) -> None:
        """Fail the next `count` sends (or all for `seconds`) for good, not for a retry.

        Every SEND_ERROR except ChecksumError makes the client reconnect and resend, so a
        refusal the application sees (`pulsar.ChecksumError`) must use that error.
        """
        self.fail_sends(count, seconds=seconds, error="ChecksumError")

    def delay_sends(self, seconds: float, *, duration: float | None = None) -> None:
        """Store each SEND `seconds` late, for `duration` seconds or until `clear_faults()`."""
        self._call(
            "POST", "/admin/devstack/faults/delay-sends", {"seconds": seconds, "duration": duration}
        )

    def refuse_producers(
        self,
        count: int | None = None,
        *,
        seconds: float | None = None,
        error: str = "ServiceNotReady",
    ) -> None:
        """Answer the next `count` PRODUCER requests (or all for `seconds`) with ERROR `error`."""
        args = {"count": count, "seconds": seconds, "error": error}
        self._call("POST", "/admin/devstack/faults/refuse-producers", args)

    def pause_dispatch(self) -> None:
        """Stop delivering messages to consumers (sends are still stored)."""
        self._call("POST", "/admin/devstack/faults/pause-dispatch")

    def resume_dispatch(self) -> None:
        self._call("POST", "/admin/devstack/faults/resume-dispatch")

    def clear_faults(self) -> None:
        self._call("POST", "/admin/devstack/faults/clear")

    def reset(self) -> None:
        """Drop every topic and namespace added since start, and every fault."""
        self._call("POST", "/admin/devstack/reset")

    def restart(self) -> None:
        """Restart the broker inside its process: clients are closed and reconnect.

        In memory mode this loses every topic; with a data directory everything is reloaded.
        """
        self._call("POST", "/admin/devstack/restart")

    # Pulsar admin paths -----------------------------------------------------------------

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn PIP-6 deduplication on or off for a namespace (on by default)."""
        self._call("POST", f"/admin/v2/namespaces/{namespace}/deduplication", enabled)

    def create_namespace(self, namespace: str) -> None:
        self._call("PUT", f"/admin/v2/namespaces/{namespace}")

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self._call("PUT", f"{_topic_path(topic)}/partitions", partitions)

    def create_topic(self, topic: str) -> None:
        self._call("PUT", _topic_path(topic))

    def get_partitions(self, topic: str) -> int:
        return int(self._call("GET", f"{_topic_path(topic)}/partitions")["partitions"])

    def list_topics(self, namespace: str, domain: str = "persistent") -> list[str]:
        return list(self._call("GET", f"/admin/v2/{domain}/{namespace}"))

    def stats(self, topic: str) -> dict[str, Any]:
        return dict(self._call("GET", f"{_topic_path(topic)}/stats"))

    def partitioned_stats(self, topic: str) -> dict[str, Any]:
        return dict(self._call("GET", f"{_topic_path(topic)}/partitioned-stats"))

    def unload(self, topic: str) -> None:
        """Close the topic's producers and consumers from the broker; they reconnect."""
        self._call("PUT", f"{_topic_path(topic)}/unload")

    def subscriptions(self, topic: str) -> list[str]:
        """Durable subscriptions (a partitioned topic: the union over its partitions)."""
        return list(self._call("GET", f"{_topic_path(topic)}/subscriptions"))

    def create_subscription(self, topic: str, subscription: str, *, earliest: bool = True) -> None:
        """A durable subscription at the earliest position (else the latest)."""
        body = {"ledgerId": -1, "entryId": -1} if earliest else None
        self._call("PUT", f"{_topic_path(topic)}/subscription/{subscription}", body)

    def delete_subscription(self, topic: str, subscription: str) -> None:
        self._call("DELETE", f"{_topic_path(topic)}/subscription/{subscription}")

    def set_retention(self, topic: str, *, minutes: int = -1, size_mb: int = -1) -> None:
        """A topic-level retention policy (-1: infinite): entries are kept without a
        subscription."""
        body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}
        self._call("POST", f"{_topic_path(topic)}/retention", body)

    def retention(self, topic: str) -> dict[str, Any] | None:
        return self._call("GET", f"{_topic_path(topic)}/retention")  # type: ignore[no-any-return]

    def backlog(self, topic: str, subscription: str) -> int:
        """`msgBacklog` of one subscription (summed over partitions when partitioned)."""
        name = TopicName.parse(topic)
        if name.partition_index < 0 and self.get_partitions(topic) > 0:
            stats = self.partitioned_stats(topic)
        else:
            stats = self.stats(topic)
        return int(stats["subscriptions"][subscription]["msgBacklog"])
