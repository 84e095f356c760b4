"""A tiny service on the core bootstrap, run as a subprocess by the shutdown test.

`python -m tests.core.slow_service` reads the usual `TOMBSTONE_*` variables, serves the fake
verifier and exits 0 after SIGTERM once in-flight calls are done.
"""

from __future__ import annotations

import asyncio
import os

from devstack.fake_verifier import METHOD_ROLES, add_fake_verifier
from services.core.config import GrpcServerConfig, LogConfig, MetricsConfig
from services.core.grpc_server import ServiceRunner
from services.core.logging import configure_logging


async def main() -> None:
    configure_logging(LogConfig.from_env(os.environ))
    grpc = GrpcServerConfig.from_env(os.environ, default_port=0)
    metrics = MetricsConfig.from_env(os.environ, default_port=0)
    async with ServiceRunner(
        name="slow", grpc=grpc, metrics=metrics, method_roles=METHOD_ROLES
    ) as runner:
        add_fake_verifier(runner)
        await runner.run()


if __name__ == "__main__":
    asyncio.run(main())
