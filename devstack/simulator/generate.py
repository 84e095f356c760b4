"""ClusterSpec → ClusterModel, deterministically (no I/O).

Ledgers are created topic by topic, in the order a cluster's history would have created
them, and take their ids from the allocator in that order; so every ML list is ascending and
ledger ids follow znode creation order, as with BookKeeper's sequential id generators.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace

from devstack.simulator import orphans
from devstack.simulator._factory import (
    DAY_MS,
    PULSAR_2_1_VERSION,
    PULSAR_2_9_VERSION,
    Factory,
    IdAllocator,
    LedgerShape,
    pulsar_metadata,
)
from devstack.simulator.model import (
    SHADOW_SOURCE,
    ClusterModel,
    Cursor,
    LedgerInfo,
    LedgerKind,
    ManagedLedger,
    OrphanKind,
    PartitionedTopic,
    Planted,
    Schema,
    SchemaVersion,
    TopicPlan,
)
from devstack.simulator.spec import ClusterSpec, IdLayout, PathWriter
from services.metadata import LedgerState, TopicName
from services.metadata.paths import LedgerLayout
from tombstone.formats import schema_pb2 as _schema

# SchemaRegistryFormat.SchemaInfo.SchemaType.AVRO
_AVRO = 5


def build_model(spec: ClusterSpec) -> ClusterModel:
    """The model of the cluster `spec` describes; the same spec gives an equal model."""
    if spec.id_layout is not IdLayout.MIXED:
        ids = IdAllocator(spec.id_layout, start=spec.first_ledger_id)
        return _assign_paths(_generate(spec, ids).model)
    # A first pass counts the ledgers so that MIXED ids switch to long ones at the right share.
    count = _generate(spec, IdAllocator(IdLayout.SHORT)).ids.count
    switch_at = round(count * (1.0 - spec.long_id_share))
    return _assign_paths(_generate(spec, IdAllocator(spec.id_layout, switch_at)).model)


def _assign_paths(model: ClusterModel) -> ClusterModel:
    """Which layout's path each ledger znode sits at (reference §1.1).

    BookKeeper's ZK ledger managers write the path LAYOUT names; Pulsar >= 2.10's default
    driver (`PulsarLedgerManager.getLedgerPath`) writes the hybrid path whatever LAYOUT says.
    An upgraded cluster (MIXED) holds the older half at LAYOUT's path, the newer at hybrid ones.
    """
    spec = model.spec
    if spec.path_writer is PathWriter.PULSAR or spec.layout is LedgerLayout.HIERARCHICAL:
        return model
    ids = sorted(model.ledgers)
    cut = len(ids) if spec.path_writer is PathWriter.BOOKKEEPER else len(ids) // 2
    for ledger_id in ids[:cut]:
        model.ledgers[ledger_id] = replace(model.ledgers[ledger_id], path_layout=spec.layout)
    return model


def _generate(spec: ClusterSpec, ids: IdAllocator) -> Factory:
    f = Factory(spec, ids)
    plans = plan_topics(f)
    hosts = orphans.assign_hosts(f, plans)
    for index, plan in enumerate(plans):
        build_topic(f, plan, hosts.get(index, Counter()))
    orphans.plant_unhosted(f, plans)
    return f


def namespaces(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(tenant, namespace) of every namespace; the first is `public/default`."""
    return [
        ("public" if t == 0 else f"{spec.tenant_prefix}-{t}", "default" if n == 0 else f"ns-{n}")
        for t in range(spec.tenants)
        for n in range(spec.namespaces_per_tenant)
    ]


def plan_topics(f: Factory) -> list[TopicPlan]:
    """Tenants, namespaces and topics; the first namespace is `public/default`."""
    spec, rng = f.spec, f.rng
    plans = []
    for tenant, namespace in namespaces(spec):
        for k in range(spec.topics_per_namespace):
            # Every fifth name needs URL-encoding in its ML name (`events%3A4`).
            local = f"events:{k}" if k % 5 == 4 else f"topic-{k}"
            partitioned = rng.random() < spec.partitioned_share
            partitions = rng.randint(*spec.partitions) if partitioned else 0
            new = rng.random() < spec.new_topic_share
            schema = rng.random() < spec.schema_share
            plans.append(TopicPlan(tenant, namespace, local, partitions, new, schema))
    return plans


