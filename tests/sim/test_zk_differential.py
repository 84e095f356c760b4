"""The in-memory ZooKeeper against Debian's ZooKeeper on the same seeded operation sequences.

Both run behind `MetadataStore` (the real one through `ZkMetadataStore`, the session store
the services use); every answer is compared: data, versions, child lists, and which typed
error (`NoNode`, `NodeExists`, `VersionConflict`, `NotEmpty`) each call raised, including the
per-item outcomes of a multi delete (all or nothing). Sequential names and `cversion` are not
compared: how the server counts deletes in them differs (docs/simulation.md).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore
from services.metadata.errors import MetadataError
from services.metadata.store import WatchEvent
from sim.scheduler import FaultRates, Scheduler
from sim.zk import Session, ZooKeeper

PATHS = ["/sim", "/sim/a", "/sim/b", "/sim/a/x", "/sim/a/y", "/sim/b/z"]


def _outcome(value: object) -> object:
    if isinstance(value, MetadataError):
        return type(value).__name__
    if isinstance(value, list):
        return [_outcome(v) for v in value]
    if hasattr(value, "version") and hasattr(value, "data"):
        # cversion is left out: how the server counts deletes in it differs (docs/simulation.md).
        return ("node", value.data, value.version)
    if hasattr(value, "version") and hasattr(value, "num_children"):
        return ("stat", value.version, value.num_children)
    if isinstance(value, tuple):
        return tuple(_outcome(v) for v in value)
    return value


async def _call(op: Callable[[], Awaitable[Any]]) -> object:
    try:
        return _outcome(await op())
    except MetadataError as e:
        return type(e).__name__


def _operations(rng: random.Random, store: Any) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
    ops: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
    for _ in range(60):
        path = rng.choice(PATHS)
        version = rng.choice([-1, 0, 1, 2])
        set_version = max(version, 0)
        data = bytes([rng.randrange(256)])
        kind = rng.choice(["create", "set", "delete", "get", "children", "many", "exists"])
        if kind == "create":
            parents = rng.random() < 0.5
            ops.append((kind, partial(store.create, path, data, make_parents=parents)))
        elif kind == "set":
            ops.append((kind, partial(store.set, path, data, version=set_version)))
        elif kind == "delete":
            ops.append((kind, partial(store.delete, path, version=version)))
        elif kind == "get":
            ops.append((kind, partial(store.get, path)))
        elif kind == "children":
            ops.append((kind, partial(_sorted, store, path)))
        elif kind == "exists":
            ops.append((kind, partial(store.exists, path)))
        else:
            items = [(rng.choice(PATHS), rng.choice([-1, 0, 1])) for _ in range(3)]
            items = list(dict.fromkeys(items))
            ops.append((kind, partial(store.delete_many, items)))
    return ops


async def _sorted(store: Any, path: str) -> list[str]:
    return sorted(await store.get_children(path))


async def test_in_memory_zookeeper_answers_as_the_real_one(zk: ZooKeeperServer) -> None:
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=5.0, request_timeout=5.0
    ) as real:
        for seed in range(3):
            sched = Scheduler(seed, FaultRates(0.0, 0.0, 0.0, max_delay=0.0))
            sched.faults_on = False
            memory = Session(ZooKeeper(sched), "differential")
            await _clear(real)
            rng_real, rng_memory = random.Random(seed), random.Random(seed)
            pairs = zip(_operations(rng_real, real), _operations(rng_memory, memory), strict=True)
            for step, ((kind, on_real), (_, on_memory)) in enumerate(pairs):
                expected = await _call(on_real)
                got = await _call(on_memory)
                assert got == expected, f"seed {seed} step {step} {kind}: {got} != {expected}"


DOT_ALIASES = ["/sim/./a", "/sim/a/../a", "/sim/a/.", "/sim/b/../a/x"]


async def test_dot_segments_name_no_znode_on_either(zk: ZooKeeperServer) -> None:
    """ZooKeeper does not resolve `.` or `..`: a read of `/sim/./a` finds nothing though
    `/sim/a` exists, a delete finds nothing, a setData is refused. So an owner read under
    such a name reads as absent (why the simulation checks every path a service sends)."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=5.0, request_timeout=5.0
    ) as real:
        sched = Scheduler(0, FaultRates(0.0, 0.0, 0.0, max_delay=0.0))
        sched.faults_on = False
        memory = Session(ZooKeeper(sched), "differential")
        answers = []
        for store in (real, memory):
            await store.create("/sim/a/x", b"live", make_parents=True)
            answer = []
            for path in DOT_ALIASES:
                answer.append(await _call(partial(store.get, path)))
                answer.append(await _call(partial(store.exists, path)))
                answer.append(await _call(partial(store.get_children, path)))
                answer.append(await _call(partial(store.get_many, [path, "/sim/a/x"])))
                answer.append(await _call(partial(store.set, path, b"x", version=-1)))
                answer.append(await _call(partial(store.delete, path, version=-1)))
            answer.append(await _call(partial(store.get, "/sim/a/x")))
            answers.append(answer)
        await _clear(real)
        assert answers[1] == answers[0]
        assert answers[0][0] == "NoNode"
        assert answers[0][-1] == ("node", b"live", 0)


async def _clear(store: ZkMetadataStore) -> None:
    if await store.exists("/sim") is None:
        return
    for path in sorted(PATHS, key=lambda p: -p.count("/")):
        for child in await _children(store, path):
            await store.delete(f"{path}/{child}", version=-1)
        if await store.exists(path) is not None:
            await store.delete(path, version=-1)


async def _children(store: ZkMetadataStore, path: str) -> list[str]:
    try:
        return await store.get_children(path)
    except MetadataError:
        return []


async def test_recursive_watch_events_match_the_real_ones(zk: ZooKeeperServer) -> None:
    """The same writes under a PERSISTENT_RECURSIVE watch report the same events, in order."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=5.0, request_timeout=5.0
    ) as real:
        await _clear(real)
        await real.create("/sim", b"")
        sched = Scheduler(0, FaultRates(0.0, 0.0, 0.0, max_delay=0.0))
        sched.faults_on = False
        server = ZooKeeper(sched)
        server.create("/sim", b"")
        memory = Session(server, "differential")
        seen: dict[str, list[tuple[str, str]]] = {"real": [], "memory": []}
        stores: list[tuple[str, Any]] = [("real", real), ("memory", memory)]
        for name, store in stores:
            events = seen[name]

            def listener(
                kind: WatchEvent, path: str, events: list[tuple[str, str]] = events
            ) -> None:
                events.append((kind.value, path))

            await store.add_recursive_watch("/sim/a", listener)
            await store.create("/sim/a/x", b"1", make_parents=True)
            await store.set("/sim/a/x", b"2", version=0)
            await store.create("/sim/b", b"")  # a sibling: not reported
            await store.set("/sim/a", b"3", version=0)
            await store.delete("/sim/a/x", version=1)
            await store.delete("/sim/a", version=1)
            await store.exists("/sim")  # events precede later answers on the session
        assert seen["memory"] == seen["real"]
        assert seen["real"][0] == ("created", "/sim/a")
