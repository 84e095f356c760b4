"""Cost of the core bootstrap per call: interceptors (log context, auth, error mapping, metrics)
against a bare `grpc.aio` server with the same servicer, in the same run.

    .venv/bin/python -m benchmarks.core_rpc [--calls 4000] [--concurrency 32] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import timedelta

import structlog
from grpc import aio

from benchmarks._truth import parse, run
from devstack.fake_verifier import METHOD_ROLES, FakeVerifier, add_fake_verifier, verify_request
from services.core.config import AuthConfig, GrpcServerConfig, Principal
from services.core.grpc_server import ServiceRunner
from tombstone.v1 import verifier_pb2_grpc

TOKEN = "bench-token"


async def _drive(port: int, calls: int, concurrency: int, token: str | None) -> float:
    """Calls per second over `calls` unary calls, `concurrency` at a time (bounded)."""
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        await stub.Verify(verify_request(1), metadata=metadata, timeout=10)
        remaining = iter(range(calls))

        async def worker() -> None:
            for _ in remaining:
                await stub.Verify(verify_request(1), metadata=metadata, timeout=10)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return calls / (time.perf_counter() - started)


async def bare_rate(calls: int, concurrency: int) -> float:
    server = aio.server()
    verifier_pb2_grpc.add_VerifierServicer_to_server(FakeVerifier(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        return await _drive(port, calls, concurrency, None)
    finally:
        await server.stop(None)


async def core_rate(calls: int, concurrency: int) -> float:
    tokens = {TOKEN: Principal("bench", frozenset({"deleter"}))}
    config = GrpcServerConfig(
        grace_period=timedelta(0), auth=AuthConfig(enabled=True, tokens=tokens)
    )
    runner = ServiceRunner(
        name="bench", grpc=config, method_roles=METHOD_ROLES, handle_signals=False
    )
    add_fake_verifier(runner)
    async with runner:
        port = await runner.start()
        return await _drive(port, calls, concurrency, TOKEN)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parse(parser, {"calls": 100, "rounds": 1})
    # Per-call lines would measure the terminal, not the bootstrap.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    bare, core = [], []
    # Alternate the two so that load from elsewhere on the machine hits both alike.
    for _ in range(args.rounds):
        bare.append(await bare_rate(args.calls, args.concurrency))
        core.append(await core_rate(args.calls, args.concurrency))
    b, c = statistics.median(bare), statistics.median(core)
    print(f"calls={args.calls} concurrency={args.concurrency} rounds={args.rounds} (medians)")
    print(f"bare grpc.aio server : {b:8.0f} calls/s")
    print(f"core ServiceRunner   : {c:8.0f} calls/s (auth on, interceptors, metrics)")
    print(f"ratio core/bare      : {c / b:8.2f}")


if __name__ == "__main__":
    run(lambda: asyncio.run(main()))
