"""Pre-flight of the offload tier: HeadBucket on each allowed bucket, with the extract's own
endpoint, region and credentials, one try and short timeouts.

A problem of the endpoint or of the credentials is the same for every bucket, so it is
reported once; a missing or forbidden bucket is reported per bucket.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from services.scan.extract.s3 import S3Settings, open_lister
from services.scan.preflight.problems import Problem

CONNECT_TIMEOUT_S = 1.5
"""TCP connect to the endpoint (and botocore's read timeout)."""
CHECK_TIMEOUT_S = 3.5
"""One bucket's HeadBucket, once its client is built."""
SETUP_TIMEOUT_S = 30.0
"""Building the client: the credential chain (which may ask the instance metadata service,
botocore giving each try a second) and loading botocore's service model, local CPU work that
a busy machine can stretch past CHECK_TIMEOUT_S with nothing wrong at the endpoint."""

_MISSING = {"404", "NoSuchBucket", "NotFound"}
_DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden"}
_REGION = {"301", "PermanentRedirect", "AuthorizationHeaderMalformed", "400"}
ENDPOINT_FIX = "start the object store or fix --s3-endpoint (or TOMBSTONE_S3_ENDPOINT_URL)"
CREDENTIALS = "TOMBSTONE_S3_ACCESS_KEY_ID and TOMBSTONE_S3_SECRET_ACCESS_KEY"


async def check_buckets(settings: S3Settings, buckets: Sequence[str]) -> list[Problem]:
    """Every problem found reaching `buckets`; [] when each answered HeadBucket."""
    quick = dataclasses.replace(settings, timeout_s=CONNECT_TIMEOUT_S, retries=0)
    found = await asyncio.gather(*(_check(quick, bucket) for bucket in buckets))
    unique: dict[str, Problem] = {}
    for problem in found:
        if problem is not None:
            unique.setdefault(problem.line, problem)
    return list(unique.values())


def _endpoint(settings: S3Settings) -> str:
    return settings.endpoint_url or f"AWS S3 ({settings.region})"


async def _check(settings: S3Settings, bucket: str) -> Problem | None:
    endpoint = _endpoint(settings)
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S), open_lister(settings) as lister:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                await lister.head_bucket(bucket)
    except ClientError as e:
        return _client_problem(settings, bucket, e)
    except (NoCredentialsError, PartialCredentialsError):
        return Problem(
            "no S3 credentials found",
            f"set {CREDENTIALS} (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, an AWS profile "
            "or an instance role)",
        )
    except EndpointConnectionError as e:
        if _refused(e):
            return Problem(f"S3 endpoint {endpoint}: connection refused", ENDPOINT_FIX)
        return Problem(f"S3 endpoint {endpoint}: cannot connect ({_cause(e)})", ENDPOINT_FIX)
    except ConnectTimeoutError:
        return _silent(endpoint, f"no answer to connect within {CONNECT_TIMEOUT_S:g} s")
    except ReadTimeoutError:
        return _silent(endpoint, f"connected, then no answer within {CONNECT_TIMEOUT_S:g} s")
    except TimeoutError:
        return _silent(endpoint, f"no answer within {CHECK_TIMEOUT_S:g} s")
    except ValueError as e:  # botocore rejects a malformed endpoint URL
        return Problem(f"S3 endpoint {endpoint}: {e}", "give a URL such as http://host:9000")
    except Exception as e:  # any other cause still gets one line, never a traceback
        return Problem(
            f"bucket {bucket!r} at {endpoint}: {type(e).__name__}: {e}",
            "check the endpoint and the bucket",
        )
    return None


def _silent(endpoint: str, what: str) -> Problem:
    return Problem(
        f"S3 endpoint {endpoint}: {what} (host down, unreachable or filtered)",
        "check the endpoint, the network and firewalls, or fix --s3-endpoint",
    )


def _client_problem(settings: S3Settings, bucket: str, error: ClientError) -> Problem:
    code = str(error.response.get("Error", {}).get("Code", ""))
    where = f"bucket {bucket!r} at {_endpoint(settings)}"
    if code in _MISSING:
        return Problem(
            f"{where} does not exist",
            "fix --bucket (the brokers' s3ManagedLedgerOffloadBucket) or --s3-endpoint",
        )
    if code in _DENIED:
        source = CREDENTIALS if settings.access_key_id else "the default AWS credential chain"
        return Problem(
            f"{where}: access denied (HTTP {code}) to the key from {source}",
            f"check {CREDENTIALS} and that the bucket policy allows s3:ListBucket",
        )
    if code in _REGION:
        return Problem(
            f"{where}: HTTP {code} (the bucket may be in another region than {settings.region})",
            "fix --s3-region (or TOMBSTONE_S3_REGION)",
        )
    return Problem(
        f"{where}: HeadBucket failed ({code or error})", "check the endpoint and the bucket"
    )


def _errors(error: BaseException) -> list[BaseException]:
    """`error` and what it wraps: botocore keeps the cause in `kwargs['error']`, aiohttp in
    `os_error`, Python in `__cause__`."""
    seen: list[BaseException] = []
    todo: list[object] = [error]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or any(item is s for s in seen):
            continue
        seen.append(item)
        kwargs = getattr(item, "kwargs", None)
        todo += [
            getattr(item, "os_error", None),
            item.__cause__,
            item.__context__,
            kwargs.get("error") if isinstance(kwargs, dict) else None,
        ]
    return seen


def _refused(error: BaseException) -> bool:
    return any(isinstance(e, ConnectionRefusedError) for e in _errors(error))


def _cause(error: BaseException) -> str:
    inner = _errors(error)[-1]
    return f"{type(inner).__name__}: {inner}"
