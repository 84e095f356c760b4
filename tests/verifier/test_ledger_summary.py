"""The decision's ledger decode (`decode_ledger_summary`) against the full one
(`decode_ledger_metadata`): the same fields, the same errors, the same verdicts.

The ledgers are the simulator's (`devstack/simulator`): the default profile (Pulsar >= 2.10
on BookKeeper's binary format), the legacy profile (pre-2.2 ledgers without custom metadata,
OPEN cursor ledgers, long-hierarchical paths) and the legacy profile with half of its ledgers
in the TextFormat of BookKeeper before 4.9 (`v2_share`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from devstack.s3 import S3Server
from devstack.simulator.generate import build_model
from devstack.simulator.model import Ledger
from devstack.simulator.s3 import open_object_store
from devstack.simulator.spec import ClusterSpec, legacy_spec
from devstack.simulator.writer import write_cluster
from services.core.metrics import Metrics
from services.metadata.errors import CorruptMetadata
from services.metadata.ledger_metadata import (
    LedgerMetadata,
    LedgerSummary,
    decode_ledger_metadata,
    decode_ledger_summary,
    encode_ledger_metadata,
)
from services.metadata.pulsar_stores import ManagedLedgers
from services.verifier import decision
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.test_simulated_cluster import ledger_pdli

SPECS = {
    "default": ClusterSpec(seed=11, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3),
    "legacy": legacy_spec(seed=12, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3),
    "legacy-text-format": legacy_spec(
        seed=13, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3, v2_share=0.5
    ),
}


def projected(metadata: LedgerMetadata) -> LedgerSummary:
    """The fields of the full decode that the decision reads."""
    return LedgerSummary(
        metadata.state, metadata.length, metadata.ctime, dict(metadata.custom_metadata)
    )


def encoded(ledger: Ledger) -> bytes:
    return encode_ledger_metadata(ledger.metadata, format_version=ledger.metadata.format_version)


def outcome(decode: Any, data: bytes, ledger_id: int) -> object:
    """The decode's result as comparable fields, or its error's type and text."""
    try:
        result = decode(data, ledger_id=ledger_id, path="/ledgers/x")
    except CorruptMetadata as e:
        return (type(e), str(e))
    return projected(result) if isinstance(result, LedgerMetadata) else result


@pytest.mark.parametrize("profile", list(SPECS))
def test_the_summary_has_the_full_decodes_fields(profile: str) -> None:
    """For every ledger of the profile, in its format version: the same state, length, ctime
    and custom metadata as the full decode."""
    model = build_model(SPECS[profile])
    ledgers = list(model.ledgers.values())
    assert ledgers
    for ledger in ledgers:
        data = encoded(ledger)
        full = decode_ledger_metadata(data, ledger_id=ledger.ledger_id, path="/ledgers/x")
        summary = decode_ledger_summary(data, ledger_id=ledger.ledger_id, path="/ledgers/x")
        assert summary == projected(full), ledger.ledger_id


@pytest.mark.parametrize("profile", list(SPECS))
def test_damaged_bytes_fail_or_pass_alike(profile: str) -> None:
    """Cut short or with one byte changed, a ledger znode is refused by both decodes with the
    same error, or read by both with the same fields."""
    model = build_model(SPECS[profile])
    for ledger in list(model.ledgers.values())[:40]:
        data = encoded(ledger)
        damaged = [data[:cut] for cut in range(0, len(data), max(1, len(data) // 25))]
        for at in range(0, len(data), max(1, len(data) // 25)):
            damaged.append(data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :])
        for bad in damaged:
            full = outcome(decode_ledger_metadata, bad, ledger.ledger_id)
            assert outcome(decode_ledger_summary, bad, ledger.ledger_id) == full, bad


def test_the_first_text_format_is_read_alike() -> None:
    """BookKeeper's first text format (v1) goes through the full decode: the same fields."""
    data = b"BookieMetadataFormatVersion\t1\n2\n3\n4096\n0\tb1:3181\tb2:3181\tb3:3181\n9\tCLOSED"
    full = decode_ledger_metadata(data, ledger_id=7, path="/ledgers/x")
    assert decode_ledger_summary(data, ledger_id=7, path="/ledgers/x") == projected(full)


async def test_the_summary_gives_the_full_decodes_verdicts(
    store: Any,
    s3: S3Server,
    s3client: Any,
    config: VerifierConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every BookKeeper ledger of the legacy profile with text-format ledgers, written to
    ZooKeeper: each PDLI gets the same verdict with the summary as with the full decode."""
    spec = SPECS["legacy-text-format"]
    async with open_object_store(s3.client_config()) as writer_s3:
        model = await write_cluster(spec, store=store, s3_client=writer_s3)
    policy = replace(config.offload, allowed_buckets=frozenset({spec.bucket}))
    cfg = replace(config, offload=policy, shadow_scan_interval=timedelta(minutes=5))
    parts = build(
        cfg,
        MetadataZnodeStore(store),
        S3ObjectStore(s3client),
        VerifierMetrics(Metrics()),
        ml_names=ManagedLedgers(store).managed_ledger_names,
    )
    assert parts.shadows is not None
    await parts.shadows.scan()
    any_ml = next(iter(model.managed_ledgers))
    requests = [ledger_pdli(model, led.ledger_id, any_ml) for led in model.bookkeeper_ledgers()]
    assert len(requests) > 20

    def verdicts(verdict: Any) -> tuple[Any, ...]:
        return (verdict.decision, verdict.skip_reason, verdict.code, verdict.bookkeeper)

    lazy, full = [], []
    for request in requests:
        # One PDLI at a time, each way right after the other: no age window moves between.
        lazy.append(verdicts(await parts.engine.verify(request)))
        with monkeypatch.context() as patched:
            patched.setattr(decision, "decode_ledger_summary", decode_ledger_metadata)
            full.append(verdicts(await parts.engine.verify(request)))
    assert lazy == full
    assert len({v[0] for v in lazy}) > 1  # more than one kind of verdict was compared
