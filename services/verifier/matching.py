"""Step 4 for BookKeeper ledgers: does the ledger's custom metadata say it is the PDLI's?

Pulsar writes `application`, `component`, `pulsar/managed-ledger`, `pulsar/cursor` and
`pulsar/schemaId` (formats reference §4); compacted ledgers `pulsar/compactedTopic`, bucket
snapshots `pulsar/delayedIndexTopic` and `pulsar/delayedIndexCursor`. Every key the PDLI's
component implies is compared, and a data-ledger PDLI naming a cursor ledger (which carries
`pulsar/cursor`) differs too.
"""

from __future__ import annotations

from services.metadata.ledger_metadata import (
    APPLICATION_PULSAR,
    COMPONENT_COMPACTED_LEDGER,
    COMPONENT_DELAYED_INDEX_BUCKET,
    COMPONENT_MANAGED_LEDGER,
    COMPONENT_SCHEMA,
    KEY_APPLICATION,
    KEY_COMPACTED_TOPIC,
    KEY_COMPONENT,
    KEY_CURSOR,
    KEY_MANAGED_LEDGER,
    KEY_SCHEMA_ID,
    LedgerMetadata,
    LedgerSummary,
)
from services.metadata.pulsar_names import java_url_decode
from services.verifier.model import Component, Difference, Target

KEY_DELAYED_INDEX_TOPIC = "pulsar/delayedIndexTopic"
KEY_DELAYED_INDEX_CURSOR = "pulsar/delayedIndexCursor"
KEY_DELAYED_INDEX_BUCKET_KEY = "pulsar/delayedIndexBucketKey"
PULSAR_KEYS = (
    KEY_APPLICATION,
    KEY_COMPONENT,
    KEY_MANAGED_LEDGER,
    KEY_CURSOR,
    KEY_SCHEMA_ID,
    KEY_COMPACTED_TOPIC,
    KEY_DELAYED_INDEX_TOPIC,
    KEY_DELAYED_INDEX_CURSOR,
    KEY_DELAYED_INDEX_BUCKET_KEY,
)


def has_pulsar_metadata(metadata: LedgerMetadata | LedgerSummary) -> bool:
    """Whether any key Pulsar writes is present (ledgers of Pulsar ≤ 2.2 have none)."""
    return any(key in metadata.custom_metadata for key in PULSAR_KEYS)


def expected_metadata(target: Target) -> dict[str, str | None]:
    """The custom metadata the PDLI's ledger must carry (None: the key must be absent)."""
    if target.component is Component.SCHEMA:
        return {
            KEY_APPLICATION: APPLICATION_PULSAR,
            KEY_COMPONENT: COMPONENT_SCHEMA,
            KEY_SCHEMA_ID: target.schema_id,
        }
    if target.component is Component.COMPACTED:
        # `CompactedTopicImpl.newCompactedLedger` (2.3+): the topic, and where it compacted to.
        return {
            KEY_APPLICATION: APPLICATION_PULSAR,
            KEY_COMPONENT: COMPONENT_COMPACTED_LEDGER,
            KEY_COMPACTED_TOPIC: target.topic,
        }
    if target.component is Component.BUCKET:
        # `BookkeeperBucketSnapshotStorage.createBucketSnapshot`: the topic and the decoded
        # subscription name (the cursor znode's name is `Codec.encode` of it).
        assert target.cursor is not None
        return {
            KEY_APPLICATION: APPLICATION_PULSAR,
            KEY_COMPONENT: COMPONENT_DELAYED_INDEX_BUCKET,
            KEY_DELAYED_INDEX_TOPIC: target.topic,
            KEY_DELAYED_INDEX_CURSOR: java_url_decode(target.cursor, "cursor_name"),
        }
    return {
        KEY_APPLICATION: APPLICATION_PULSAR,
        KEY_COMPONENT: COMPONENT_MANAGED_LEDGER,
        KEY_MANAGED_LEDGER: target.ml_name,
        KEY_CURSOR: target.cursor,
    }


def metadata_differences(
    target: Target, metadata: LedgerMetadata | LedgerSummary
) -> list[Difference]:
    """Every expected key whose stored value differs, in a stable order."""
    return [
        Difference(key, expected, actual)
        for key, expected in expected_metadata(target).items()
        if (actual := metadata.custom_text(key)) != expected
    ]
