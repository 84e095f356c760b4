"""The intruder: forged, replayed and garbage messages on the system topic, MarkLedgers calls
naming owners no real broker has, and the neighbour cluster's ledgers offered to our marker
and verifier under both clusters' names. Nothing it sends may delete a thing (S1, S2)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from services.core.errors import TombstoneError
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.namespaces import namespace_of_ml
from services.systopic.messages import encode_intent
from services.systopic.ports import OutgoingMessage
from sim.cursor_refs import COMPACTION_CURSOR, PropertyRefs, topic_name
from sim.neighbour import GEO_NAMESPACE, NeighbourCluster
from sim.pulsar import CLUSTER, DRIVER, FOREIGN_BUCKET, NEIGHBOUR
from sim.state import CHAOS_SECONDS, TopicState
from sim.topic import Producer, Topic
from sim.view import WorldView
from tombstone.v1 import pending_delete_pb2 as _pd


class IntruderWorld(WorldView, Protocol):
    """The world as the intruder sees it."""

    main: Topic
    topics: list[TopicState]
    foreign_ledgers: set[int]
    """Ledgers Pulsar did not create (another application's, on the same BookKeeper)."""
    neighbour: NeighbourCluster
    props: PropertyRefs

    def reconciler_request(self, ml: str, ledger_ids: Iterable[int]) -> MarkRequest: ...


class Intruder:
    def __init__(self, world: IntruderWorld) -> None:
        self.world = world

    async def attacker(self) -> None:
        rng = self.world.sched.rng
        producer = Producer(self.world.main, "intruder")
        for _ in range(rng.randint(0, 4)):
            await asyncio.sleep(rng.uniform(0, CHAOS_SECONDS))
            kind = rng.choice(
                [
                    "garbage",
                    "replay",
                    "foreign-ledger",
                    "foreign-bucket",
                    "listed",
                    "alias",
                    "call",
                    "property",
                    "property-owner",
                ]
            )
            if kind == "call":
                await self._hostile_call()
                continue
            self.world.sched.log(f"intruder sends {kind}")
            message = self._forged(kind)
            if message is not None:
                await producer.publish([message])

    async def neighbour_intruder(self) -> None:
        """Forged PDLIs for the neighbour's ledgers (`NeighbourCluster.forged`), and
        reconciler submissions through our marker naming them (signed when the marker signs:
        a scan of the shared root finds the neighbour's leaks under our geo topics' names)."""
        rng = self.world.neighbour.rng
        producer = Producer(self.world.main, "intruder-east")
        for _ in range(rng.randint(1, 5)):
            await asyncio.sleep(rng.uniform(0, CHAOS_SECONDS))
            if rng.random() < 0.25:
                await self._reconcile_neighbours()
                continue
            message = self.world.neighbour.forged()
            if message is not None:
                await producer.publish([message])

    async def _reconcile_neighbours(self) -> None:
        log = self.world.sched.log
        geo = [t for t in self.world.topics if namespace_of_ml(t.ml) == GEO_NAMESPACE]
        if not geo:
            return
        t = self.world.neighbour.rng.choice(geo)
        theirs = sorted(
            i
            for i, owned in self.world.neighbour.ledgers.items()
            if owned.ml == t.ml and not owned.cursor
        )
        if not theirs:
            return
        chosen = tuple(self.world.neighbour.rng.sample(theirs, min(2, len(theirs))))
        request = self.world.reconciler_request(t.ml, chosen)
        try:
            result = await self.world.neighbour.rng.choice(self.world.markers).mark(request)
        except TombstoneError as exc:
            log(f"reconciler {chosen} of {NEIGHBOUR} failed: {type(exc).__name__}")
            return
        log(f"reconciler {chosen} of {NEIGHBOUR}: sent {[i for i, _ in result.marked]}")

    def _alias(self, t: TopicState) -> tuple[int, str, str]:
        """An owner named with a dot segment, next to a live one: (component, ML name,
        cursor name). `tenant/./persistent/x` or `x`'s cursor `.` (whose path resolves to the
        ML's own znode on a filesystem), each a spelling no real owner has."""
        tenant, namespace, domain, local = t.ml.split("/")
        return self.world.sched.rng.choice(
            [
                (_pd.MANAGED_LEDGER, f"{tenant}/./{domain}/{local}", ""),
                (_pd.MANAGED_LEDGER, f"{tenant}/{namespace}/{domain}/.", ""),
                (_pd.MANAGED_LEDGER, f"../{namespace}/{domain}/{local}", ""),
                (_pd.MANAGED_CURSOR, t.ml, "."),
                (_pd.MANAGED_CURSOR, t.ml, ".."),
            ]
        )

    async def _hostile_call(self) -> None:
        """A MarkLedgers call naming an owner with a dot segment (a compromised broker's
        credential, or a bug): the marker's validation (`resolve_owner`, as its gRPC servicer
        calls it) must refuse it before anything reaches ZooKeeper."""
        t = self.world.sched.rng.choice(self.world.topics)
        component, ml, cursor = self._alias(t)
        info = self.world.cluster.ml_now(t.ml)
        ledger_ids = tuple(e.ledgerId for e in info.ledgerInfo[:1])
        self.world.sched.log(
            f"intruder calls MarkLedgers for {ml!r} cursor {cursor!r} {ledger_ids}"
        )
        try:
            owner = resolve_owner(
                component, topic_name="", ml_name=ml, cursor_name=cursor, schema_id=""
            )
            self.world.requests += 1
            request = MarkRequest(
                owner=owner, ledger_ids=ledger_ids, request_id=f"req-{self.world.requests}"
            )
            result = await self.world.sched.rng.choice(self.world.markers).mark(request)
        except TombstoneError as exc:
            self.world.sched.log(f"intruder's call refused: {type(exc).__name__}")
            return
        self.world.sched.log(f"intruder's call accepted: marked {[i for i, _ in result.marked]}")

    def _property_owner(self) -> OutgoingMessage | None:
        """A ledger a cursor property references now, named under its true owner kind and
        cursor at the cursor znode's version, as an unsigned OBSERVED PDLI: only the
        verifier's reading of the properties keeps it (`property-reference-ignored`)."""
        rng = self.world.sched.rng
        named = self.world.props.referenced_now()
        if not named:
            return None
        t, cursor, ledger_id, version = rng.choice(named)
        bucket = cursor != COMPACTION_CURSOR
        pdli = _pd.PendingDeleteLedgerInfo(
            ledger_id=ledger_id,
            component=_pd.DELAYED_INDEX_BUCKET if bucket else _pd.COMPACTED_LEDGER,
            topic_name=topic_name(t),
            managed_ledger_name=t.ml,
            cursor_name=cursor,
            ledger_type=_pd.LEDGER,
            fence_token=version,
            source=_pd.OBSERVED,
            cluster=CLUSTER,
        )
        self.world.sched.log(f"intruder names [{ledger_id}] under cursor {cursor} of {t.ml}")
        return encode_intent(pdli)

    def _forged(self, kind: str) -> OutgoingMessage | None:
        rng = self.world.sched.rng
        t = rng.choice(self.world.topics)
        if kind == "garbage":
            return OutgoingMessage(b"\xff\x00not a pdli", "7", {})
        if kind == "replay":
            entries = self.world.main.entries()
            if not entries:
                return None
            e = rng.choice(entries)
            return OutgoingMessage(e.payload, e.key, e.properties)
        pdli = _pd.PendingDeleteLedgerInfo(
            component=_pd.MANAGED_LEDGER,
            managed_ledger_name=t.ml,
            ledger_type=_pd.LEDGER,
            source=_pd.BROKER,
            cluster=CLUSTER,
        )
        if kind == "alias":
            info = self.world.cluster.ml_now(t.ml)
            if not info.ledgerInfo:
                return None
            component, ml, cursor = self._alias(t)
            pdli.component, pdli.managed_ledger_name = component, ml  # type: ignore[assignment]
            if cursor:
                pdli.cursor_name = cursor
            pdli.ledger_id = rng.choice(info.ledgerInfo).ledgerId
        elif kind == "property":
            # A compacted or bucket-snapshot ledger, as if its topic's ML had listed it.
            if not self.world.property_ledgers:
                return None
            pdli.ledger_id = rng.choice(sorted(self.world.property_ledgers))
        elif kind == "property-owner":
            return self._property_owner()
        elif kind == "foreign-ledger":
            if not self.world.foreign_ledgers:
                return None
            pdli.ledger_id = rng.choice(sorted(self.world.foreign_ledgers))
        elif kind == "listed":
            info = self.world.cluster.ml_now(t.ml)
            if not info.ledgerInfo:
                return None
            pdli.ledger_id = rng.choice(info.ledgerInfo).ledgerId
        else:  # look-alike objects of another environment, named by a fresh uuid
            info = self.world.cluster.ml_now(t.ml)
            if not info.ledgerInfo:
                return None
            ledger_id = rng.choice(info.ledgerInfo).ledgerId
            uuid = self.world.cluster.new_uuid()
            self.world.cluster.upload(FOREIGN_BUCKET, uuid, ledger_id, t.ml)
            entry = _pd.PendingDeleteLedgerInfo()
            pdli.ledger_id, pdli.ledger_type = ledger_id, _pd.OFFLOAD_LEDGER
            from services.metadata.offload import uuid_to_bits

            msb, lsb = uuid_to_bits(uuid)
            pdli.offload_context.uuid_msb, pdli.offload_context.uuid_lsb = msb, lsb
            pdli.offload_context.complete = True
            pdli.offload_context.driver_name = DRIVER
            pdli.offload_context.driver_metadata["bucket"] = FOREIGN_BUCKET
            del entry
        return encode_intent(pdli)