def build_topic(f: Factory, plan: TopicPlan, kinds: Counter[OrphanKind]) -> None:
    """Partitioned metadata, each partition's ML (orphans go to the first), the schema."""
    base = plan.topic()
    locals_ = [plan.local_name]
    if plan.partitions:
        f.model.partitioned_topics[str(base)] = PartitionedTopic(
            plan.tenant, plan.namespace, plan.local_name, plan.partitions
        )
        locals_ = [f"{plan.local_name}-partition-{i}" for i in range(plan.partitions)]
    for i, local in enumerate(locals_):
        build_managed_ledger(f, plan.topic(local), kinds if i == 0 else Counter(), plan.new)
    if plan.schema or kinds[OrphanKind.UNLISTED_SCHEMA]:
        build_schema(f, base, kinds[OrphanKind.UNLISTED_SCHEMA])


def build_managed_ledger(
    f: Factory, topic: TopicName, kinds: Counter[OrphanKind], new: bool
) -> None:
    ml_name = topic.managed_ledger_name
    if new:
        f.model.managed_ledgers[ml_name] = ManagedLedger(ml_name, str(topic), (), empty_znode=True)
        return
    offload_needs = max(kinds[OrphanKind.BK_AFTER_OFFLOAD], kinds[OrphanKind.UNREFERENCED_OFFLOAD])
    legacy = sum(kinds[kind] for kind in LEGACY_LISTED)
    listed = max(f.rng.randint(*f.spec.ledgers_per_topic), legacy + offload_needs + 1)
    dropped_count = kinds[OrphanKind.UNLISTED_DATA] + kinds[OrphanKind.SHADOW_REFERENCED]
    dropped, infos = _data_ledgers(f, ml_name, dropped_count, listed)
    infos = _legacy_listed(f, ml_name, infos[:legacy], kinds) + _offload_some(
        f, ml_name, infos[legacy:], kinds
    )
    f.model.managed_ledgers[ml_name] = ManagedLedger(ml_name, str(topic), tuple(infos))
    unlisted = kinds[OrphanKind.UNLISTED_DATA]
    for info in dropped[:unlisted]:
        f.model.planted.append(
            Planted(OrphanKind.UNLISTED_DATA, info.ledger_id, ml_name=ml_name, note="trimmed")
        )
    if dropped[unlisted:]:
        _shadow(f, topic, dropped[unlisted:], infos)
    build_cursors(f, ml_name, infos, kinds[OrphanKind.STALE_CURSOR])
    _unsubscribed(f, ml_name, kinds[OrphanKind.OPEN_CURSOR_UNSUBSCRIBED])


#: Legacy artifacts that are ledgers of a topic's list, oldest first.
LEGACY_LISTED = (OrphanKind.OFFLOAD_2_1, OrphanKind.PRE_2_2_LEDGER, OrphanKind.OBJECTS_PRE_2_10)


def _legacy_listed(
    f: Factory, ml_name: str, infos: list[LedgerInfo], kinds: Counter[OrphanKind]
) -> list[LedgerInfo]:
    """The oldest listed ledgers as older brokers left them (the table "What real Pulsar
    leaves behind"): a 2.1 offload, a pre-2.2 ledger, a 2.7-2.9 offload, in that order."""
    out = []
    todo = [kind for kind in LEGACY_LISTED for _ in range(kinds[kind])]
    for info, kind in zip(infos, todo, strict=True):
        ledger = f.model.ledgers[info.ledger_id]
        keys: tuple[str, ...] = ()
        if kind in (OrphanKind.OFFLOAD_2_1, OrphanKind.PRE_2_2_LEDGER):
            # Custom metadata came with Pulsar 2.3.0 (`LedgerMetadataUtils`, PR #3525).
            ledger = replace(ledger, metadata=replace(ledger.metadata, custom_metadata={}))
            f.model.ledgers[info.ledger_id] = ledger
        if kind is OrphanKind.OFFLOAD_2_1:
            offload = f.offload_2_1()
            keys = f.add_objects(ledger, offload.uuid, ml_name, written_by=PULSAR_2_1_VERSION)
            info = replace(info, offload=offload)
        elif kind is OrphanKind.OBJECTS_PRE_2_10:
            offload = f.offload(info.timestamp, bookkeeper_deleted=False, ml_name=ml_name)
            keys = f.add_objects(ledger, offload.uuid, ml_name, written_by=PULSAR_2_9_VERSION)
            info = replace(info, offload=offload)
        f.model.planted.append(Planted(kind, info.ledger_id, keys, ml_name))
        out.append(info)
    return out


