"""The simulated schema storage (`sim/schemas.py`): the locator and ledgers as Pulsar writes
them, the world's reference tracking of them, and both kinds of broker's deletes reaching the
deleters."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from services.metadata.ledger_metadata import LedgerState, decode_ledger_metadata
from services.verifier.matching import metadata_differences
from services.verifier.model import Component, Target, Tier
from sim.follower import following
from sim.loop import VirtualLoop
from sim.pulsar import CLUSTER, PATHS
from sim.run import _cancel_rest, _quiet, _virtual_time, run_seed
from sim.schemas import TopicSchema
from sim.state import LEDGER
from sim.world import World

_T = TypeVar("_T")


def _in_world(seed: int, test: Callable[[World], Coroutine[Any, Any, _T]]) -> _T:
    """`test` run on a set-up world (the cluster and the services, no workload, no faults),
    on virtual time as `run_seed` runs one; the services are stopped after it."""
    loop = VirtualLoop()
    try:
        world = World(seed)
        loop.set_task_factory(world.registry.factory)  # type: ignore[arg-type]

        async def main() -> _T:
            world.sched.faults_on = False
            world.setup()
            try:
                return await test(world)
            finally:
                for service in world.services():
                    service.crash()

        with _quiet(), _virtual_time(world), following(world.sched.now, world.sched.now_ms):
            result = loop.run_until_complete(main())
            _cancel_rest(loop)
        return result
    finally:
        loop.close()


SEED = 1
"""A seed whose setup gives a topic a schema."""
V1_SEED = 4
"""A seed whose setup gives a topic a V1 schema id."""


def _with_schema(world: World) -> TopicSchema:
    return next(s for s in world.schemas.schemas if world.schemas.locator(s) is not None)


def _ledgers(world: World, s: TopicSchema) -> list[int]:
    got = world.schemas.locator(s)
    assert got is not None
    return [e.position.ledgerId for e in got[0].index]


class _Draws:
    """A stand-in for the schema workload's generator: fixed draws."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value

    def uniform(self, low: float, high: float) -> float:
        return low


def test_the_locator_and_its_ledgers_are_what_the_verifier_expects() -> None:
    """Versions 0..n-1 in the index, `info` the latest; each ledger CLOSED with the custom
    metadata the verifier matches a SCHEMA_STORAGE intent against."""

    async def check(world: World) -> None:
        s = _with_schema(world)
        assert s.path == f"/schemas/{s.schema_id}"
        got = world.schemas.locator(s)
        assert got is not None
        locator = got[0]
        assert [e.version for e in locator.index] == list(range(len(locator.index)))
        assert locator.info == locator.index[-1]
        for ledger_id in _ledgers(world, s):
            path = PATHS.ledger_path(ledger_id)
            metadata = decode_ledger_metadata(
                world.zk.nodes[path].data, ledger_id=ledger_id, path=path
            )
            target = Target(
                ledger_id, Tier.BOOKKEEPER, Component.SCHEMA, s.path, schema_id=s.schema_id
            )
            assert (metadata.state, metadata_differences(target, metadata)) == (
                LedgerState.CLOSED,
                [],
            )

    _in_world(SEED, check)


def test_a_locators_ledgers_are_references() -> None:
    """S1 and L1 count every version's ledger, under the locator's path."""

    async def check(world: World) -> None:
        s = _with_schema(world)
        ledgers = _ledgers(world, s)
        assert {(i, LEDGER, "") for i in ledgers} <= world.referenced()
        assert all(world.ever[(i, LEDGER, "")] == s.path for i in ledgers)

    _in_world(SEED, check)


