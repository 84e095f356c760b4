"""structlog, configured once per process; per-RPC context travels in contextvars.

Services call `configure_logging(config.log)` first thing in `__main__`. Everything else only
calls `structlog.get_logger()` and `structlog.contextvars.bound_contextvars(...)`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from services.core.config import LogConfig

AUDIT_LOGGER = "tombstone.audit"
"""Logger name of audit lines; every hard delete writes one with its evidence."""


def configure_logging(
    config: LogConfig, *, stream: TextIO | None = None, cache_loggers: bool = True
) -> None:
    """Set up structlog: contextvars merged first, level filtering, ISO UTC timestamps.

    JSON is rendered when `config.format` is `json`, or `auto` and the stream is not a
    terminal. Tests pass `cache_loggers=False` so that a later reset takes effect.
    """
    out = stream if stream is not None else sys.stdout
    level = logging.getLevelNamesMapping()[config.level.upper()]
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if _wants_json(config.format, out):
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer())
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=cache_loggers,
    )
    # grpc and the S3/ZooKeeper libraries log through the standard library: keep their
    # warnings, on stderr, so they do not interleave with the structured stream.
    logging.basicConfig(level=max(level, logging.WARNING), stream=sys.stderr, force=True)


def _wants_json(fmt: str, stream: TextIO) -> bool:
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return not (callable(isatty) and isatty())
    return fmt == "json"


def audit(event: str, **evidence: Any) -> None:
    """Write one audit line (always at info level) with the evidence of a destructive act."""
    structlog.get_logger(AUDIT_LOGGER).info(event, audit=True, **evidence)
