"""The store's notification streams: one `GetNotifications` stream per shard, each read by its
own thread, whose batches are handed to the event loop.

The client's own `get_notifications()` is not used: it hides its reconnects (a broken stream
is resumed from its last offset with no sign to the reader, so a watch cannot know that
changes may have been missed, e.g. after a server restart that reset the offsets), and after
a reconnect it holds every shard's stream after its first batch until each shard has sent
one, which a stream resumed from an offset does only once its shard is written to: on idle
shards, notifications stall (see docs/oxia-adapter.md). Here a stream that breaks or ends is
reported at once (`on_down`), and a new one is opened without a start offset: the server then
sends an empty batch at its commit offset, after which every later change is sent. A shard is
`on_up` from that first batch on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from oxia.internal.proto.io.streamnative.oxia import proto as _pb

from services.metadata.oxia._client import shards, stub_of

log = logging.getLogger(__name__)

RETRY_FIRST = 0.1
RETRY_MAX = 2.0

Change = tuple[str, int, int, str | None]
"""(key, Oxia's notification type, version id, key range end) of one change."""


class ShardStreams:
    """Follows every shard; calls `on_up(shard)`, `on_batch(changes)` and `on_down(shard)` on
    the loop, in the order each shard's stream produced them."""

    def __init__(
        self,
        client: Any,
        loop: asyncio.AbstractEventLoop,
        *,
        on_up: Callable[[int], None],
        on_batch: Callable[[list[Change]], None],
        on_down: Callable[[int, str], None],
    ) -> None:
        self._client = client
        self._loop = loop
        self._on_up = on_up
        self._on_batch = on_batch
        self._on_down = on_down
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._streams: dict[int, Any] = {}
        self._threads: list[threading.Thread] = []
        self.shard_ids = [shard for shard, _stub in shards(client)]

    def start(self) -> None:
        for shard in self.shard_ids:
            thread = threading.Thread(
                target=self._follow, args=(shard,), name=f"oxia-watch-{shard}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def close(self, timeout: float) -> None:
        """Cancel the streams and wait (at most `timeout` each) for their threads."""
        self._closed.set()
        with self._lock:
            streams = list(self._streams.values())
        for stream in streams:
            stream.cancel()
        for thread in self._threads:
            thread.join(timeout)

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        # A closed loop has nobody left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(callback, *args)

    def _follow(self, shard: int) -> None:
        delay = RETRY_FIRST
        while not self._closed.is_set():
            reason = "stream ended"
            try:
                stream = stub_of(self._client, shard).get_notifications(
                    _pb.NotificationsRequest(shard=shard)
                )
                with self._lock:
                    self._streams[shard] = stream
                if self._closed.is_set():
                    stream.cancel()
                    return
                self._read(shard, stream)
                delay = RETRY_FIRST
            except Exception as e:  # every failure of a stream is the same: changes may be lost
                reason = f"{type(e).__name__}: {e}"
            if self._closed.is_set():
                return
            self._post(self._on_down, shard, reason)
            self._closed.wait(delay)
            delay = min(delay * 2, RETRY_MAX)

    def _read(self, shard: int, stream: Any) -> None:
        first = True
        for batch in stream:
            changes = [
                (key, int(n.type), int(n.version_id or 0), n.key_range_last)
                for key, n in batch.notifications.items()
            ]
            if changes:
                self._post(self._on_batch, changes)
            if first:
                self._post(self._on_up, shard)
                first = False
