"""`ObjectStore` on aiobotocore: HEAD only. The one module of the verifier that imports it.

A 404 is the only "absent"; every other failure (403, 5xx, timeouts, connection errors) is
`Unavailable`, so the decision answers RETRY.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from services.core.config import S3Config
from services.core.errors import Unavailable
from services.verifier.ports import ObjectHead

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class S3ObjectStore:
    def __init__(self, client: object) -> None:
        self._client = client

    async def head(self, *, bucket: str, key: str) -> ObjectHead | None:
        try:
            response = await self._client.head_object(Bucket=bucket, Key=key)  # type: ignore[attr-defined]
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                return None
            raise Unavailable(f"HEAD s3://{bucket}/{key}: {code or e}") from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise Unavailable(f"HEAD s3://{bucket}/{key}: {type(e).__name__}: {e}") from e
        metadata = {k.lower(): v for k, v in (response.get("Metadata") or {}).items()}
        modified = response.get("LastModified")
        modified_ms = int(modified.timestamp() * 1000) if modified is not None else 0
        return ObjectHead(user_metadata=metadata, last_modified_ms=modified_ms)


@contextlib.asynccontextmanager
async def open_s3(config: S3Config, *, timeout: float = 10.0) -> AsyncIterator[S3ObjectStore]:
    """An S3 client for HEADs, closed on exit."""
    session = get_session()
    client_config = AioConfig(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": 2, "mode": "standard"},
        max_pool_connections=64,
    )
    async with session.create_client(
        "s3",
        endpoint_url=config.endpoint_url,
        region_name=config.region,
        aws_access_key_id=config.access_key_id,
        aws_secret_access_key=config.secret_access_key,
        config=client_config,
    ) as client:
        yield S3ObjectStore(client)
