"""`python -m services.deleter`: serve the deleter pool (settings from TOMBSTONE_*)."""

from __future__ import annotations

import asyncio

from services.core.logging import configure_logging
from services.core.service_main import check_reachable, run_service
from services.deleter.app import run
from services.deleter.config import DeleterConfig


def main() -> None:
    config = DeleterConfig.from_env()
    configure_logging(config.log)
    asyncio.run(check_reachable(config.zookeeper))
    asyncio.run(run(config))


if __name__ == "__main__":
    run_service("deleter", main)
