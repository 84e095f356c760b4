"""The extract's ledger columns against the row-per-ledger code they replaced.

The reference below is the extract's former `bk_ledgers` row (`rows.ledger_row` over the full
`decode_ledger_metadata`), kept here verbatim in substance: every BookKeeper unit of the
simulator's worlds, and ledger znodes of every format and fault, must give the same rows,
column for column, through the dicts `run_unit` returns and the Arrow batch the job sends.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, IdLayout, OrphanPlan, PathWriter, legacy_spec
from devstack.zookeeper import ZooKeeperServer
from services.metadata import (
    BookKeeperLedgers,
    CorruptMetadata,
    LedgerMetadata,
    MetadataStore,
    Versioned,
    ZkMetadataStore,
    decode_ledger_metadata,
)
from services.metadata.ledger_metadata import (
    APPLICATION_PULSAR,
    HEADER_PREFIX,
    LedgerState,
    Segment,
    encode_ledger_metadata,
)
from services.metadata.paths import LedgerLayout
from services.scan.extract.job import WIDE_ARROW
from services.scan.extract.ledger_columns import COLUMNS
from services.scan.extract.rows import CUSTOM_COLUMNS, Row, recorded_version
from services.scan.extract.units import BK, ExtractSettings, plan_units, read_unit, unit_paths
from tests.scan import sim


def reference_row(
    ledger_id: int, subtree: str, node: Versioned, metadata: LedgerMetadata | None, error: str
) -> Row:
    """The `bk_ledgers` row as the extract built it before the columns."""
    row: Row = dict.fromkeys(COLUMNS)
    row.update(
        ledger_id=ledger_id,
        subtree=subtree,
        znode_ctime_ms=node.ctime_ms,
        znode_mtime_ms=node.mtime_ms,
        znode_version=recorded_version(node),
    )
    if metadata is None:
        row["decode_error"] = error or "undecodable"
        return row
    row.update(
        state=metadata.state.name,
        length=metadata.length,
        last_entry_id=metadata.last_entry_id,
        ensemble_size=metadata.ensemble_size,
        ctime_ms=metadata.ctime,
        metadata_format_version=metadata.format_version,
        custom_metadata=dict(metadata.custom_metadata),
        has_pulsar_metadata=metadata.application == APPLICATION_PULSAR,
    )
    for key, column in CUSTOM_COLUMNS.items():
        row[column] = metadata.custom_text(key)
    return row


async def reference_rows(store: MetadataStore, settings: ExtractSettings, scope: str) -> list[Row]:
    """One unit's rows read one znode at a time and decoded in full."""
    paths = unit_paths(settings.ledgers_root, scope)
    subtree = f"{paths.root}/{scope}" if scope else paths.root
    ids = await BookKeeperLedgers(store, paths=paths).ledger_ids_under(scope)
    rows = []
    for ledger_id in ids:
        top = scope.split("/", 1)[0]
        if paths.layout is LedgerLayout.FLAT:
            path = paths.ledger_path(ledger_id)
        else:
            digits = f"{ledger_id:010d}" if len(top) == 2 else f"{ledger_id:019d}"
            split = (2, 4, 4) if len(top) == 2 else (3, 4, 4, 4, 4)
            parts, at = [], 0
            for size in split:
                parts.append(digits[at : at + size])
                at += size
            parts[-1] = f"L{parts[-1]}"
            path = f"{paths.root}/{'/'.join(parts)}"
        node = await store.get(path)
        try:
            metadata = decode_ledger_metadata(node.data, ledger_id=ledger_id, path=path)
        except CorruptMetadata as e:
            rows.append(reference_row(ledger_id, subtree, node, None, e.problem))
            continue
        rows.append(reference_row(ledger_id, subtree, node, metadata, ""))
    return rows


def _plain(rows: list[Row]) -> list[Row]:
    """Arrow gives a map as (key, value) pairs: compare maps as dicts."""
    out = []
    for row in rows:
        custom = row["custom_metadata"]
        out.append({**row, "custom_metadata": None if custom is None else dict(custom)})
    return out


async def _compare_every_unit(zk: ZooKeeperServer, settings: ExtractSettings) -> int:
    units, _, _ = await plan_units(settings)
    ledger_type = WIDE_ARROW.field("bk_ledgers").type
    compared = 0
    async with ZkMetadataStore.connect(zk.address) as store:
        for unit in (u for u in units if u.kind == BK):
            expected = await reference_rows(store, settings, unit.scope)
            result = await read_unit(unit, settings)
            assert result.ledgers is not None
            assert result.ledgers.rows() == expected, unit.scope
            batch = result.ledgers.arrow(ledger_type)
            assert isinstance(batch, pa.StructArray)
            assert _plain(batch.to_pylist()) == expected, unit.scope
            assert result.rows[-1][1]["rows"] == len(expected)
            compared += len(expected)
    return compared


