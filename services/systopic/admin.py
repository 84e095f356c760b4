"""Pulsar's admin REST API (v2 paths) for the system topics: partitions, subscriptions,
backlogs and the two topic-level policies that keep intents (retention, inactive topics).

Every call goes to the broker's `PersistentTopics` resource
(`org.apache.pulsar.broker.admin.v2.PersistentTopics`, mounted at `/admin/v2/persistent`),
over the same TLS and with the same credentials as the binary protocol (`admin_auth.py`). A
connection failure, a timeout, a TLS refusal or a 5xx is `Unavailable` (unknown, never
"absent"); 401/403 is `PermissionDenied`; another unexpected status is `FailedPrecondition`
carrying the broker's text. Each failure is counted by call and reason (`FAILURE_REASONS`), so
that an admin API that refuses us is an alert, not only a log line.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable, Collection
from typing import Any, NamedTuple

import aiohttp
from prometheus_client import Counter

from services.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    TombstoneError,
    Unavailable,
)

EARLIEST = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1, "batchIndex": -1}
"""`ResetCursorData` of `MessageId.earliest`: the body `pulsar-admin topics
create-subscription --messageId earliest` sends."""


def topic_path(topic: str) -> str:
    """`/admin/v2/<domain>/<tenant>/<namespace>/<topic>` for a full topic name."""
    domain, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or len(parts) != 3 or not all(parts):
        raise InvalidArgument("topic", f"{topic!r} is not <domain>://tenant/namespace/topic")
    tenant, namespace, local = parts
    return f"/admin/v2/{domain}/{tenant}/{namespace}/{urllib.parse.quote(local, safe='')}"


def partition_names(topic: str, partitions: int) -> list[str]:
    """The topics that hold messages: each partition, or the topic itself when not partitioned."""
    if partitions <= 0:
        return [topic]
    return [f"{topic}-partition-{i}" for i in range(partitions)]


ADMIN_CALLS = (
    "stats",
    "partitions",
    "create_partitioned_topic",
    "create_topic",
    "subscriptions",
    "create_subscription",
    "retention",
    "set_retention",
    "inactive_topic_policies",
    "set_inactive_topic_policies",
)
"""The `call` label of the failure counter: one per admin request Tombstone makes."""
FAILURE_REASONS = ("unavailable", "unauthorized", "other")
"""The `reason` label: no answer (or a 5xx), a 401/403 (from the broker or the OAuth2 issuer),
anything else unexpected."""


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, Unavailable):
        return "unavailable"
    if isinstance(exc, PermissionDenied):
        return "unauthorized"
    return "other"


class AdminCredentials:
    """What authenticates an admin call: nothing, a bearer token, or the TLS client
    certificate (in the SSL context). `refused()` is told of a 401 so that a cached OAuth2
    token is replaced."""

    async def headers(self) -> dict[str, str]:
        return {}

    def refused(self) -> None:
        """The broker refused the credentials just sent."""


class BearerToken(AdminCredentials):
    """`Authorization: Bearer <token>`, the token fetched anew for each call."""

    def __init__(
        self, token: Callable[[], Awaitable[str]], *, on_refused: Callable[[], None] | None = None
    ) -> None:
        self._token = token
        self._on_refused = on_refused

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {await self._token()}"}

    def refused(self) -> None:
        if self._on_refused is not None:
            self._on_refused()


def static_token(token: str) -> BearerToken:
    async def supply() -> str:
        return token

    return BearerToken(supply)


class Answer(NamedTuple):
    status: int
    body: Any
    """The decoded JSON body; None for an empty one (204, or a policy that is not set)."""


class PulsarAdmin:
    """The calls Tombstone makes on `PersistentTopics` (`TopicStats` too: a partitioned topic's
    `partitioned-stats` sums its partitions)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        token: str | None = None,
        credentials: AdminCredentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
        failures: Counter | None = None,
        timeout: float = 10,
    ) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        if credentials is None:
            credentials = static_token(token) if token else AdminCredentials()
        self._credentials = credentials
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._failures = failures

    @property
    def base_url(self) -> str:
        return self._base

    # --- stats ---------------------------------------------------------------------------

    async def backlog(self, topic: str, subscription: str) -> int:
        """Messages of `subscription` not yet acknowledged; 0 if the topic or it is absent."""
        path = topic_path(topic)
        count = await self.partitions(topic)
        suffix = "/partitioned-stats" if count > 0 else "/stats"
        stats = (await self._call("stats", "GET", path + suffix, allow=(404,))).body
        if stats is None:
            return 0
        subscription_stats = stats.get("subscriptions", {}).get(subscription)
        return int(subscription_stats.get("msgBacklog", 0)) if subscription_stats else 0

    # --- partitions (createPartitionedTopic, getPartitionedMetadata) ---------------------

    async def partitions(self, topic: str) -> int:
        """The partition count; 0 when the topic is not partitioned or does not exist (Pulsar
        answers both the same way)."""
        answer = await self._call(
            "partitions", "GET", topic_path(topic) + "/partitions", allow=(404,)
        )
        return int((answer.body or {}).get("partitions", 0))

    async def create_partitioned_topic(self, topic: str, partitions: int) -> bool:
        """PUT `.../partitions` with the count; False if a topic of that name exists (409)."""
        path = topic_path(topic) + "/partitions"
        answer = await self._call("create_partitioned_topic", "PUT", path, partitions, allow=(409,))
        return answer.status != 409

    async def create_topic(self, topic: str) -> bool:
        """PUT the non-partitioned topic; False if it exists (409)."""
        return (
            await self._call("create_topic", "PUT", topic_path(topic), allow=(409,))
        ).status != 409

    # --- subscriptions (getSubscriptions, createSubscription, deleteSubscription) ---------

    async def subscriptions(self, topic: str) -> list[str] | None:
        """The subscriptions of one topic or partition; None if it does not exist (404)."""
        answer = await self._call(
            "subscriptions", "GET", topic_path(topic) + "/subscriptions", allow=(404,)
        )
        if answer.status == 404:
            return None
        return [str(name) for name in answer.body or []]

    async def create_subscription(self, topic: str, subscription: str) -> bool:
        """PUT `.../subscription/{name}` at the earliest position; False if it exists (409)."""
        quoted = urllib.parse.quote(subscription, safe="")
        path = f"{topic_path(topic)}/subscription/{quoted}"
        answer = await self._call("create_subscription", "PUT", path, EARLIEST, allow=(409,))
        return answer.status != 409

    async def delete_subscription(self, topic: str, subscription: str) -> bool:
        """DELETE `.../subscription/{name}` (without `force`: refused while consumers are
        connected, `FailedPrecondition`); False if it was not there (404)."""
        quoted = urllib.parse.quote(subscription, safe="")
        path = f"{topic_path(topic)}/subscription/{quoted}"
        return (await self._call("delete_subscription", "DELETE", path, allow=(404,))).status != 404

    # --- topic-level policies (setRetention, setInactiveTopicPolicies) -------------------

    async def retention(self, topic: str) -> dict[str, Any] | None:
        """The topic's own `RetentionPolicies` (not the namespace's); None when not set."""
        return _object(
            (await self._call("retention", "GET", topic_path(topic) + "/retention")).body
        )

    async def set_retention(self, topic: str, *, minutes: int, size_mb: int) -> None:
        body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}
        await self._call("set_retention", "POST", topic_path(topic) + "/retention", body)

    async def inactive_topic_policies(self, topic: str) -> dict[str, Any] | None:
        """The topic's own `InactiveTopicPolicies`; None when not set."""
        path = topic_path(topic) + "/inactiveTopicPolicies"
        return _object((await self._call("inactive_topic_policies", "GET", path)).body)

    async def set_inactive_topic_policies(self, topic: str, policies: dict[str, Any]) -> None:
        path = topic_path(topic) + "/inactiveTopicPolicies"
        await self._call("set_inactive_topic_policies", "POST", path, policies)

    # --- transport -----------------------------------------------------------------------

    async def _call(
        self,
        call: str,
        method: str,
        path: str,
        body: Any = None,
        *,
        allow: Collection[int] = (),
    ) -> Answer:
        try:
            return await self._request(method, path, body, allow)
        except TombstoneError as exc:
            if self._failures is not None:
                self._failures.labels(call, failure_reason(exc)).inc()
            raise

    async def _request(self, method: str, path: str, body: Any, allow: Collection[int]) -> Answer:
        url = f"{self._base}{path}"
        data = None if body is None else json.dumps(body)
        headers = await self._credentials.headers()
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            async with self._session.request(
                method, url, data=data, headers=headers, ssl=self._ssl, timeout=self._timeout
            ) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise Unavailable(f"{method} {url}: {exc!r}") from exc
        if status in allow:
            return Answer(status, _decode(text))
        if status in (401, 403):
            if status == 401:
                self._credentials.refused()
            raise PermissionDenied(f"{method} {url}: HTTP {status} {_reason(text)}")
        if status >= 500:
            raise Unavailable(f"{method} {url}: HTTP {status} {_reason(text)}")
        if not 200 <= status < 300:
            raise FailedPrecondition(f"{method} {url}: HTTP {status} {_reason(text)}")
        return Answer(status, _decode(text))


def _decode(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _reason(text: str) -> str:
    """Pulsar's `{"reason": ...}`, else the start of the body."""
    decoded = _decode(text)
    if isinstance(decoded, dict) and "reason" in decoded:
        return str(decoded["reason"])[:200]
    return text[:200]


def _object(body: Any) -> dict[str, Any] | None:
    return body if isinstance(body, dict) and body else None
