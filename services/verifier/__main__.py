"""`python -m services.verifier`: configure logging, then serve until stopped."""

from __future__ import annotations

import asyncio

from services.core.logging import configure_logging
from services.core.service_main import check_reachable, run_service
from services.verifier.app import serve
from services.verifier.config import VerifierConfig


async def main() -> None:
    config = VerifierConfig.from_env()
    configure_logging(config.log)
    await check_reachable(config.zookeeper)
    await serve(config)


if __name__ == "__main__":
    run_service("verifier", lambda: asyncio.run(main()))
