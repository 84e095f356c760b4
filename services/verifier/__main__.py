"""`python -m services.verifier`: configure logging, then serve until stopped."""

from __future__ import annotations

import asyncio
import sys

from services.core.logging import configure_logging
from services.core.peer_settings import refuse_on_config_error
from services.metadata.layout import StartupRefused
from services.verifier.app import serve
from services.verifier.config import VerifierConfig


async def main() -> None:
    config = VerifierConfig.from_env()
    configure_logging(config.log)
    try:
        await serve(config)
    except StartupRefused as e:
        # One line, no traceback: the operator's fix is in the message.
        print(f"verifier: refusing to start: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    refuse_on_config_error("verifier", lambda: asyncio.run(main()))
