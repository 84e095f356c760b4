"""Subscription backlogs from Pulsar's admin HTTP API (`msgBacklog` in the topic stats)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import aiohttp

from services.core.errors import InvalidArgument, Unavailable


def _topic_path(topic: str) -> str:
    domain, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or len(parts) != 3 or not all(parts):
        raise InvalidArgument("topic", f"{topic!r} is not <domain>://tenant/namespace/topic")
    tenant, namespace, local = parts
    return f"/admin/v2/{domain}/{tenant}/{namespace}/{urllib.parse.quote(local, safe='')}"


class PulsarTopicStats:
    """`TopicStats` over the admin API (a partitioned topic sums its partitions)."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, *, timeout: float = 10):
        self._session = session
        self._base = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def backlog(self, topic: str, subscription: str) -> int:
        """Messages of `subscription` not yet acknowledged; 0 if the topic or it is absent."""
        path = _topic_path(topic)
        partitions = await self._get(f"{path}/partitions")
        count = int((partitions or {}).get("partitions", 0))
        stats = await self._get(f"{path}/partitioned-stats" if count > 0 else f"{path}/stats")
        if stats is None:
            return 0
        subscription_stats = stats.get("subscriptions", {}).get(subscription)
        return int(subscription_stats.get("msgBacklog", 0)) if subscription_stats else 0

    async def _get(self, path: str) -> Any:
        url = f"{self._base}{path}"
        try:
            async with self._session.get(url, timeout=self._timeout) as response:
                if response.status == 404:
                    return None
                if response.status != 200:
                    text = (await response.text())[:200]
                    raise Unavailable(f"GET {url}: HTTP {response.status} {text}")
                return await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unavailable(f"GET {url}: {exc!r}") from exc
