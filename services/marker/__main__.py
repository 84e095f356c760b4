"""`python -m services.marker`: serve the Marker with settings from the environment."""

from __future__ import annotations

import asyncio

from services.core.logging import configure_logging
from services.core.peer_settings import refuse_on_config_error
from services.marker.app import serve
from services.marker.config import MarkerConfig


def main() -> None:
    config = MarkerConfig.from_env()
    configure_logging(config.log)
    asyncio.run(serve(config))


if __name__ == "__main__":
    refuse_on_config_error("marker", main)
