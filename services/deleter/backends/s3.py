"""Offload delete on S3 (aiobotocore): the only deleter module that imports it.

Keys of concurrent PDLIs, of any ledgers, are coalesced per bucket into DeleteObjects
requests of up to 1,000 keys (the S3 limit), sent with `Quiet` off so that the answer names
every key. A delete counts as done when each of its keys came back `Deleted` (S3 answers that
for a key it did not have too: "not found" is success) or `NoSuchKey`; any other per-key
error fails it, and a key the answer does not name is not settled. S3 is strongly consistent,
so a key answered `Deleted` is absent (docs/verifier.md, "Offloaded copies: what one delete
needs to know"). With `confirm_by_listing`, a listing of the ledger's key prefix must also
show both absent: defence in depth for stores whose answers are not trusted. Each request is
one place under the adaptive concurrency limit; throttling (`SlowDown`, 503) and requests
without an answer cut it.

The verdict names where the verifier found the objects (endpoint and region, empty for the
configured ones); the delete goes there, through one client per location (`S3Clients`), and
only to an allowed endpoint and bucket. One adaptive limit covers every location.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from services.core.adaptive import Signal
from services.core.config import S3Config
from services.core.errors import InvalidArgument
from services.core.s3_client import THROTTLE_CODES, S3Clients, open_s3_clients
from services.core.s3_locations import (
    UNCONFIGURED,
    EndpointNotAllowed,
    LocationRefused,
    S3Location,
    TooManyLocations,
    default_location,
    resolve_location,
)
from services.deleter.backends.limits import BackendLimits
from services.deleter.batching import Batcher
from services.deleter.ports import DeleteFailed, DeleteResult, Tier
from services.metadata.offload import parse_object_key
from tombstone.v1 import verifier_pb2 as _vf

MAX_KEYS_PER_REQUEST = 1000
# Errors that will not heal by retrying; an operator must act (then replay the DLQ).
PERMANENT_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "NoSuchBucket",
        "AccountProblem",
        "InvalidBucketName",
    }
)
# Per-key errors that mean the service, not the request, failed (it answers 5xx for them).
OUTAGE_CODES = frozenset({"InternalError", "ServiceUnavailable", "SlowDown"})
# Per-key answers that mean the key is absent now.
_ABSENT_CODES = frozenset({"NoSuchKey", "NotFound"})
# The result of a key the DeleteObjects answer names neither deleted nor failed.
UNREPORTED = "Unreported: the DeleteObjects answer does not name this key"


class S3OffloadDeleter:
    """`OffloadDeleter` for blob-store offloads, limited to the allowed buckets and endpoints."""

    def __init__(
        self,
        client: Any,
        *,
        allowed_buckets: frozenset[str],
        limits: BackendLimits,
        batch_max: int = MAX_KEYS_PER_REQUEST,
        clients: S3Clients | None = None,
        default_location: S3Location = UNCONFIGURED,
        allowed_endpoints: frozenset[str] = frozenset(),
        confirm_by_listing: bool = False,
        list_page_size: int = 1000,
    ) -> None:
        """`client` serves the configured location (`default_location`). With `clients`,
        evidence naming another allowed location is deleted through that location's client;
        without, `client` serves every location (one S3 only). `confirm_by_listing` adds a
        listing of each ledger's keys after its delete (`list_page_size` keys a page)."""
        self._client = client
        self._clients = clients
        self._default = default_location
        self._allowed_endpoints = allowed_endpoints
        self._allowed = allowed_buckets
        self._limits = limits
        self._batch_max = min(batch_max, MAX_KEYS_PER_REQUEST)
        self._batchers: dict[tuple[S3Location, str], Batcher[str, str | None]] = {}
        self._confirm_by_listing = confirm_by_listing
        self._list_page_size = list_page_size

    async def delete_offloaded(
        self, *, ledger_id: int, evidence: _vf.OffloadEvidence
    ) -> DeleteResult:
        bucket, keys = evidence.bucket, list(dict.fromkeys(evidence.keys))
        location = self.check(ledger_id, evidence)
        client = await self._client_for(location)
        batcher = self._batcher(client, location, bucket)
        errors = await asyncio.gather(*(batcher.submit(key) for key in keys))
        failed = {key: error for key, error in zip(keys, errors, strict=True) if error}
        if failed:
            codes = {error.split(":", 1)[0] for error in failed.values()}
            raise DeleteFailed(
                Tier.S3,
                f"s3://{bucket} at {location.describe()}: {failed}",
                permanent=bool(codes & PERMANENT_CODES),
                outage=codes <= OUTAGE_CODES,
            )
        if self._confirm_by_listing:
            await self._confirm_absent(client, bucket, keys)
        result: dict[str, object] = {"bucket": bucket, "keys": keys, "region": location.region}
        if location.endpoint is not None:
            result["endpoint"] = location.endpoint
        return DeleteResult(Tier.S3, True, result)

    def check(self, ledger_id: int, evidence: _vf.OffloadEvidence) -> S3Location:
        """`DeleteFailed` unless the evidence may be deleted here (bucket and endpoint allowed,
        keys of this ledger); the location to delete at. No I/O (a preview runs it too)."""
        self._check(ledger_id, evidence.bucket, list(dict.fromkeys(evidence.keys)))
        return self._location(evidence)

    def _location(self, evidence: _vf.OffloadEvidence) -> S3Location:
        """Where the verifier found the objects; an endpoint off this deleter's allow-list is
        a permanent failure naming it (a verifier allowing more than its deleters)."""
        try:
            return resolve_location(
                evidence.endpoint,
                evidence.region,
                default=self._default,
                allowed_endpoints=self._allowed_endpoints,
            )
        except EndpointNotAllowed as exc:
            raise DeleteFailed(
                Tier.S3, f"endpoint {exc.endpoint!r} is not allowed", permanent=True
            ) from exc
        except LocationRefused as exc:
            raise DeleteFailed(Tier.S3, f"offload location: {exc}", permanent=True) from exc

    async def _client_for(self, location: S3Location) -> Any:
        if self._clients is None or location == self._default:
            return self._client
        try:
            return await self._clients.client(location)
        except TooManyLocations as exc:
            raise DeleteFailed(Tier.S3, str(exc)) from exc

    async def probe(self) -> None:
        """HEAD of an allowed bucket: returns once S3 answers (outage probe). Any answer but a
        5xx shows the service reachable, a 403 or 404 included (those are not outages)."""
        try:
            await self._client.head_bucket(Bucket=min(self._allowed))
        except ClientError as exc:
            if _server_error(exc):
                raise

    def _check(self, ledger_id: int, bucket: str, keys: Sequence[str]) -> None:
        if bucket not in self._allowed:
            raise DeleteFailed(Tier.S3, f"bucket {bucket!r} is not allowed", permanent=True)
        if not keys:
            raise DeleteFailed(Tier.S3, "evidence names no object keys", permanent=True)
        for key in keys:
            try:
                named = parse_object_key(key).ledger_id
            except (InvalidArgument, ValueError) as exc:
                raise DeleteFailed(Tier.S3, f"key {key!r}: {exc}", permanent=True) from exc
            if named != ledger_id:
                raise DeleteFailed(
                    Tier.S3, f"key {key!r} names ledger {named}, not {ledger_id}", permanent=True
                )

    def _batcher(self, client: Any, location: S3Location, bucket: str) -> Batcher[str, str | None]:
        # Per location as well: one DeleteObjects request goes to one endpoint.
        batcher = self._batchers.get((location, bucket))
        if batcher is None:

            async def run(keys: Sequence[str]) -> list[str | None]:
                return await self._delete_objects(client, bucket, keys)

            batcher = Batcher(
                run, max_batch=self._batch_max, limiter=self._limits.limiter, judge=_judge
            )
            self._batchers[(location, bucket)] = batcher
        return batcher

    async def _delete_objects(
        self, client: Any, bucket: str, keys: Sequence[str]
    ) -> list[str | None]:
        """One DeleteObjects request (the batcher holds its place under the limit); per key,
        None (absent now) or `Code: message`."""
        unique = list(dict.fromkeys(keys))
        request = {"Objects": [{"Key": key} for key in unique], "Quiet": False}
        try:
            await self._limits.pace()
            response = await client.delete_objects(Bucket=bucket, Delete=request)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            raise DeleteFailed(
                Tier.S3,
                f"DeleteObjects s3://{bucket}: {code or exc}",
                permanent=code in PERMANENT_CODES,
                outage=_server_error(exc),
            ) from exc
        except (BotoCoreError, OSError, TimeoutError) as exc:
            # No answer (connection refused, reset, timed out): S3 is unreachable.
            raise DeleteFailed(
                Tier.S3, f"DeleteObjects s3://{bucket}: {exc!r}", outage=True
            ) from exc
        return per_key_results(response, keys)

    async def _confirm_absent(self, client: Any, bucket: str, keys: Sequence[str]) -> None:
        """A listing under the keys' common prefix must show none of them. Every page that can
        hold one is read: a truncated page proves nothing about the keys after it."""
        prefix = os.path.commonprefix(list(keys))  # noqa: RUF071 - S3 keys, not paths
        last = max(keys)
        listed: set[str] = set()
        token: str | None = None
        while True:
            page = await self._list_page(client, bucket, prefix, token)
            found = [item["Key"] for item in page.get("Contents", [])]
            listed.update(found)
            token = page.get("NextContinuationToken")
            # Keys come in UTF-8 binary order: past the last of ours, no page can hold one.
            if not page.get("IsTruncated") or not token or (found and max(found) >= last):
                break
        still = sorted(listed.intersection(keys))
        if still:
            raise DeleteFailed(Tier.S3, f"s3://{bucket}: {still} still present after delete")

    async def _list_page(
        self, client: Any, bucket: str, prefix: str, token: str | None
    ) -> dict[str, Any]:
        """One ListObjectsV2 page, under the limit; an unanswered or refused one fails."""
        more = {"ContinuationToken": token} if token else {}
        try:
            async with self._limits.operation():
                page: dict[str, Any] = await client.list_objects_v2(
                    Bucket=bucket, Prefix=prefix, MaxKeys=self._list_page_size, **more
                )
                return page
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            raise DeleteFailed(
                Tier.S3,
                f"listing s3://{bucket}/{prefix}: {code or exc}",
                permanent=code in PERMANENT_CODES,
                outage=_server_error(exc),
            ) from exc
        except (BotoCoreError, OSError, TimeoutError) as exc:
            raise DeleteFailed(
                Tier.S3, f"listing s3://{bucket}/{prefix}: {exc!r}", outage=True
            ) from exc

    async def aclose(self) -> None:
        for batcher in self._batchers.values():
            await batcher.aclose()


