"""One start-up race of the `oxia` client (0.2.1), closed for the tests.

`ServiceDiscovery.__init__` starts the thread that reads the shard assignments, and only
then creates `self._init_barrier`, which that thread waits on after the first answer. When the
answer comes back before the constructor gets to that line (a server on the same machine,
a loaded CPU), the thread dies with AttributeError and the constructor times out after 30 s.
A server in a container answers more slowly, which hides the race. Here the attribute is
created by whichever of the two threads reaches it first, and the other gets the same one.
"""

from __future__ import annotations

import threading
from typing import Any

from oxia.internal.service_discovery import ServiceDiscovery

_LOCK = threading.Lock()


class _FirstComerBarrier:
    """A data descriptor for `_init_barrier`: read before assignment creates it, and the
    constructor's later assignment keeps the barrier the reader is already waiting on."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with _LOCK:
            return obj.__dict__.setdefault("_init_barrier", threading.Barrier(2))

    def __set__(self, obj: Any, value: threading.Barrier) -> None:
        with _LOCK:
            obj.__dict__.setdefault("_init_barrier", value)


def install() -> None:
    ServiceDiscovery._init_barrier = _FirstComerBarrier()
