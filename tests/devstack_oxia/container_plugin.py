"""A pytest plugin for the `oxia` client's own tests: their `OxiaContainer` runs the devstack
Oxia server instead of the `oxia/oxia` Docker image.

The client's tests import `OxiaContainer` from `oxia.internal.oxia_container`, a module that
starts `oxia standalone --shards=N` through testcontainers. This plugin puts a module of the
same name in `sys.modules` before their test files are imported, so they run unedited: each
`with OxiaContainer(shards=N)` gets a fresh server with N shards on a free port.

It also closes one start-up race of the client (see `client_fixes`), which a server on the
same machine would otherwise hit now and then.
"""

from __future__ import annotations

import sys
import types
from contextlib import AbstractContextManager
from typing import Any

import oxia.internal  # noqa: F401  (the parent package must be imported first)

from devstack.oxia import OxiaServer, running_in_thread
from tests.devstack_oxia import client_fixes


class OxiaContainer:
    """The container's interface: a context manager with `service_url()`."""

    def __init__(self, shards: int = 1) -> None:
        self.shards = shards
        self._running: AbstractContextManager[OxiaServer] | None = None
        self._server: OxiaServer | None = None

    def __enter__(self) -> OxiaContainer:
        self._running = running_in_thread(shards=self.shards)
        self._server = self._running.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._running is not None
        self._running.__exit__(*exc)

    def service_url(self) -> str:
        assert self._server is not None
        return f"localhost:{self._server.port}"


_module = types.ModuleType("oxia.internal.oxia_container")
_module.OxiaContainer = OxiaContainer  # type: ignore[attr-defined]
sys.modules[_module.__name__] = _module
client_fixes.install()