@contextlib.asynccontextmanager
async def open_s3_deleter(
    config: S3Config, *, limits: BackendLimits, timeout: float = 10.0, **kwargs: Any
) -> AsyncIterator[S3OffloadDeleter]:
    """An `S3OffloadDeleter` with its own clients (one per location), closed on exit."""
    async with open_s3_clients(config, timeout=timeout) as clients:
        default = default_location(config)
        deleter = S3OffloadDeleter(
            await clients.client(default),
            allowed_buckets=config.allowed_buckets,
            limits=limits,
            clients=clients,
            default_location=default,
            allowed_endpoints=config.allowed_endpoints,
            **kwargs,
        )
        try:
            yield deleter
        finally:
            await deleter.aclose()


def per_key_results(response: Mapping[str, Any], keys: Sequence[str]) -> list[str | None]:
    """Per requested key, from a DeleteObjects answer (`Quiet` off): None when it is absent now
    (`Deleted`, or a `NoSuchKey` error), else `Code: message`; a key named by neither list is
    `UNREPORTED`, never taken as deleted."""
    deleted = {item.get("Key") for item in response.get("Deleted", [])}
    errors: dict[str, str | None] = {}
    for error in response.get("Errors", []):
        code = error.get("Code", "")
        errors[error.get("Key", "")] = (
            None if code in _ABSENT_CODES else f"{code}: {error.get('Message', '')}"
        )
    # An error wins over a `Deleted` entry for the same key: the answer contradicts itself.
    return [errors.get(key, None if key in deleted else UNREPORTED) for key in keys]


def _judge(errors: Sequence[str | None]) -> Signal:
    """A DeleteObjects whose keys came back throttled (per-key `SlowDown`)."""
    if any(error and error.split(":", 1)[0] in THROTTLE_CODES for error in errors):
        return Signal.THROTTLED
    return Signal.ANSWERED


def _server_error(exc: ClientError) -> bool:
    """A 5xx answer: the service failed, not the request (an outage, not the PDLI's fault)."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return isinstance(status, int) and status >= 500
