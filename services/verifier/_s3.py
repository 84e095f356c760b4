"""`ObjectStore` on aiobotocore: HEAD and ranged GET. The one verifier module that imports it.

A 404 on an object of an existing bucket is the only "absent"; every other failure (a missing
bucket, 403, 5xx, timeouts, connection errors) is `Unavailable`, so the decision answers
RETRY. When S3 gave no answer at all (5xx, timeouts, connection errors) it is an outage,
`S3Unavailable`, which the decision names `unavailable_s3` so that the deleter pauses on it; an
answer that refuses (403, a missing bucket) is a misconfiguration, retried as any RETRY.

Requests go to the location the offload record names (`S3Clients`, one client per endpoint
and region); the inspector has checked that location against the allow-list already.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from services.core.config import S3Config
from services.core.errors import Unavailable
from services.core.s3_client import S3Clients, open_s3_clients
from services.core.s3_locations import S3Location, TooManyLocations, default_location
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
    def __init__(
        self, client: Any, *, bucket_check_ttl: float = 60.0, clients: S3Clients | None = None
    ) -> None:
        """`client` is an aiobotocore S3 client (its lifetime is the caller's). With `clients`,
        a request naming a location goes to that location's client, and `client` serves the
        requests naming none; without, `client` serves every location (one S3 only)."""
        self._client = client
        self._clients = clients
        self._ttl = bucket_check_ttl
        self._buckets_seen: dict[tuple[S3Location | None, str], float] = {}

    async def _client_for(self, location: S3Location | None) -> Any:
        if location is None or self._clients is None:
            return self._client
        try:
            return await self._clients.client(location)
        except TooManyLocations as e:
            raise Unavailable(str(e)) from e

    async def head(
        self, *, bucket: str, key: str, location: S3Location | None = None
    ) -> ObjectHead | None:
        client = await self._client_for(location)
        try:
            response = await client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                # A HEAD 404 does not say whether the key or the whole bucket is missing; a
                # missing bucket is a misconfiguration (endpoint, region), not an absence.
                await self._require_bucket(client, location, bucket)
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

    async def read_range(
        self,
        *,
        bucket: str,
        key: str,
        start: int,
        length: int,
        location: S3Location | None = None,
    ) -> bytes | None:
        if start < 0 or length <= 0:
            raise ValueError(f"bad range start={start} length={length}")
        where = f"GET s3://{bucket}/{key} bytes={start}-{start + length - 1}"
        client = await self._client_for(location)
        try:
            response = await client.get_object(
                Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}"
            )
            async with response["Body"] as body:
                data: bytes = await body.read()
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                await self._require_bucket(client, location, bucket)
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

    async def _require_bucket(self, client: Any, location: S3Location | None, bucket: str) -> None:
        """Raise `Unavailable` unless the bucket exists at the location (positive answers
        cached for a TTL). Per location: one bucket name may exist at one endpoint only."""
        seen = self._buckets_seen.get((location, bucket))
        if seen is not None and time.monotonic() - seen < self._ttl:
            return
        try:
            await client.head_bucket(Bucket=bucket)
        except ClientError as e:
            raise _refused(e, f"bucket {bucket!r} is not reachable") from e
        except (BotoCoreError, OSError, TimeoutError) as e:
            raise S3Unavailable(f"HEAD bucket {bucket!r}: {type(e).__name__}: {e}") from e
        self._buckets_seen[(location, bucket)] = time.monotonic()


@contextlib.asynccontextmanager
async def open_s3(config: S3Config, *, timeout: float = 10.0) -> AsyncIterator[S3ObjectStore]:
    """An `S3ObjectStore` for HEADs and ranged reads at each record's location (the configured
    one for records naming none), every client closed on exit."""
    async with open_s3_clients(config, timeout=timeout) as clients:
        yield S3ObjectStore(await clients.client(default_location(config)), clients=clients)
