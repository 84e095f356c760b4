"""`ObjectStore` on aiobotocore: HEAD and ranged GET. The one verifier module that imports it.

A 404 on an object of an existing bucket is the only "absent"; every other failure (a missing
bucket, 403, 5xx, timeouts, connection errors) is `Unavailable`, so the decision answers
RETRY. When S3 gave no answer at all (5xx, timeouts, connection errors) it is an outage,
`S3Unavailable`, which the decision names `unavailable_s3` so that the deleter pauses on it; an
answer that refuses (403, a missing bucket) is a misconfiguration, retried as any RETRY.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from services.core.config import S3Config
from services.core.errors import Unavailable
from services.core.s3_client import open_s3_client
from services.verifier.ports import ObjectHead

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class S3Unavailable(Unavailable):
    """S3 did not answer (5xx, timeout, connection error): an outage, the state is unknown."""

    dependency = "s3"


def _refused(e: ClientError, what: str) -> Unavailable:
    """Unknown either way; an outage only when the service failed (5xx), not the request."""
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    code = str(e.response.get("Error", {}).get("Code", "")) or str(e)
    outage = isinstance(status, int) and status >= 500
    return (S3Unavailable if outage else Unavailable)(f"{what}: {code}")


class S3ObjectStore:
    def __init__(self, client: Any, *, bucket_check_ttl: float = 60.0) -> None:
        """`client` is an aiobotocore S3 client (its lifetime is the caller's)."""
        self._client = client
        self._ttl = bucket_check_ttl
        self._buckets_seen: dict[str, float] = {}

    async def head(self, *, bucket: str, key: str) -> ObjectHead | None:
        try:
            response = await self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                # A HEAD 404 does not say whether the key or the whole bucket is missing; a
                # missing bucket is a misconfiguration (endpoint, region), not an absence.
                await self._require_bucket(bucket)
                return None
            raise _refused(e, f"HEAD s3://{bucket}/{key}") from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise S3Unavailable(f"HEAD s3://{bucket}/{key}: {type(e).__name__}: {e}") from e
        metadata = {k.lower(): v for k, v in (response.get("Metadata") or {}).items()}
        modified = response.get("LastModified")
        modified_ms = int(modified.timestamp() * 1000) if modified is not None else 0
        length = response.get("ContentLength")
        size = length if isinstance(length, int) and length >= 0 else None
        return ObjectHead(user_metadata=metadata, last_modified_ms=modified_ms, size=size)

    async def read_range(self, *, bucket: str, key: str, start: int, length: int) -> bytes | None:
        if start < 0 or length <= 0:
            raise ValueError(f"bad range start={start} length={length}")
        where = f"GET s3://{bucket}/{key} bytes={start}-{start + length - 1}"
        try:
            response = await self._client.get_object(
                Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}"
            )
            async with response["Body"] as body:
                data: bytes = await body.read()
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                await self._require_bucket(bucket)
                return None
            if code == "InvalidRange":
                return b""  # the object is shorter than `start`
            raise _refused(e, where) from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise S3Unavailable(f"{where}: {type(e).__name__}: {e}") from e
        # A server that ignores Range sends the whole object: keep only what was asked.
        if response.get("ContentRange") is None and len(data) > length:
            data = data[start : start + length]
        return data[:length]

    async def _require_bucket(self, bucket: str) -> None:
        """Raise `Unavailable` unless the bucket exists (positive answers cached for a TTL)."""
        seen = self._buckets_seen.get(bucket)
        if seen is not None and time.monotonic() - seen < self._ttl:
            return
        try:
            await self._client.head_bucket(Bucket=bucket)
        except ClientError as e:
            raise _refused(e, f"bucket {bucket!r} is not reachable") from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise S3Unavailable(f"HEAD bucket {bucket!r}: {type(e).__name__}: {e}") from e
        self._buckets_seen[bucket] = time.monotonic()


@contextlib.asynccontextmanager
async def open_s3(config: S3Config, *, timeout: float = 10.0) -> AsyncIterator[S3ObjectStore]:
    """An S3 client for HEADs and ranged reads, closed on exit."""
    async with open_s3_client(config, timeout=timeout) as client:
        yield S3ObjectStore(client)
