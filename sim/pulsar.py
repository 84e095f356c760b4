"""What Pulsar writes, as Pulsar writes it (fixtures for the simulated cluster).

- The ML znode `/managed-ledgers/<ml>`: `ManagedLedgerInfo` (`MLDataFormats.proto`), written by
  `MetaStoreImpl.asyncUpdateLedgerIds` with the version the broker holds.
- A cursor znode `/managed-ledgers/<ml>/<cursor>`: `ManagedCursorInfo.cursorsLedgerId`, switched
  by `ManagedCursorImpl.switchToNewLedger` (the old cursor ledger is left OPEN).
- A ledger znode at the hybrid hierarchical path (Pulsar >= 2.10's `PulsarLedgerManager`):
  BookKeeper's `LedgerMetadataFormat` v3 with the custom metadata of
  `ManagedLedgerImpl.createLedgerAfterClosed` (`application`, `component`,
  `pulsar/managed-ledger`) or of the cursor (`pulsar/cursor` too); a ledger created before
  Pulsar 2.2 has no custom metadata.
- Offloaded objects `<uuid>-ledger-<id>` and `-index` (`BlobStoreManagedLedgerOffloader.offload`)
  with the version keys `s3managedledgeroffloader*` (since 2.1) and the user metadata
  `managedLedgerName` and `pulsarClusterName` (Pulsar >= 2.10 only); the index object is
  `OffloadIndexBlockImpl`'s layout around the ledger's own metadata
  (`OffloadUtils.buildLedgerMetadataFormat`), so it names the owner when the ledger's custom
  metadata does. The ledger's `OffloadContext` (uuid bits, `complete`, `bookkeeperDeleted`,
  driver metadata with the bucket; Pulsar 2.1 wrote no driver metadata at all) is written by
  `ManagedLedgerImpl.offloadLoop`.
"""

from __future__ import annotations

import random

from devstack.simulator.blobs import raw_metadata
from services.marker.owners import EncodingOptions
from services.metadata.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from services.metadata.offload import (
    build_index_block,
    data_object_key,
    index_object_key,
    uuid_to_bits,
)
from services.metadata.paths import LedgerLayout, LedgerPaths, layout_text
from services.metadata.pulsar_formats import (
    CompressionType,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    decode_cursor_info,
    decode_managed_ledger_info,
    encode_cursor_info,
    encode_managed_ledger_info,
)
from services.metadata.pulsar_names import cursor_path, managed_ledger_path
from sim.s3 import S3
from sim.zk import ZooKeeper

PATHS = LedgerPaths()
CLUSTER = "sim"
NEIGHBOUR = "east"
"""The cluster sharing our ledgers root (`sim/neighbour.py`)."""
BUCKET = "offload"
FOREIGN_BUCKET = "staging-offload"
"""A bucket of another environment with look-alike objects: never on the allow-list."""
DRIVER = "aws-s3"
LAYOUTS = (
    LedgerLayout.HIERARCHICAL,
    LedgerLayout.HIERARCHICAL,
    LedgerLayout.LONG_HIERARCHICAL,
    LedgerLayout.LEGACY_HIERARCHICAL,
    LedgerLayout.FLAT,
)
"""What `<root>/LAYOUT` names, drawn per seed (the default half the time)."""
OFFLOADER_ERAS = ("2.1", "2.2", "2.10")
"""Which Pulsar's offloader wrote an offload: 2.1 (no driver metadata in the context, no
owner metadata on the objects), 2.2 to 2.9 (driver metadata; no owner metadata), 2.10 on."""
ENCODINGS = (
    EncodingOptions(CompressionType.NONE),
    EncodingOptions(CompressionType.LZ4, threshold_bytes=0),
    EncodingOptions(CompressionType.ZSTD, threshold_bytes=0),
)
"""The brokers' `managed{Ledger,Cursor}InfoCompressionType` (NONE before 5.0, LZ4 its default),
with a threshold of 0 (before 3.1 any type compressed every znode; the 16 KiB default since
would leave the simulation's small znodes raw)."""
VERSION_KEYS = {
    "s3managedledgeroffloaderformatversion": "1",
    "s3managedledgeroffloadersoftwareversion": "2.1.0",
    "s3managedledgeroffloadersoftwaregitsha": "0" * 40,
}


def data_meta(ml: str) -> dict[str, bytes]:
    return {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": ml.encode(),
    }


def cursor_meta(ml: str, cursor: str) -> dict[str, bytes]:
    return {**data_meta(ml), "pulsar/cursor": cursor.encode()}


def foreign_meta() -> dict[str, bytes]:
    """A ledger of another BookKeeper application (DistributedLog) in the same cluster."""
    return {"application": b"distributedlog", "component": b"log-segment"}


def ledger_metadata(ledger_id: int, custom: dict[str, bytes], *, closed: bool) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        state=LedgerState.CLOSED if closed else LedgerState.OPEN,
        length=100 if closed else 0,
        last_entry_id=9 if closed else -1,
        custom_metadata=custom,
    )


