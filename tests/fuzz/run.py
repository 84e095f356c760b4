"""The fuzz campaign: generated requests over real gRPC channels to the three real services.

    python -m tests.fuzz.run [--requests N] [--seed S] [--services marker,verifier,deleter]

Starts ZooKeeper, moto S3 and the devstack broker (or uses the ones a test hands in), writes
a small simulated cluster, starts the services as processes with auth on, then for each
service draws N calls (tests/fuzz/strategies.py) and sends them as raw bytes through a
generic channel method, in batches. The oracles (docs/fuzz.md):

* crash: the process exited, its health service stopped answering SERVING, or its log shows
  an exception no status was mapped from;
* hang: a call ran past its deadline;
* unexpected status: anything but the documented codes, or a documented one for the wrong
  reason (auth refused a good token, let a bad one through, INVALID_ARGUMENT not naming a
  request field, RESOURCE_EXHAUSTED for a small message...);
* a write by a rejected request: ZooKeeper's subtrees, the topics and the bucket are
  snapshotted around every batch; a batch with no accepted call must change nothing.

Ends with `fuzz: <n> requests, <c> crashes, <u> unexpected statuses`; exit 0 iff c = u = 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from grpc import aio
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.deleter.stack import SMALL_SPEC, SYSTEM, create_topics, write_cluster
from tests.fuzz.services import SURFACES, Running, Surface, start_all, token_table
from tests.fuzz.strategies import Credentials, Payload, credentials, message_type, payloads
from tests.fuzz.world import World, diff

CALL_DEADLINE = 20.0
BATCH = 50
CONCURRENCY = 8
MAX_MESSAGE = 4 * 1024 * 1024  # the services' default TOMBSTONE_GRPC_MAX_MESSAGE_BYTES
AUTH_CODES = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
FIELD_PATH = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_]*)(\[\d+\])?(\.[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?)*: "
)


@dataclass(frozen=True)
class Call:
    method: str
    payload: Payload
    credentials: Credentials


@dataclass
class Outcome:
    """What one service's campaign found."""

    service: str
    requests: int = 0
    crashes: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    accepted_writes: int = 0
    seconds: float = 0.0


def field_names(descriptor: Descriptor, seen: set[str] | None = None) -> set[str]:
    """Every field name reachable from a request message (what a message may name)."""
    names: set[str] = set()
    seen = seen if seen is not None else set()
    if descriptor.full_name in seen:
        return names
    seen.add(descriptor.full_name)
    for item in descriptor.fields:
        names.add(item.name)
        if item.type == FieldDescriptor.TYPE_MESSAGE:
            names |= field_names(message_type(item), seen)
    return names


# --- generation ----------------------------------------------------------------------


def _huge(surface: Surface) -> list[Call]:
    """Oversized fields and batches: a few per method, sent with an allowed token."""
    calls: list[Call] = []
    for method, descriptor in surface.methods.items():
        token = next(t for r, t in _TOKENS.items() if r in surface.roles[method])
        creds = Credentials("allowed", (("authorization", f"Bearer {token}"),))
        big = "x" * (MAX_MESSAGE + 1024)
        for item in descriptor.fields:
            message = _message_class(descriptor)()
            if item.type == FieldDescriptor.TYPE_STRING and not item.is_repeated:
                setattr(message, item.name, big)
            elif item.type == FieldDescriptor.TYPE_STRING:
                getattr(message, item.name).extend(["y" * 64] * 20_000)  # a long list
            elif item.is_repeated and item.type == FieldDescriptor.TYPE_INT64:
                getattr(message, item.name).extend(range(200_000))
            elif item.is_repeated and item.type == FieldDescriptor.TYPE_MESSAGE:
                element = getattr(message, item.name)
                for index in range(120_000):
                    element.add()
                    if index == 0:
                        continue
            else:
                continue
            calls.append(Call(method, Payload("huge", message.SerializeToString()), creds))
        calls.append(Call(method, Payload("huge", b"\x0a" + b"\xff" * 5 + b"z" * 64), creds))
        calls.append(Call(method, Payload("huge", bytes(MAX_MESSAGE + 16)), creds))
    return calls


def _message_class(descriptor: Descriptor) -> type:
    from google.protobuf.message_factory import GetMessageClass

    return GetMessageClass(descriptor)


_TOKENS: dict[str, str] = {}


