"""`python -m services.deleter`: serve the deleter pool (settings from TOMBSTONE_*)."""

from __future__ import annotations

import asyncio
import sys

from services.core.logging import configure_logging
from services.core.peer_settings import refuse_on_config_error
from services.deleter.app import run
from services.deleter.config import DeleterConfig
from services.metadata.layout import StartupRefused


async def _serve(config: DeleterConfig) -> None:
    try:
        await run(config)
    except StartupRefused as e:
        # One line, no traceback: the operator's fix is in the message.
        print(f"deleter: refusing to start: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> None:
    config = DeleterConfig.from_env()
    configure_logging(config.log)
    asyncio.run(_serve(config))


if __name__ == "__main__":
    refuse_on_config_error("deleter", main)
