"""`python -m services.deleter`: serve the deleter pool (settings from TOMBSTONE_*)."""

from __future__ import annotations

import asyncio

from services.core.logging import configure_logging
from services.core.peer_settings import refuse_on_config_error
from services.deleter.app import run
from services.deleter.config import DeleterConfig


def main() -> None:
    config = DeleterConfig.from_env()
    configure_logging(config.log)
    asyncio.run(run(config))


if __name__ == "__main__":
    refuse_on_config_error("deleter", main)