def _unsubscribed(f: Factory, ml_name: str, count: int) -> None:
    """Cursor ledgers of subscriptions removed since: the cursor znode is gone and the ledger,
    deleted by id without being closed (`ManagedCursorImpl.asyncDeleteCursorLedger`), is still
    there, OPEN, because that delete failed."""
    for i in range(count):
        name = f"unsubscribed-{i}"
        custom = pulsar_metadata(ml_name=ml_name, cursor=name)
        shape = LedgerShape(LedgerState.OPEN)
        ledger = f.add_ledger(
            LedgerKind.CURSOR, ml_name, shape, custom, cursor=name, referenced=False
        )
        f.model.planted.append(
            Planted(OrphanKind.OPEN_CURSOR_UNSUBSCRIBED, ledger.ledger_id, ml_name=ml_name)
        )


def _data_ledgers(
    f: Factory, ml_name: str, dropped: int, listed: int
) -> tuple[list[LedgerInfo], list[LedgerInfo]]:
    """`dropped` old closed ledgers no longer listed, then the listed ones (last one open)."""
    step = f.rng.randint(30, 180) * 60_000
    closed = dropped + listed - 1
    custom = pulsar_metadata(ml_name=ml_name)
    infos = []
    for i in range(closed):
        shape = f.closed_shape()
        ledger = f.add_ledger(LedgerKind.DATA, ml_name, shape, custom, referenced=i >= dropped)
        closed_at = f.spec.epoch_ms - (closed - i) * step
        infos.append(LedgerInfo(ledger.ledger_id, shape.entries, shape.length, closed_at))
    # The current ledger: OPEN in BookKeeper, timestamp 0 and no entries/size in the list.
    current = f.add_ledger(LedgerKind.DATA, ml_name, LedgerShape(LedgerState.OPEN), custom)
    infos.append(LedgerInfo(current.ledger_id, None, None, 0))
    return infos[:dropped], infos[dropped:]


def _offload_some(
    f: Factory, ml_name: str, infos: list[LedgerInfo], kinds: Counter[OrphanKind]
) -> list[LedgerInfo]:
    """Offload the oldest closed ledgers (the offloader works from the head of the list)."""
    closed = infos[:-1]
    drawn = sum(1 for _ in closed if f.rng.random() < f.spec.offloaded_share)
    leftovers = kinds[OrphanKind.BK_AFTER_OFFLOAD]
    abandoned = kinds[OrphanKind.UNREFERENCED_OFFLOAD]
    count = max(drawn, leftovers, abandoned)
    out = list(infos)
    for j in range(count):
        info = infos[j]
        leftover = j < leftovers
        gone = leftover or f.rng.random() < f.spec.bookkeeper_deleted_share
        offload = f.offload(info.timestamp, bookkeeper_deleted=gone, ml_name=ml_name)
        out[j] = replace(info, offload=offload)
        ledger = f.model.ledgers[info.ledger_id]
        # A leftover is the BK copy a failed post-commit delete left behind.
        f.model.ledgers[info.ledger_id] = replace(ledger, in_bookkeeper=leftover or not gone)
        f.add_objects(ledger, offload.uuid, ml_name)
        if leftover:
            f.model.planted.append(
                Planted(OrphanKind.BK_AFTER_OFFLOAD, info.ledger_id, ml_name=ml_name)
            )
        if j < abandoned:
            keys = f.add_objects(ledger, f.new_uuid(), ml_name)
            f.model.planted.append(
                Planted(
                    OrphanKind.UNREFERENCED_OFFLOAD,
                    info.ledger_id,
                    keys,
                    ml_name,
                    note="earlier, abandoned upload of a listed ledger",
                )
            )
    return out


def _shadow(
    f: Factory, source: TopicName, only_shadow: list[LedgerInfo], infos: list[LedgerInfo]
) -> None:
    """A shadow topic still listing ledgers its source has trimmed (they stay referenced)."""
    shadow = TopicName(
        source.domain, source.tenant, source.namespace, f"{source.local_name}-shadow"
    )
    name = shadow.managed_ledger_name
    listed = tuple(only_shadow) + tuple(infos[:-1])
    f.model.managed_ledgers[name] = ManagedLedger(
        name, str(shadow), listed, properties=((SHADOW_SOURCE, str(source)),)
    )
    for info in only_shadow:
        f.model.ledgers[info.ledger_id] = replace(f.model.ledgers[info.ledger_id], referenced=True)
        f.model.planted.append(
            Planted(OrphanKind.SHADOW_REFERENCED, info.ledger_id, ml_name=name, note=str(source))
        )


