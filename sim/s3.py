"""In-memory S3 with the client surface the real adapters call (aiobotocore-shaped).

Both `services.verifier._s3.S3ObjectStore` and `services.deleter.backends.s3.S3OffloadDeleter`
run unchanged on `S3Client`: errors are botocore `ClientError`s with S3's codes and HTTP
statuses, a missing key is a 404 (`NoSuchKey` on GET, `404` on HEAD), a missing bucket
`NoSuchBucket`; DeleteObjects reports per-key errors and deletes the others (a partial
failure); a lost answer is a `ReadTimeoutError` after the request applied or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

from sim.scheduler import Fault, Scheduler


@dataclass
class Blob:
    body: bytes
    metadata: dict[str, str]
    last_modified_ms: int


class S3:
    """The object store's state (durable across crashes of the services)."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.buckets: dict[str, dict[str, Blob]] = {}
        self.deleted: list[tuple[str, str]] = []
        """Every (bucket, key) removed by a client, in order (for the invariants)."""
        self.on_delete: Callable[[str, str, str], None] = lambda bucket, key, by: None
        """Called before a client removes an object: bucket, key, the client's name."""
        self.on_request: Callable[[str, str], None] = lambda key, by: None
        """Called with every key (or prefix) a client's request names, and the client's name:
        what the services ask of S3 (for the names check)."""

    def put(self, bucket: str, key: str, body: bytes, metadata: dict[str, str]) -> None:
        self.buckets.setdefault(bucket, {})[key] = Blob(body, metadata, self.sched.now_ms())


def _error(code: str, status: int, operation: str, message: str = "") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message or code},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aenter__(self) -> _Body:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def read(self) -> bytes:
        return self._data


class S3Client:
    """One service's S3 client."""

    def __init__(self, s3: S3, name: str) -> None:
        self._s3 = s3
        self._sched = s3.sched
        self.name = name

    async def _call(self, operation: str, bucket: str) -> Fault:
        fault = await self._sched.io(f"s3[{self.name}] {operation} {bucket}")
        if fault is Fault.BEFORE:
            raise ReadTimeoutError(endpoint_url=f"s3://{bucket}")
        if fault is Fault.ERROR:
            raise _error("ServiceUnavailable", 503, operation)
        if bucket not in self._s3.buckets:
            # A HEAD has no body: S3 can only answer the status, whose code botocore names "404".
            code = "404" if operation.startswith("Head") else "NoSuchBucket"
            raise _error(code, 404, operation)
        return fault

    async def _answer(self, fault: Fault, operation: str, bucket: str) -> None:
        if fault is Fault.AFTER:
            await self._sched.delay()
            raise ReadTimeoutError(endpoint_url=f"s3://{bucket} ({operation})")

    async def head_bucket(self, *, Bucket: str) -> dict[str, Any]:
        fault = await self._call("HeadBucket", Bucket)
        await self._answer(fault, "HeadBucket", Bucket)
        return {}

    async def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self._s3.on_request(Key, self.name)
        fault = await self._call("HeadObject", Bucket)
        blob = self._s3.buckets[Bucket].get(Key)
        await self._answer(fault, "HeadObject", Bucket)
        if blob is None:
            raise _error("404", 404, "HeadObject", "Not Found")
        return {"Metadata": dict(blob.metadata), "ContentLength": len(blob.body)}

    async def get_object(self, *, Bucket: str, Key: str, Range: str = "") -> dict[str, Any]:
        self._s3.on_request(Key, self.name)
        fault = await self._call("GetObject", Bucket)
        blob = self._s3.buckets[Bucket].get(Key)
        await self._answer(fault, "GetObject", Bucket)
        if blob is None:
            raise _error("NoSuchKey", 404, "GetObject")
        data = blob.body
        content_range = None
        if Range:
            first, last = Range.removeprefix("bytes=").split("-")
            start, end = int(first), int(last)
            if start >= len(data):
                raise _error("InvalidRange", 416, "GetObject")
            data = data[start : end + 1]
            content_range = f"bytes {start}-{start + len(data) - 1}/{len(blob.body)}"
        return {"Body": _Body(data), "ContentRange": content_range}

    async def put_object(
        self,
        *,
        Bucket: str,
        Key: str,
        Body: bytes = b"",
        Metadata: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        self._s3.on_request(Key, self.name)
        fault = await self._call("PutObject", Bucket)
        self._s3.put(Bucket, Key, Body, dict(Metadata or {}))
        await self._answer(fault, "PutObject", Bucket)
        return {}

    async def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        for item in Delete["Objects"]:
            self._s3.on_request(item["Key"], self.name)
        fault = await self._call("DeleteObjects", Bucket)
        objects = self._s3.buckets[Bucket]
        errors = []
        for item in Delete["Objects"]:
            key = item["Key"]
            if self._sched.faults_on and self._sched.chance(self._sched.rates.error):
                # A partial failure: this key stays, the others of the request go.
                errors.append({"Key": key, "Code": "InternalError", "Message": "try again"})
                continue
            if key in objects:
                self._s3.on_delete(Bucket, key, self.name)
                del objects[key]
                self._s3.deleted.append((Bucket, key))
        await self._answer(fault, "DeleteObjects", Bucket)
        response: dict[str, Any] = {"Errors": errors} if errors else {}
        if not Delete.get("Quiet"):
            failed = {e["Key"] for e in errors}
            response["Deleted"] = [
                {"Key": i["Key"]} for i in Delete["Objects"] if i["Key"] not in failed
            ]
        return response

    async def list_objects_v2(
        self,
        *,
        Bucket: str,
        Prefix: str = "",
        MaxKeys: int = 1000,
    ) -> dict[str, Any]:
        self._s3.on_request(Prefix, self.name)
        fault = await self._call("ListObjectsV2", Bucket)
        keys = sorted(k for k in self._s3.buckets[Bucket] if k.startswith(Prefix))[:MaxKeys]
        await self._answer(fault, "ListObjectsV2", Bucket)
        return {"Contents": [{"Key": k} for k in keys], "KeyCount": len(keys)}
