"""How a service process starts and how it ends when it cannot: one line, a documented code.

Exit codes of `tombstone <service> serve` (and `python -m services.<service>`):

| code | meaning |
| --- | --- |
| 0 | stopped by SIGTERM/SIGINT after draining |
| 1 | a setting is malformed or unsafe beside a running peer (`ConfigError`) |
| 2 | refused to start: the cluster's metadata, or an unauthenticated exposed address |
| 3 | a dependency (ZooKeeper, the Pulsar broker) cannot be reached |
| 130 | interrupted (SIGINT) before the service was up |

Code 2 covers `StartupRefused` (the ledgers root or `LAYOUT` is not what the service needs),
`ExposedWithoutAuth` (the gRPC address is not loopback and nothing authenticates callers) and
`ZooKeeperRefused` (ZooKeeper security that cannot be honoured: SASL asked for, a refused
authentication, no permission, or Tombstone's znodes writable by others): every setting is
well-formed, but starting would be wrong.

Unknown `TOMBSTONE_*` variables (likely typos) are warned about first, one line each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from services.core.config import PulsarConfig, ZooKeeperConfig
from services.core.env_cli import warn_unknown_variables
from services.core.errors import ConfigError, ExposedWithoutAuth, StartupRefused, Unavailable
from services.core.shared_clusters import OXIA
from services.core.zk_security import ZooKeeperRefused

EXIT_CONFIG = 1
EXIT_REFUSED = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130
# A TCP connect that neither succeeds nor fails within this is left to the client's own
# timeouts: only a definite "no" (refused, no such host) ends the start early.
PROBE_TIMEOUT = 2.0


def run_service(service: str, run: Callable[[], None]) -> None:
    """Run a service's `main`, turning the failures an operator can fix into one line on
    stderr and the exit code above, never a traceback."""

    warn_unknown_variables(os.environ)
    try:
        run()
    except (StartupRefused, ExposedWithoutAuth, ZooKeeperRefused) as e:
        _fail(EXIT_REFUSED, f"{service}: refusing to start: {e}")
    except ConfigError as e:
        _fail(EXIT_CONFIG, f"{service}: refusing to start: {e}")
    except Unavailable as e:
        _fail(EXIT_UNAVAILABLE, f"{service}: dependency unavailable: {e}")
    except KeyboardInterrupt:
        _fail(EXIT_INTERRUPTED, f"{service}: interrupted")


def _fail(code: int, line: str) -> None:
    sys.stderr.write(line.replace("\n", " ") + "\n")
    raise SystemExit(code) from None


async def check_reachable(
    zookeeper: ZooKeeperConfig | None = None, pulsar: PulsarConfig | None = None
) -> None:
    """`Unavailable` when ZooKeeper or the broker is definitely not there (every server
    refuses the connection or has no address), so that the start fails in seconds instead of
    after the clients' timeouts. A slow or filtered endpoint passes: the client decides."""
    if zookeeper is not None:
        stores = zookeeper.stores
        # The stores the settings name, each once: with a metadata store URL set, the
        # ZooKeeper servers setting keeps its default and names no store to probe.
        named = {stores.pulsar: _variable(zookeeper, "TOMBSTONE_METADATA_STORE_URL")}
        named.setdefault(
            stores.bookkeeper, _variable(zookeeper, "TOMBSTONE_BOOKKEEPER_METADATA_URL")
        )
        for store, variable in named.items():
            what = "Oxia" if store.kind == OXIA else "ZooKeeper"
            await _probe(what, variable, _zk_endpoints(store.servers))
    if pulsar is not None:
        endpoints = _pulsar_endpoints(pulsar.service_url)
        await _probe("the Pulsar broker", "TOMBSTONE_PULSAR_SERVICE_URL", endpoints)


def _variable(zookeeper: ZooKeeperConfig, url_setting: str) -> str:
    """The setting that named a store: a URL's, or the ZooKeeper servers' when none is set."""
    return url_setting if zookeeper.urls is not None else "TOMBSTONE_ZOOKEEPER_SERVERS"


def _zk_endpoints(servers: str) -> list[tuple[str, int]]:
    out = []
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        out.append((host, int(port)) if host and port.isdigit() else (server.strip(), 2181))
    return out


def _pulsar_endpoints(url: str) -> list[tuple[str, int]]:
    parts = urlsplit(url)
    default = 6651 if parts.scheme == "pulsar+ssl" else 6650
    out = []
    for server in parts.netloc.split(","):
        host, _, port = server.rpartition(":")
        out.append((host, int(port)) if host and port.isdigit() else (server, default))
    return out


async def _probe(what: str, variable: str, endpoints: Sequence[tuple[str, int]]) -> None:
    failures = await asyncio.gather(*(_refusal(host, port) for host, port in endpoints))
    if endpoints and all(failures):
        named = ", ".join(
            f"{h}:{p} ({why})" for (h, p), why in zip(endpoints, failures, strict=True)
        )
        raise Unavailable(f"cannot reach {what} at {named}; check {variable}")


async def _refusal(host: str, port: int) -> str | None:
    """Why `host:port` definitely does not accept a connection, or None."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), PROBE_TIMEOUT)
    except TimeoutError:
        return None
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as e:
        return e.strerror or type(e).__name__
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