def test_an_update_adds_a_version_and_a_failed_one_leaves_an_orphan() -> None:
    """`putSchema`: the new ledger becomes the latest version; a broker failing before the
    locator write leaves a closed ledger nothing ever referenced (the reconciler's)."""

    async def check(world: World) -> None:
        schemas = world.schemas
        s = _with_schema(world)
        before = _ledgers(world, s)
        schemas.rng = _Draws(0.99)  # type: ignore[assignment]
        await schemas.update(s)
        added = _ledgers(world, s)
        got = schemas.locator(s)
        assert got is not None
        assert got[0].info.position.ledgerId == added[-1]
        assert added[:-1] == before
        schemas.rng = _Draws(0.0)  # type: ignore[assignment]
        await schemas.update(s)
        orphan = world.cluster.next_ledger - 1
        assert _ledgers(world, s) == added
        assert world.zk.stat(PATHS.ledger_path(orphan)) is not None
        assert (orphan, LEDGER, "") not in world.ever

    _in_world(SEED, check)


def test_an_unmodified_brokers_schema_delete_is_the_followers_to_catch() -> None:
    """The locator deleted by the broker itself, then its ledgers, each delete failing:
    unlinked, present, and recorded as an unmodified broker's unlink."""

    async def check(world: World) -> None:
        s = _with_schema(world)
        s.topic.unmodified = True
        world.unmodified_paths.add(s.path)
        world.unmodified.delete_failure_share = 1.0
        ledgers = _ledgers(world, s)
        await world.schemas.delete(s)
        assert world.zk.stat(s.path) is None
        assert world.owners[s.path] == frozenset()
        assert {(i, LEDGER, "") for i in ledgers} <= world.unmodified_unlinks
        assert all(world.zk.stat(PATHS.ledger_path(i)) is not None for i in ledgers)

    _in_world(SEED, check)


def test_schema_ledgers_reach_the_deleters_from_both_kinds_of_broker() -> None:
    """Not vacuous: a PIP-186 broker's marked schema ledgers, and an unmodified broker's whose
    own delete failed (only the follower, reading `/schemas`, sends their intents), are
    deleted by a deleter; V1 locators (`/schemas/<t>/<cluster>/<ns>/<topic>`) among them."""
    marked_deleted = followed_deleted = v1_deleted = 0
    for seed in range(40):
        if marked_deleted and followed_deleted and v1_deleted:
            break  # each kind seen: the rest of the seeds would only cost time
        trace = run_seed(seed).trace
        deleted = {
            int(m.group(1)) for e in trace if (m := re.search(r"deleter-\d deletes .*/L(\d+)$", e))
        }
        own_failed = {
            int(m.group(1)) for e in trace if (m := re.search(r"own delete of \[(\d+)\] failed", e))
        }
        for line in trace:
            if m := re.search(r"delete schema (\S+) \[[\d, ]*\]: marked \[([\d, ]*)\]", line):
                got = {int(i) for i in m.group(2).split(", ") if i} & deleted
                marked_deleted += len(got)
            elif m := re.search(r"deleted schema (\S+) \[([\d, ]*)\] itself", line):
                got = {int(i) for i in m.group(2).split(", ") if i} & own_failed & deleted
                followed_deleted += len(got)
            else:
                continue
            v1_deleted += len(got) if m.group(1).count("/") == 3 else 0
    assert marked_deleted > 0
    assert followed_deleted > 0
    assert v1_deleted > 0


def test_a_v1_locator_sits_below_its_cluster() -> None:
    """A V1 topic's schema id names its cluster: the locator is one level deeper than a V2
    one, below a namespace folder with no data."""

    async def check(world: World) -> None:
        v1 = [s for s in world.schemas.schemas if s.schema_id.count("/") == 3]
        assert v1
        for s in v1:
            tenant, cluster, namespace, topic = s.schema_id.split("/")
            assert s.path == f"/schemas/{s.schema_id}"
            assert cluster == CLUSTER
            assert s.topic.ml == f"{tenant}/{namespace}/persistent/{topic}"
        folder = world.zk.nodes.get("/schemas/public/" + CLUSTER + "/default")
        assert folder is None or folder.data == b""

    _in_world(V1_SEED, check)
