"""The system topic of PIP-186: messages, the producer port and its Pulsar adapter.

The marker publishes PDLIs here; the deleter consumes them (and uses the same publisher for the
retry and dead-letter topics). Only `_pulsar.py` imports the Pulsar client, and it is loaded
only when `open_intent_publisher` or `PulsarIntentPublisher` is first used, so importing the
ports and messages never pulls in `pulsar`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from services.systopic.messages import (
    PROP_LEDGER_ID,
    PROP_LEDGER_TYPE,
    PROP_OWNER,
    IntentEncoder,
    decode_intent,
    encode_intent,
    encode_intents,
    owner_label,
)
from services.systopic.ports import IntentPublisher, OutgoingMessage, ProducerSettings, SendResult
from services.systopic.window import InflightWindow

if TYPE_CHECKING:
    from services.systopic._pulsar import PulsarIntentPublisher, open_intent_publisher

_ADAPTER_NAMES = ("PulsarIntentPublisher", "open_intent_publisher")


def __getattr__(name: str) -> Any:
    if name in _ADAPTER_NAMES:
        return getattr(importlib.import_module("services.systopic._pulsar"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PROP_LEDGER_ID",
    "PROP_LEDGER_TYPE",
    "PROP_OWNER",
    "InflightWindow",
    "IntentEncoder",
    "IntentPublisher",
    "OutgoingMessage",
    "ProducerSettings",
    "PulsarIntentPublisher",
    "SendResult",
    "decode_intent",
    "encode_intent",
    "encode_intents",
    "open_intent_publisher",
    "owner_label",
]
