"""`python -m services.verifier`: configure logging, then serve until stopped."""

from __future__ import annotations

import asyncio

from services.core.logging import configure_logging
from services.core.peer_settings import refuse_on_config_error
from services.verifier.app import serve
from services.verifier.config import VerifierConfig


async def main() -> None:
    config = VerifierConfig.from_env()
    configure_logging(config.log)
    await serve(config)


if __name__ == "__main__":
    refuse_on_config_error("verifier", lambda: asyncio.run(main()))