def _world(name: str) -> ClusterSpec:
    base = ClusterSpec(
        seed=23,
        tenants=1,
        namespaces_per_tenant=2,
        topics_per_namespace=3,
        orphans=OrphanPlan.some(1),
    )
    return {
        # Pulsar >= 2.10 with BookKeeper 4.x: binary v3 metadata at hybrid paths.
        "current-short": base,
        "current-long": replace(base, id_layout=IdLayout.LONG),
        # BookKeeper < 4.9 writers: half the znodes in the v2 TextFormat.
        "text-v2": replace(base, v2_share=0.5),
        # Pulsar <= 2.2 ledgers, 2.1 offloads, long LAYOUT written by BookKeeper's manager.
        "legacy": legacy_spec(seed=23, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3),
        # BookKeeper < 4.7's flat layout upgraded to Pulsar >= 2.10.
        "flat": replace(base, layout=LedgerLayout.FLAT, path_writer=PathWriter.MIXED),
    }[name]


@pytest.mark.parametrize("world", ["current-short", "current-long", "text-v2", "legacy", "flat"])
async def test_columns_equal_the_former_rows_on_simulated_worlds(
    zk: ZooKeeperServer, s3: S3Server, world: str
) -> None:
    spec = _world(world)
    await sim.write(zk, s3, spec)
    assert await _compare_every_unit(zk, sim.settings(zk, s3, spec)) > 0


def _v1(ledger_id: int) -> bytes:
    """BookKeeper's v1 text (`LedgerMetadata.serialize` before 4.2): quorum, ensemble, length,
    then `<first entry>\\t<bookies...>` per segment and `<last entry>\\tCLOSED`."""
    del ledger_id
    return HEADER_PREFIX + b"1\n2\n3\n4096\n0\tb1:3181\tb2:3181\tb3:3181\n99\tCLOSED"


def _metadata(ledger_id: int, custom: dict[str, bytes], **kw: Any) -> LedgerMetadata:
    fields: dict[str, Any] = {
        "ledger_id": ledger_id,
        "ensemble_size": 3,
        "write_quorum": 2,
        "ack_quorum": 2,
        "segments": (Segment(0, ("b1:3181", "b2:3181", "b3:3181")),),
        "custom_metadata": custom,
        **kw,
    }
    return LedgerMetadata(**fields)


PULSAR = {"application": b"pulsar", "component": b"managed-ledger"}


def _odd_znodes() -> dict[int, bytes]:
    """Ledger znodes of every format and fault the reader must handle as before."""
    v3 = encode_ledger_metadata(_metadata(1, PULSAR))
    body = v3[len(HEADER_PREFIX) + 2 :]
    closed = _metadata(
        2,
        {**PULSAR, "pulsar/managed-ledger": b"t/ns/persistent/x", "pulsar/cursor": b"sub"},
        state=LedgerState.CLOSED,
        length=1234,
        last_entry_id=9,
        ctime=1_700_000_000_000,
    )
    return {
        1: v3,
        2: encode_ledger_metadata(closed),
        3: encode_ledger_metadata(closed, format_version=2),
        4: _v1(4),
        5: encode_ledger_metadata(_metadata(5, {"application": b"\xff\xfe", "x": b"\x00"})),
        # A length prefix of three bytes (a body over 16 KiB).
        6: encode_ledger_metadata(_metadata(6, {**PULSAR, "big": b"v" * 20_000})),
        7: encode_ledger_metadata(_metadata(7, {})),
        8: encode_ledger_metadata(
            _metadata(8, PULSAR, state=LedgerState.IN_RECOVERY, length=5, last_entry_id=3)
        ),
        # Faults: each is a row with decode_error.
        10: b"",
        11: b"garbage",
        12: HEADER_PREFIX + b"9\n",
        13: v3[:-5],  # truncated body
        14: HEADER_PREFIX + b"3\n" + body[:1] + b"\xff" * (len(body) - 1),  # garbage protobuf
        15: HEADER_PREFIX + b"3\n\x02\x08\x03",  # missing required fields
        16: HEADER_PREFIX + b"3\n\xff\xff\xff\xff\xff\xff",  # varint too long
        17: HEADER_PREFIX + b"2\nnot a text proto {",
        18: HEADER_PREFIX + b"1\nx\n",
    }


async def test_columns_equal_the_former_rows_on_every_format_and_fault(
    zk: ZooKeeperServer, s3: S3Server
) -> None:
    async with ZkMetadataStore.connect(zk.address) as store:
        ledgers = BookKeeperLedgers(store)
        for ledger_id, data in _odd_znodes().items():
            await store.create(ledgers.path(ledger_id), data, make_parents=True)
        # A version bump: the column records the znode's version.
        path = ledgers.path(2)
        await store.set(path, (await store.get(path)).data, version=0)
    spec = ClusterSpec(seed=1, tenants=1, namespaces_per_tenant=1)
    assert await _compare_every_unit(zk, sim.settings(zk, s3, spec)) == len(_odd_znodes())
