"""The reconciler's S3 adapter (aiobotocore): list a bucket, HEAD an object's user metadata.

The only module of `services.scan` that imports aiobotocore. A missing bucket or any error is
`Unavailable` (the extract task then fails); only a 404 on HEAD of a listed object means it
was deleted after the listing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from services.core.errors import Unavailable

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


@dataclass(frozen=True)
class S3Settings:
    """How executors reach the object store (credentials None: the default AWS chain)."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = None
    timeout_s: float = 30.0
    retries: int = 3
    """Retries after a request's first try (botocore's legacy `max_attempts`); the pre-flight
    makes none, to fail fast."""


@dataclass(frozen=True)
class ListedObject:
    key: str
    size: int
    last_modified_ms: int | None


@dataclass(frozen=True)
class ListingPage:
    objects: list[ListedObject]
    truncated: bool
    """The store said more keys follow but gave no way to fetch them."""


class S3Lister:
    def __init__(self, client: Any) -> None:
        self._client = client

    async def list_all(self, bucket: str) -> ListingPage:
        """Every object of `bucket`, following continuation tokens to the end."""
        objects: list[ListedObject] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket}
            if token:
                kwargs["ContinuationToken"] = token
            page = await self._call(f"list s3://{bucket}", self._client.list_objects_v2, **kwargs)
            for item in page.get("Contents", []):
                modified = item.get("LastModified")
                objects.append(
                    ListedObject(
                        key=item["Key"],
                        size=int(item.get("Size", 0)),
                        last_modified_ms=int(modified.timestamp() * 1000) if modified else None,
                    )
                )
            if not page.get("IsTruncated"):
                return ListingPage(objects, truncated=False)
            token = page.get("NextContinuationToken")
            if not token:
                return ListingPage(objects, truncated=True)

    async def user_metadata(self, bucket: str, key: str) -> dict[str, str] | None:
        """The object's user metadata (keys lowercased); None when S3 says it is gone."""
        try:
            response = await self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if _code(e) in _NOT_FOUND:
                return None
            raise Unavailable(f"HEAD s3://{bucket}/{key}: {_code(e) or e}") from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise Unavailable(f"HEAD s3://{bucket}/{key}: {type(e).__name__}: {e}") from e
        return {k.lower(): v for k, v in (response.get("Metadata") or {}).items()}

    async def head_bucket(self, bucket: str) -> None:
        """HeadBucket: the bucket exists and these credentials may list it. Raises botocore's
        own errors untouched, so that the pre-flight can tell each cause apart."""
        await self._client.head_bucket(Bucket=bucket)

    async def _call(self, what: str, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = await method(**kwargs)
        except ClientError as e:
            raise Unavailable(f"{what}: {_code(e) or e}") from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise Unavailable(f"{what}: {type(e).__name__}: {e}") from e
        return response


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


@contextlib.asynccontextmanager
async def open_lister(settings: S3Settings) -> AsyncIterator[S3Lister]:
    config = AioConfig(
        connect_timeout=settings.timeout_s,
        read_timeout=settings.timeout_s,
        retries={"max_attempts": settings.retries},
        max_pool_connections=64,
    )
    kwargs: dict[str, Any] = {"region_name": settings.region, "config": config}
    if settings.endpoint_url:
        kwargs["endpoint_url"] = settings.endpoint_url
    if settings.access_key_id:
        kwargs["aws_access_key_id"] = settings.access_key_id
        kwargs["aws_secret_access_key"] = settings.secret_access_key
    async with get_session().create_client("s3", **kwargs) as client:
        yield S3Lister(client)
