"""The simulator's object-store port and its aiobotocore adapter (the only aiobotocore user
in the simulator). Errors become the suite's typed errors; a missing object is `NotFound`
only when S3 said 404."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from services.core.errors import NotFound, Unavailable


class ObjectStore(Protocol):
    async def ensure_bucket(self, bucket: str) -> None: ...

    async def put_object(
        self, *, bucket: str, key: str, body: bytes, metadata: Mapping[str, str]
    ) -> None: ...

    async def list_keys(self, *, bucket: str) -> list[str]: ...

    async def head_metadata(self, *, bucket: str, key: str) -> dict[str, str]:
        """User metadata with lowercased keys (as S3 returns them)."""
        ...

    async def get_object(self, *, bucket: str, key: str) -> bytes: ...

    async def delete_object(self, *, bucket: str, key: str) -> None:
        """Delete one object; a missing one is not an error (S3 answers 204 either way)."""
        ...


class S3ObjectStore:
    """`ObjectStore` over an aiobotocore S3 client."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def ensure_bucket(self, bucket: str) -> None:
        # Outside us-east-1 S3 wants the region named (as `aws s3 mb` sends it).
        region = self._client.meta.region_name
        extra = {}
        if region and region != "us-east-1":
            extra["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            await self._client.create_bucket(Bucket=bucket, **extra)
        except ClientError as e:
            if _code(e) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise Unavailable(f"cannot create bucket {bucket}: {e}") from e
        except BotoCoreError as e:
            raise Unavailable(f"S3 unreachable creating bucket {bucket}: {e}") from e

    async def put_object(
        self, *, bucket: str, key: str, body: bytes, metadata: Mapping[str, str]
    ) -> None:
        with _mapped(bucket, key):
            await self._client.put_object(
                Bucket=bucket, Key=key, Body=body, Metadata=dict(metadata)
            )

    async def list_keys(self, *, bucket: str) -> list[str]:
        keys: list[str] = []
        with _mapped(bucket, ""):
            paginator = self._client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=bucket):
                keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    async def head_metadata(self, *, bucket: str, key: str) -> dict[str, str]:
        with _mapped(bucket, key):
            response = await self._client.head_object(Bucket=bucket, Key=key)
        return {k.lower(): v for k, v in response.get("Metadata", {}).items()}

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        with _mapped(bucket, key):
            response = await self._client.get_object(Bucket=bucket, Key=key)
            async with response["Body"] as stream:
                return bytes(await stream.read())

    async def delete_object(self, *, bucket: str, key: str) -> None:
        with _mapped(bucket, key):
            await self._client.delete_object(Bucket=bucket, Key=key)


class BucketRoutes:
    """An `ObjectStore` over several S3 locations: each bucket's requests go to the store of
    its location (`routes`, e.g. a namespace whose offload policy names another endpoint), the
    rest to `default`."""

    def __init__(self, default: ObjectStore, routes: Mapping[str, ObjectStore]) -> None:
        self._default = default
        self._routes = dict(routes)

    def _for(self, bucket: str) -> ObjectStore:
        return self._routes.get(bucket, self._default)

    async def ensure_bucket(self, bucket: str) -> None:
        await self._for(bucket).ensure_bucket(bucket)

    async def put_object(
        self, *, bucket: str, key: str, body: bytes, metadata: Mapping[str, str]
    ) -> None:
        await self._for(bucket).put_object(bucket=bucket, key=key, body=body, metadata=metadata)

    async def list_keys(self, *, bucket: str) -> list[str]:
        return await self._for(bucket).list_keys(bucket=bucket)

    async def head_metadata(self, *, bucket: str, key: str) -> dict[str, str]:
        return await self._for(bucket).head_metadata(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await self._for(bucket).get_object(bucket=bucket, key=key)

    async def delete_object(self, *, bucket: str, key: str) -> None:
        await self._for(bucket).delete_object(bucket=bucket, key=key)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


@contextlib.contextmanager
def _mapped(bucket: str, key: str) -> Any:
    try:
        yield
    except ClientError as e:
        if _code(e) in ("404", "NoSuchKey", "NoSuchBucket", "NotFound"):
            raise NotFound(f"s3://{bucket}/{key} does not exist") from e
        raise Unavailable(f"S3 error on s3://{bucket}/{key}: {e}") from e
    except BotoCoreError as e:
        raise Unavailable(f"S3 unreachable for s3://{bucket}/{key}: {e}") from e


@contextlib.asynccontextmanager
async def open_object_store(client_config: Mapping[str, str]) -> AsyncIterator[S3ObjectStore]:
    """An `S3ObjectStore` for `S3Server.client_config()`-style settings, closed on exit."""
    session = get_session()
    async with session.create_client("s3", **client_config) as client:
        yield S3ObjectStore(client)


@contextlib.asynccontextmanager
async def open_object_stores(
    client_config: Mapping[str, str], routes: Mapping[str, Mapping[str, str]] | None = None
) -> AsyncIterator[ObjectStore]:
    """`open_object_store`, with the buckets of `routes` (bucket -> client settings) at their
    own locations (`BucketRoutes`)."""
    async with contextlib.AsyncExitStack() as stack:
        default = await stack.enter_async_context(open_object_store(client_config))
        if not routes:
            yield default
            return
        opened: dict[str, ObjectStore] = {}
        for bucket, config in routes.items():
            opened[bucket] = await stack.enter_async_context(open_object_store(config))
        yield BucketRoutes(default, opened)