def ledger_bytes(ledger_id: int, custom: dict[str, bytes], *, closed: bool) -> bytes:
    return encode_ledger_metadata(ledger_metadata(ledger_id, custom, closed=closed))


class Cluster:
    """The Pulsar side: topics, their ledgers and offloads, written directly (no faults)."""

    def __init__(
        self,
        zk: ZooKeeper,
        s3: S3,
        encoding: EncodingOptions | None = None,
        layout: LedgerLayout = LedgerLayout.HIERARCHICAL,
    ) -> None:
        self.zk = zk
        self.s3 = s3
        self.layout_paths = LedgerPaths(PATHS.root, layout)
        """`LAYOUT`'s own rule: where BookKeeper's ledger manager (a bookie, a client
        configured with `zk+longhierarchical://` or a flat layout) puts a ledger; Pulsar >=
        2.10's driver puts its ledgers at the hybrid path (`PATHS`) whatever `LAYOUT` says."""
        self.where: dict[int, str] = {}
        """Each ledger's znode path."""
        self.at: dict[str, int] = {}
        """Each ledger znode path's ledger id."""
        self.layout_share = 0.0 if layout is LedgerLayout.HIERARCHICAL else 0.2
        self._placement = random.Random(len(layout.value))
        self.encoding = encoding or EncodingOptions()
        """How the brokers encode ML and cursor znodes (the marker is told the same)."""
        self.next_ledger = 1
        self.next_uuid = 1
        self.data_ledgers: dict[int, str] = {}
        """Data ledgers (not cursor ledgers) by id, with the ML their metadata names."""
        self.custom: dict[int, dict[str, bytes]] = {}
        """Every ledger's custom metadata (empty for one created before Pulsar 2.2)."""
        zk.create(f"{PATHS.root}/LAYOUT", layout_text(layout), make_parents=True)
        zk.create("/managed-ledgers")
        s3.buckets[BUCKET] = {}
        s3.buckets[FOREIGN_BUCKET] = {}

    def new_ledger(
        self, custom: dict[str, bytes], *, closed: bool, at_layout: bool | None = None
    ) -> int:
        """A ledger at the hybrid path (Pulsar >= 2.10's driver), or with `at_layout` where
        `LAYOUT`'s ledger manager puts it. Left to the cluster (None): a ledger of another
        application or of a Pulsar before 2.2 (no custom metadata) goes where `LAYOUT` says
        (BookKeeper's own client), one of a Pulsar broker there a drawn share of the time
        (brokers of an older release beside newer ones)."""
        if at_layout is None:
            pulsar = custom.get("application") == b"pulsar"
            at_layout = not pulsar or self._placement.random() < self.layout_share
        ledger_id = self.next_ledger
        self.next_ledger += 1
        if "pulsar/cursor" not in custom and "pulsar/managed-ledger" in custom:
            self.data_ledgers[ledger_id] = custom["pulsar/managed-ledger"].decode()
        self.custom[ledger_id] = custom
        rules = self.layout_paths if at_layout else PATHS
        path = rules.ledger_path(ledger_id)
        self.where[ledger_id], self.at[path] = path, ledger_id
        self.zk.create(path, ledger_bytes(ledger_id, custom, closed=closed), make_parents=True)
        return ledger_id

    def ledger_path(self, ledger_id: int) -> str:
        return self.where.get(ledger_id) or PATHS.ledger_path(ledger_id)

    def ledger_id_of(self, path: str) -> int | None:
        return self.at.get(path)

    def recreate_ledger(self, ledger_id: int, custom: dict[str, bytes], version: int) -> None:
        """A ledger created under an id chosen by the client (`createLedgerAdv`): OPEN at
        version 0, then closed and its metadata written again until it is at `version`."""
        self.data_ledgers[ledger_id] = custom["pulsar/managed-ledger"].decode()
        self.custom[ledger_id] = custom
        path = self.ledger_path(ledger_id)
        self.zk.create(path, ledger_bytes(ledger_id, custom, closed=False), make_parents=True)
        for now in range(version):
            self.zk.set(path, ledger_bytes(ledger_id, custom, closed=True), version=now)

    def close_ledger(self, ledger_id: int, custom: dict[str, bytes]) -> None:
        path = self.ledger_path(ledger_id)
        stat = self.zk.stat(path)
        if stat is not None:
            self.zk.set(path, ledger_bytes(ledger_id, custom, closed=True), version=stat.version)

    def new_uuid(self) -> str:
        n = self.next_uuid
        self.next_uuid += 1
        return f"00000000-0000-4000-8000-{n:012d}"

    def ml_bytes(self, info: ManagedLedgerInfo) -> bytes:
        """`MetaStoreImpl.compressLedgerInfo`: raw, or the compressed form with its header."""
        e = self.encoding
        return encode_managed_ledger_info(
            info, compression=e.compression, threshold_bytes=e.threshold_bytes
        )

    def cursor_bytes(self, info: ManagedCursorInfo) -> bytes:
        """`MetaStoreImpl.compressCursorInfo`, the same rule."""
        e = self.encoding
        return encode_cursor_info(
            info, compression=e.compression, threshold_bytes=e.threshold_bytes
        )

    def upload(self, bucket: str, uuid: str, ledger_id: int, ml: str, era: str = "2.10") -> None:
        """The two objects of one offload, as the offloader of Pulsar `era` writes them."""
        meta = dict(VERSION_KEYS)
        if era == "2.10":
            meta |= {"managedledgername": ml, "pulsarclustername": CLUSTER}
        data = b"data"
        custom = self.custom.get(ledger_id, {})
        index = build_index_block(
            segment_metadata=raw_metadata(ledger_metadata(ledger_id, custom, closed=True)),
            entries=[(0, 1, 0)],
            data_object_length=len(data),
        )
        self.s3.put(bucket, data_object_key(uuid, ledger_id), data, meta)
        self.s3.put(bucket, index_object_key(uuid, ledger_id), index, meta)

    # --- reading owners (the checks and the brokers) ---------------------------------------

    def ml_info(self, ml: str) -> tuple[ManagedLedgerInfo, int] | None:
        path = managed_ledger_path(ml)
        node = self.zk.nodes.get(path)
        if node is None:
            return None
        return decode_managed_ledger_info(node.data, path=path), node.version

    def write_ml(self, ml: str, info: ManagedLedgerInfo, version: int) -> int:
        return self.zk.set(managed_ledger_path(ml), self.ml_bytes(info), version=version)

    def cursor_ledger(self, ml: str, cursor: str) -> int | None:
        path = cursor_path(ml, cursor)
        node = self.zk.nodes.get(path)
        if node is None:
            return None
        return decode_cursor_info(node.data, path=path).cursorsLedgerId

    def create_topic(self, ml: str, cursor: str) -> None:
        self.zk.create(
            managed_ledger_path(ml),
            self.ml_bytes(ManagedLedgerInfo()),
            make_parents=True,
        )
        self.zk.create(
            cursor_path(ml, cursor), self.cursor_bytes(ManagedCursorInfo(cursorsLedgerId=-1))
        )

    # --- writes both kinds of broker make ----------------------------------------------------

    def ml(self, ml: str) -> tuple[ManagedLedgerInfo, int]:
        """The ML znode of a topic that exists (its info and version)."""
        got = self.ml_info(ml)
        assert got is not None, ml
        return got

    def ml_now(self, ml: str) -> ManagedLedgerInfo:
        """The ML as it is now, empty while an unmodified broker deletes the topic (its znode
        is gone until the broker has deleted the ledgers and created the topic again)."""
        got = self.ml_info(ml)
        return ManagedLedgerInfo() if got is None else got[0]

    def write_cursor(self, ml: str, cursor: str, ledger_id: int) -> None:
        """`ManagedCursorImpl.persistPositionToMetaStore` after a switch: the new ledger, the
        properties kept."""
        path = cursor_path(ml, cursor)
        node = self.zk.nodes.get(path)
        info = ManagedCursorInfo()
        if node is not None:
            info.CopyFrom(decode_cursor_info(node.data, path=path))
        info.cursorsLedgerId = ledger_id
        data = self.cursor_bytes(info)
        if node is None:  # a new subscription after an unsubscribe
            self.zk.create(path, data)
        else:
            self.zk.set(path, data, version=node.version)

    def recreate_topic(self, ml: str, cursor: str, now_ms: int) -> None:
        """A topic created again under a deleted one's name: new znodes, a new OPEN ledger."""
        self.create_topic(ml, cursor)
        info, version = self.ml(ml)
        first = self.new_ledger(data_meta(ml), closed=False)
        info.ledgerInfo.add(ledgerId=first, entries=0, size=0, timestamp=now_ms)
        self.write_ml(ml, info, version)

    def delete_other_cursors(self, ml: str, cursor: str) -> None:
        """The topic's other cursors (the `__compaction` one) go with it (their cursor ledgers
        and the compacted ledger are left: `sim/compaction.py`)."""
        prefix = managed_ledger_path(ml) + "/"
        for path in [p for p in self.zk.nodes if p.startswith(prefix)]:
            if path != cursor_path(ml, cursor):
                self.zk.delete(path, version=-1, by="pulsar")


def set_offload(
    entry: ManagedLedgerInfo.LedgerInfo,
    uuid: str,
    *,
    complete: bool,
    bk_deleted: bool,
    bucket: str,
    era: str = "2.10",
) -> None:
    ctx = entry.offloadContext
    ctx.uidMsb, ctx.uidLsb = uuid_to_bits(uuid)
    ctx.complete, ctx.bookkeeperDeleted = complete, bk_deleted
    if era == "2.1":
        ctx.ClearField("driverMetadata")
        return
    ctx.driverMetadata.name = DRIVER
    del ctx.driverMetadata.properties[:]
    ctx.driverMetadata.properties.add(key="bucket", value=bucket)
