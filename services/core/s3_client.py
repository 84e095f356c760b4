"""The one way the services open S3 clients from their `S3Config` (aiobotocore).

Short timeouts and at most one SDK retry: the services retry through their own mechanisms
(the deleter's retry topic, the verifier's RETRY verdict), so the SDK only smooths single blips.

Each offload record names its own bucket, region and endpoint (Pulsar's per-namespace offload
policies), so a service may need a client per (endpoint, region): `S3Clients` keeps one per
location, opened on first use, closed together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from services.core.adaptive import Signal
from services.core.config import S3Config
from services.core.s3_locations import S3Location, TooManyLocations

THROTTLE_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "Throttling",
        "ThrottlingException",
        "TooManyRequests",
        "RequestLimitExceeded",
    }
)
"""Error codes by which S3 (and S3-compatible stores) ask for fewer requests."""


DEFAULT_MAX_LOCATIONS = 16
"""Clients one service keeps open at once: each holds a connection pool, and the locations
are few (allowed endpoints times the regions the records name)."""


def _client_config(timeout: float) -> AioConfig:
    return AioConfig(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": 2, "mode": "standard"},
        max_pool_connections=64,
    )


@contextlib.asynccontextmanager
async def open_s3_client(
    config: S3Config, *, timeout: float = 10.0, location: S3Location | None = None
) -> AsyncIterator[Any]:
    """An aiobotocore S3 client for `config` (at `location`, else the configured endpoint and
    region), closed on exit. Every location uses the configured credentials."""
    async with get_session().create_client(
        "s3",
        endpoint_url=config.endpoint_url if location is None else location.endpoint,
        region_name=config.region if location is None else location.region,
        aws_access_key_id=config.access_key_id,
        aws_secret_access_key=config.secret_access_key,
        config=_client_config(timeout),
    ) as client:
        yield client


class S3Clients:
    """One aiobotocore client per `S3Location`, opened on first use and closed by `aclose`.

    Bounded: a location beyond `max_locations` is refused (`TooManyLocations`) rather than
    evicting a client other requests may be using; the allow-list of endpoints keeps the
    real number small, so reaching the bound means records name regions nobody planned for.
    """

    def __init__(
        self, config: S3Config, *, timeout: float = 10.0, max_locations: int = DEFAULT_MAX_LOCATIONS
    ) -> None:
        self._config = config
        self._timeout = timeout
        self._max = max_locations
        self._stack = contextlib.AsyncExitStack()
        self._clients: dict[S3Location, Any] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def locations(self) -> tuple[S3Location, ...]:
        """The locations with an open client, in the order they were opened."""
        return tuple(self._clients)

    async def client(self, location: S3Location) -> Any:
        found = self._clients.get(location)
        if found is not None:
            return found
        # One opening at a time, so that concurrent first requests share one client.
        async with self._lock:
            if self._closed:
                raise RuntimeError("S3 clients are closed")
            found = self._clients.get(location)
            if found is None:
                if len(self._clients) >= self._max:
                    raise TooManyLocations(
                        f"{location.describe()}: already {self._max} S3 locations in use"
                    )
                found = await self._stack.enter_async_context(
                    open_s3_client(self._config, timeout=self._timeout, location=location)
                )
                self._clients[location] = found
            return found

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            self._clients.clear()
            await self._stack.aclose()


@contextlib.asynccontextmanager
async def open_s3_clients(
    config: S3Config, *, timeout: float = 10.0, max_locations: int = DEFAULT_MAX_LOCATIONS
) -> AsyncIterator[S3Clients]:
    """`S3Clients` for `config`, every client closed on exit."""
    clients = S3Clients(config, timeout=timeout, max_locations=max_locations)
    try:
        yield clients
    finally:
        await clients.aclose()


def s3_signal(error: BaseException) -> Signal:
    """What a failed S3 request says about S3, for an adaptive concurrency limit: throttled
    (503 `SlowDown`, 429), unanswered (no response, another 5xx), or an answer (403, 404...).
    A service error that wraps the client's (`raise ... from`) is judged by its cause."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ClientError | BotoCoreError | OSError):
        cause = cause.__cause__
    if isinstance(cause, ClientError):
        code = str(cause.response.get("Error", {}).get("Code", ""))
        status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in THROTTLE_CODES or status in (429, 503):
            return Signal.THROTTLED
        if isinstance(status, int) and status >= 500:
            return Signal.UNANSWERED
        return Signal.ANSWERED
    if cause is not None:  # no answer: connection refused or reset, timed out
        return Signal.UNANSWERED
    return Signal.IGNORED
