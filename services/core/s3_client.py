"""The one way the services open an S3 client from their `S3Config` (aiobotocore).

Short timeouts and at most one SDK retry: the services retry through their own mechanisms
(the deleter's retry topic, the verifier's RETRY verdict), so the SDK only smooths single blips.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from services.core.adaptive import Signal
from services.core.config import S3Config

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


@contextlib.asynccontextmanager
async def open_s3_client(config: S3Config, *, timeout: float = 10.0) -> AsyncIterator[Any]:
    """An aiobotocore S3 client for `config`, closed on exit."""
    client_config = AioConfig(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": 2, "mode": "standard"},
        max_pool_connections=64,
    )
    async with get_session().create_client(
        "s3",
        endpoint_url=config.endpoint_url,
        region_name=config.region,
        aws_access_key_id=config.access_key_id,
        aws_secret_access_key=config.secret_access_key,
        config=client_config,
    ) as client:
        yield client


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
