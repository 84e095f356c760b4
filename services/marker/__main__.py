"""`python -m services.marker`: serve the Marker with settings from the environment."""

from __future__ import annotations

import asyncio

from services.core.logging import configure_logging
from services.core.service_main import check_reachable, run_service
from services.marker.app import serve
from services.marker.config import MarkerConfig


def main() -> None:
    config = MarkerConfig.from_env()
    configure_logging(config.log)
    asyncio.run(check_reachable(config.zookeeper))
    asyncio.run(serve(config))


if __name__ == "__main__":
    run_service("marker", main)
