"""The deleter's start-up check and layout watch for its ZooKeeper backend.

The deleter removes ledger znodes at paths the verifier chose, so it must agree with the
verifier on the ledgers root and layout: it refuses to start (one line, see `__main__`) when
the root, `<root>/LAYOUT` or `/managed-ledgers` is missing or the layout is unsupported, and
follows `LAYOUT` while it runs. With the bookie-HTTP backend the deleter does not read
ZooKeeper, and this check does not apply.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager, AsyncExitStack

from services.core.tasks import is_cancelled
from services.metadata.layout import LayoutWatch, confirm_ledgers_root
from services.metadata.store import MetadataStore


async def watch_ledgers_layout(
    stack: AsyncExitStack,
    store: MetadataStore,
    ledgers_root: str,
    *,
    pulsar: AbstractAsyncContextManager[MetadataStore] | None = None,
) -> LayoutWatch:
    """Confirm the root (else `StartupRefused`), then follow `LAYOUT` until `stack` closes.
    `pulsar` opens Pulsar's metadata store, where `/managed-ledgers` is confirmed, when it is
    not `store`: a session held only for the check."""
    if pulsar is None:
        located = await confirm_ledgers_root(store, ledgers_root)
    else:
        async with pulsar as other:
            located = await confirm_ledgers_root(store, ledgers_root, pulsar=other)
    watch = LayoutWatch(store, located)
    task = asyncio.create_task(watch.run(), name="ledgers-layout")

    async def stop() -> None:
        task.cancel()
        try:
            await task
        except BaseException as e:
            if not is_cancelled(e):
                raise

    stack.push_async_callback(stop)
    return watch