def generate(surface: Surface, count: int, tokens: dict[str, str], rng_seed: int) -> list[Call]:
    """`count` calls for the service, drawn by hypothesis from the descriptors."""
    _TOKENS.clear()
    _TOKENS.update(tokens)
    # Each draw is a payload with two credentials: every message is sent twice, once per
    # credential, which halves the generation work (the costly part) per request.
    per_method = [
        st.tuples(
            st.just(method),
            payloads(descriptor),
            credentials(tokens, surface.roles[method]),
            credentials(tokens, surface.roles[method]),
        )
        for method, descriptor in surface.methods.items()
    ]
    strategy = st.one_of(*per_method)
    huge = _huge(surface)
    # A path no servicer registers, to check UNIMPLEMENTED stays UNIMPLEMENTED.
    service = next(iter(surface.methods)).rsplit("/", 1)[0]
    drawn = [Call(f"{service}/NoSuchMethod", Payload("message", b""), huge[0].credentials)]
    wanted = max(count - len(huge), 0)

    @seed(rng_seed)
    @settings(
        max_examples=(wanted + 1) // 2,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(item: tuple[str, Payload, Credentials, Credentials]) -> None:
        method, payload, first, second = item
        drawn.extend((Call(method, payload, first), Call(method, payload, second)))

    collect()
    rest = drawn[:wanted]
    # Spread the oversized calls through the campaign rather than sending them first.
    step = max(len(rest) // (len(huge) + 1), 1)
    for index, call in enumerate(huge):
        rest.insert(min((index + 1) * step + index, len(rest)), call)
    return rest


# --- judging -------------------------------------------------------------------------


def judge(surface: Surface, call: Call, code: grpc.StatusCode, details: str) -> str | None:
    """None when the status is the documented answer to this call; else what is wrong."""
    kind, creds = call.payload.kind, call.credentials.kind
    if call.method not in surface.methods:
        return None if code == grpc.StatusCode.UNIMPLEMENTED else f"unknown method got {code}"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        if len(call.payload.data) > MAX_MESSAGE:
            return None
        return f"RESOURCE_EXHAUSTED for a {len(call.payload.data)}-byte message: {details}"
    if creds != "allowed":
        expected = (
            grpc.StatusCode.PERMISSION_DENIED
            if creds == "wrong_role"
            else grpc.StatusCode.UNAUTHENTICATED
        )
        if code == expected:
            return None
        return f"{creds} credentials got {code.name} (expected {expected.name}): {details}"
    if code in AUTH_CODES:
        return f"an allowed token got {code.name}: {details}"
    if code == grpc.StatusCode.OK:
        if len(call.payload.data) > MAX_MESSAGE:
            return "an oversized message was accepted"
        return None
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        match = FIELD_PATH.match(details)
        allowed = field_names(surface.methods[call.method]) | {"request"}
        if match is None or match.group(1) not in allowed:
            return f"INVALID_ARGUMENT not naming a request field: {details[:200]!r}"
        return None
    if code in surface.documented and kind in ("message", "damaged", "malformed"):
        return None
    return f"{code.name} ({kind} payload): {details[:300]}"


# --- sending -------------------------------------------------------------------------


async def send(channel: aio.Channel, call: Call) -> tuple[grpc.StatusCode, str, float]:
    method = channel.unary_unary(call.method, request_serializer=None, response_deserializer=None)
    started = time.monotonic()
    try:
        await method(call.payload.data, metadata=call.credentials.metadata, timeout=CALL_DEADLINE)
        return grpc.StatusCode.OK, "", time.monotonic() - started
    except aio.AioRpcError as err:
        return err.code(), err.details() or "", time.monotonic() - started


async def fuzz_service(running: Running, calls: Sequence[Call], world: World) -> Outcome:
    surface = running.surface
    outcome = Outcome(surface.name)
    started = time.monotonic()
    options = [
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ]
    limit = asyncio.Semaphore(CONCURRENCY)
    async with aio.insecure_channel(running.address, options=options) as channel:
        before = await world.snapshot()
        for start in range(0, len(calls), BATCH):
            batch = calls[start : start + BATCH]

            async def one(call: Call) -> tuple[Call, grpc.StatusCode, str]:
                async with limit:
                    code, details, _ = await send(channel, call)
                return call, code, details

            results = await asyncio.gather(*(one(c) for c in batch))
            accepted = 0
            for call, code, details in results:
                outcome.requests += 1
                outcome.codes[code.name] += 1
                outcome.kinds[f"{call.payload.kind}/{call.credentials.kind}"] += 1
                if code == grpc.StatusCode.OK:
                    accepted += 1
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    outcome.crashes.append(f"hang: {call.method} {_show(call)}")
                    continue
                if code == grpc.StatusCode.UNAVAILABLE and not running.alive():
                    continue  # counted once below as a crash
                problem = judge(surface, call, code, details)
                if problem is not None:
                    outcome.unexpected.append(f"{call.method}: {problem} <- {_show(call)}")
            if not running.alive():
                outcome.crashes.append(
                    f"process exited ({running.process.returncode}) in batch at {start}"
                )
                break
            after = await world.snapshot()
            changes = diff(before, after)
            if changes and accepted == 0:
                outcome.unexpected.append(
                    f"rejected batch at {start} wrote: {changes[:5]} "
                    f"<- {[_show(c) for c in batch[:3]]}"
                )
            elif changes:
                outcome.accepted_writes += len(changes)
            before = after
    if running.alive() and not await running.serving():
        outcome.crashes.append("health no longer SERVING")
    for line in running.unhandled():
        outcome.crashes.append(f"log: {line[:400]}")
    outcome.seconds = time.monotonic() - started
    return outcome


def _show(call: Call) -> str:
    data = call.payload.data
    shown = data[:80].hex() + ("..." if len(data) > 80 else "")
    return f"[{call.payload.kind} {len(data)}B {call.credentials.kind}] {shown}"


# --- the campaign --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def stack(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, workdir: Path
) -> AsyncIterator[tuple[dict[str, Running], World, dict[str, str]]]:
    """World written, topics created, services started; everything stopped on exit."""
    create_topics(broker)
    await write_cluster(zk, s3, SMALL_SPEC)
    tokens = token_table()
    running = await start_all(zk, s3, broker, workdir, tokens)
    try:
        async with ZkMetadataStore.connect(zk.address) as store:
            topics = [SYSTEM, f"{SYSTEM}-RETRY", f"{SYSTEM}-DLQ"]
            yield running, World(store, broker, s3, topics), tokens
    finally:
        await asyncio.gather(*(r.stop() for r in running.values()))


async def campaign(
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    workdir: Path,
    *,
    requests: int,
    rng_seed: int = 14,
    services: Sequence[str] = ("marker", "verifier", "deleter"),
) -> list[Outcome]:
    outcomes = []
    async with stack(zk, s3, broker, workdir) as (running, world, tokens):
        for index, name in enumerate(services):
            calls = generate(SURFACES[name], requests, tokens, rng_seed + index)
            outcome = await fuzz_service(running[name], calls, world)
            outcomes.append(outcome)
            print(report_line(outcome), flush=True)
    return outcomes


def report_line(outcome: Outcome) -> str:
    codes = ", ".join(f"{k} {v}" for k, v in outcome.codes.most_common())
    return (
        f"{outcome.service}: {outcome.requests} requests in {outcome.seconds:.1f}s, "
        f"{len(outcome.crashes)} crashes, {len(outcome.unexpected)} unexpected "
        f"({codes}; {outcome.accepted_writes} changes by accepted calls)"
    )


def summary(outcomes: Sequence[Outcome]) -> str:
    requests = sum(o.requests for o in outcomes)
    crashes = sum(len(o.crashes) for o in outcomes)
    unexpected = sum(len(o.unexpected) for o in outcomes)
    return f"fuzz: {requests} requests, {crashes} crashes, {unexpected} unexpected statuses"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__)
    parser.add_argument("--requests", type=int, default=10_000, help="calls per service")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--services", default="marker,verifier,deleter")
    parser.add_argument("--logs", type=Path, help="keep the services' logs in this directory")
    args = parser.parse_args(argv)
    names = [n for n in args.services.split(",") if n]

    async def run(workdir: Path) -> list[Outcome]:
        with ZooKeeperServer() as zk, S3Server() as s3, PulsarBrokerProcess() as broker:
            return await campaign(
                zk, s3, broker, workdir, requests=args.requests, rng_seed=args.seed, services=names
            )

    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
        outcomes = asyncio.run(run(args.logs))
    else:
        with tempfile.TemporaryDirectory(prefix="tombstone-fuzz-") as tmp:
            outcomes = asyncio.run(run(Path(tmp)))
    for outcome in outcomes:
        for line in outcome.crashes[:20] + outcome.unexpected[:20]:
            print(f"  {outcome.service}: {line}")
    line = summary(outcomes)
    print(line)
    crashes = sum(len(o.crashes) for o in outcomes)
    unexpected = sum(len(o.unexpected) for o in outcomes)
    return 0 if crashes == 0 and unexpected == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
