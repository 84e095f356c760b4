"""The Oxia adapter's watch table on its own: how notified changes fire watches."""

from __future__ import annotations

import asyncio

from services.metadata.oxia._watches import (
    KEY_CREATED,
    KEY_DELETED,
    KEY_MODIFIED,
    KEY_RANGE_DELETED,
    Watches,
)
from services.metadata.store import WatchEvent


async def test_changes_notified_during_the_read_are_judged_by_the_version_read():
    watches = Watches()
    old = watches.data("/k")
    watches.dispatch([("/k", KEY_MODIFIED, 5, None)])  # the read is still in flight
    assert not old.done()
    watches.seen("/k", old, 5)  # the read saw that change already
    assert not old.done()
    watches.dispatch([("/k", KEY_MODIFIED, 7, None)])
    assert old.result() is WatchEvent.CHANGED

    new = watches.data("/k")
    watches.dispatch([("/k", KEY_MODIFIED, 9, None)])
    watches.seen("/k", new, 8)  # the change came after the read
    assert new.result() is WatchEvent.CHANGED


async def test_deletes_always_fire_and_creates_fire_a_watch_on_an_absent_key():
    watches = Watches()
    present = watches.data("/k")
    watches.seen("/k", present, 3)
    watches.dispatch([("/k", KEY_DELETED, 0, None)])
    assert present.result() is WatchEvent.DELETED
    absent = watches.data("/new")
    watches.seen("/new", absent, -1)
    watches.dispatch([("/new", KEY_CREATED, 0, None)])
    assert absent.result() is WatchEvent.CREATED


async def test_child_watches_see_direct_children_only():
    watches = Watches()
    fired = watches.children("/p")
    watches.dispatch([("/p/c/grandchild", KEY_CREATED, 1, None), ("/p", KEY_MODIFIED, 2, None)])
    assert not fired.done()
    watches.dispatch([("/p/c", KEY_CREATED, 3, None)])
    assert fired.result() is WatchEvent.CHANGED
    gone = watches.children("/p")
    watches.dispatch([("/p", KEY_DELETED, 0, None)])
    assert gone.result() is WatchEvent.DELETED


async def test_recursive_watches_and_a_range_delete():
    watches = Watches()
    seen: list[tuple[WatchEvent, str]] = []
    watches.recursive("/r", lambda kind, path: seen.append((kind, path)))
    data = watches.data("/x")
    watches.seen("/x", data, 1)
    lost = watches.lost()
    watches.dispatch([("/r/a", KEY_CREATED, 1, None), ("/rx", KEY_CREATED, 2, None)])
    assert seen == [(WatchEvent.CREATED, "/r/a")]
    # A range delete does not name its keys: every watch may have missed a change.
    watches.dispatch([("/a", KEY_RANGE_DELETED, 0, "/z")])
    assert data.result() is WatchEvent.CONNECTION_LOST
    assert lost.done()
    watches.dispatch([("/r/b", KEY_CREATED, 3, None)])
    assert seen == [(WatchEvent.CREATED, "/r/a")]  # the recursive watch ended


async def test_a_cancelled_watch_leaves_the_table():
    watches = Watches()
    fired = watches.data("/k")
    fired.cancel()
    await asyncio.sleep(0)  # done callbacks run on the loop's next turn
    assert not watches._data
    watches.dispatch([("/k", KEY_DELETED, 0, None)])
    assert fired.cancelled()
