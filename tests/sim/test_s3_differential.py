"""The in-memory S3 against moto's S3 server on the same seeded operation sequences.

Each call goes to both through the aiobotocore-shaped surface the real adapters use
(`services.verifier._s3`, `services.deleter.backends.s3`); the answers are compared: user
metadata on HEAD, bytes of ranged GETs, listed keys, the keys DeleteObjects reports deleted,
and the error code of each failure (HEAD's bare `404`, GET's `NoSuchKey`, `NoSuchBucket`,
`InvalidRange`). Partial DeleteObjects failures are drawn only while faults are on, so the
sequences here have none.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiobotocore.session import get_session
from botocore.exceptions import ClientError

from devstack.s3 import S3Server
from sim.s3 import S3, S3Client
from sim.scheduler import FaultRates, Scheduler

BUCKETS = ["offload", "missing"]
KEYS = ["u-ledger-1", "u-ledger-1-index", "u-ledger-2", "v-ledger-10"]


async def _call(op: Callable[[], Awaitable[dict[str, Any]]], kind: str) -> object:
    try:
        response = await op()
    except ClientError as e:
        return ("error", str(e.response.get("Error", {}).get("Code")))
    if kind == "head":
        return {k.lower(): v for k, v in response.get("Metadata", {}).items()}
    if kind == "get":
        async with response["Body"] as body:
            return await body.read()
    if kind == "list":
        return [item["Key"] for item in response.get("Contents", [])]
    if kind == "delete":
        return sorted(item["Key"] for item in response.get("Deleted", []))
    return None


def _operations(rng: random.Random, client: Any) -> list[tuple[str, Callable[[], Any]]]:
    ops: list[tuple[str, Callable[[], Any]]] = []
    for _ in range(50):
        bucket = "offload" if rng.random() < 0.9 else "missing"
        key = rng.choice(KEYS)
        kind = rng.choice(["put", "put", "head", "get", "list", "delete"])
        if kind == "put":
            body = bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
            meta = {"managedledgername": f"t/ns/persistent/x{rng.randrange(3)}"}
            op = partial(client.put_object, Bucket=bucket, Key=key, Body=body, Metadata=meta)
        elif kind == "head":
            op = partial(client.head_object, Bucket=bucket, Key=key)
        elif kind == "get":
            start = rng.randrange(25)
            byte_range = f"bytes={start}-{start + 4}"
            op = partial(client.get_object, Bucket=bucket, Key=key, Range=byte_range)
        elif kind == "list":
            prefix = rng.choice(["", "u-", "u-ledger-1", "v"])
            op = partial(client.list_objects_v2, Bucket=bucket, Prefix=prefix, MaxKeys=100)
        else:
            keys = sorted(set(rng.sample(KEYS, rng.randint(1, 3))))
            request = {"Objects": [{"Key": k} for k in keys], "Quiet": False}
            op = partial(client.delete_objects, Bucket=bucket, Delete=request)
        ops.append((kind, op))
    return ops


async def test_in_memory_s3_answers_as_moto(s3: S3Server) -> None:
    async with get_session().create_client("s3", **s3.client_config()) as moto:
        await moto.create_bucket(Bucket="offload")
        for seed in range(3):
            sched = Scheduler(seed, FaultRates(0.0, 0.0, 0.0, max_delay=0.0))
            sched.faults_on = False
            memory = S3(sched)
            memory.buckets["offload"] = {}
            listed = await moto.list_objects_v2(Bucket="offload")
            for item in listed.get("Contents", []):
                await moto.delete_object(Bucket="offload", Key=item["Key"])
            pairs = zip(
                _operations(random.Random(seed), moto),
                _operations(random.Random(seed), S3Client(memory, "differential")),
                strict=True,
            )
            for step, ((kind, on_moto), (_, on_memory)) in enumerate(pairs):
                expected = await _call(on_moto, kind)
                got = await _call(on_memory, kind)
                assert got == expected, f"seed {seed} step {step} {kind}: {got} != {expected}"