def build_cursors(f: Factory, ml_name: str, infos: list[LedgerInfo], stale: int) -> None:
    count = max(f.rng.randint(*f.spec.cursors_per_topic), 1 if stale else 0)
    for j in range(count):
        name = f"sub-{j}"
        custom = pulsar_metadata(ml_name=ml_name, cursor=name)
        for _ in range(stale if j == 0 else 0):
            # `ManagedCursorImpl.switchToNewLedger` persists the new cursorsLedgerId, then
            # deletes the old ledger by id without closing it: it stays OPEN (positions were
            # written to it, none of it is sealed) if that delete fails.
            written = replace(f.closed_shape(), state=LedgerState.OPEN)
            moved = f.add_ledger(
                LedgerKind.CURSOR, ml_name, written, custom, cursor=name, referenced=False
            )
            f.model.planted.append(
                Planted(OrphanKind.STALE_CURSOR, moved.ledger_id, ml_name=ml_name, note=name)
            )
        ledger_id = -1
        # A cleanly closed cursor keeps its position in the znode and has no ledger.
        if f.rng.random() >= 0.3:
            ledger = f.add_ledger(
                LedgerKind.CURSOR, ml_name, LedgerShape(LedgerState.OPEN), custom, cursor=name
            )
            ledger_id = ledger.ledger_id
        position = f.rng.choice(infos[:-1] or infos)
        entry = f.rng.randint(0, position.entries - 1) if position.entries else -1
        last_active = f.spec.epoch_ms - f.rng.randint(0, 3 * DAY_MS)
        f.model.cursors[(ml_name, name)] = Cursor(
            ml_name, name, ledger_id, position.ledger_id, entry, last_active
        )


def build_schema(f: Factory, topic: TopicName, unlisted: int) -> None:
    """One closed ledger per version, each holding one SchemaEntry; extras are unlisted."""
    schema_id = topic.schema_id
    count = f.rng.randint(*f.spec.schema_versions)
    versions: list[SchemaVersion] = []
    for version in range(count + unlisted):
        definition = _definition(version)
        entry = _schema_entry(schema_id, definition, versions, f.spec.epoch_ms)
        shape = LedgerShape(LedgerState.CLOSED, 1, len(entry))
        custom = pulsar_metadata(schema_id=schema_id)
        listed = version < count
        ledger = f.add_ledger(LedgerKind.SCHEMA, schema_id, shape, custom, referenced=listed)
        digest = hashlib.sha256(definition).digest()
        if listed:
            versions.append(SchemaVersion(version, ledger.ledger_id, 0, digest))
        else:
            f.model.planted.append(
                Planted(OrphanKind.UNLISTED_SCHEMA, ledger.ledger_id, note=schema_id)
            )
    f.model.schemas[schema_id] = Schema(schema_id, tuple(versions))


def _definition(version: int) -> bytes:
    fields = [{"name": f"field{i}", "type": "string"} for i in range(version + 1)]
    record = {"type": "record", "name": "Event", "namespace": "sim", "fields": fields}
    return json.dumps(record, separators=(",", ":")).encode()


def _schema_entry(
    schema_id: str, definition: bytes, known: list[SchemaVersion], timestamp: int
) -> bytes:
    """The SchemaEntry a schema ledger's only entry holds (its size is the ledger's length)."""
    info = _schema.SchemaInfo(
        schema_id=schema_id, user="", type=_AVRO, schema=definition, timestamp=timestamp
    )
    index = [
        _schema.SchemaIndexEntry(
            version=v.version,
            position=_schema.SchemaPositionInfo(ledgerId=v.ledger_id, entryId=v.entry_id),
            hash=v.hash,
        )
        for v in known
    ] or [  # the very first entry carries a placeholder position
        _schema.SchemaIndexEntry(
            version=0, position=_schema.SchemaPositionInfo(ledgerId=-1, entryId=-1), hash=b""
        )
    ]
    return _schema.SchemaEntry(
        schema_data=info.SerializeToString(), index=index
    ).SerializeToString()
