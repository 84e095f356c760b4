"""Step 4 for BookKeeper ledgers: does the ledger's custom metadata say it is the PDLI's?

Pulsar writes `application`, `component`, `pulsar/managed-ledger`, `pulsar/cursor` and
`pulsar/schemaId` (formats reference §4). Every key the PDLI's component implies is compared,
and a data-ledger PDLI naming a cursor ledger (which carries `pulsar/cursor`) differs too.
"""

from __future__ import annotations

from services.metadata.ledger_metadata import (
    APPLICATION_PULSAR,
    COMPONENT_MANAGED_LEDGER,
    COMPONENT_SCHEMA,
    KEY_APPLICATION,
    KEY_COMPONENT,
    KEY_CURSOR,
    KEY_MANAGED_LEDGER,
    KEY_SCHEMA_ID,
    LedgerMetadata,
)
from services.verifier.model import Component, Difference, Target

PULSAR_KEYS = (KEY_APPLICATION, KEY_COMPONENT, KEY_MANAGED_LEDGER, KEY_CURSOR, KEY_SCHEMA_ID)


def has_pulsar_metadata(metadata: LedgerMetadata) -> bool:
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
    return {
        KEY_APPLICATION: APPLICATION_PULSAR,
        KEY_COMPONENT: COMPONENT_MANAGED_LEDGER,
        KEY_MANAGED_LEDGER: target.ml_name,
        KEY_CURSOR: target.cursor,
    }


def metadata_differences(target: Target, metadata: LedgerMetadata) -> list[Difference]:
    """Every expected key whose stored value differs, in a stable order."""
    return [
        Difference(key, expected, actual)
        for key, expected in expected_metadata(target).items()
        if (actual := metadata.custom_text(key)) != expected
    ]
