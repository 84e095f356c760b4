"""`python -m services.deleter`: serve the deleter pool (settings from TOMBSTONE_*)."""

from __future__ import annotations

import asyncio
import sys

from services.core.logging import configure_logging
from services.deleter.app import run
from services.deleter.config import DeleterConfig
from services.metadata.layout import StartupRefused


def main() -> None:
    config = DeleterConfig.from_env()
    configure_logging(config.log)
    try:
        asyncio.run(run(config))
    except StartupRefused as e:
        # One line, no traceback: the operator's fix is in the message.
        print(f"deleter: refusing to start: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
