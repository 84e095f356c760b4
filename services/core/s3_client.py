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

from services.core.config import S3Config


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
