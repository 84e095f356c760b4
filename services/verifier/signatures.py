"""The signature check of a PDLI, before any decision (docs/design.md §4.7).

- A valid signature of a trusted key: the target is marked `signed` (a proof of who issued
  the intent, which `ownership.py` may rely on).
- A trusted key id with a signature that does not match the fields: someone changed a signed
  PDLI. SKIP FORGED, whether or not signatures are required.
- Unsigned, or signed by a key this verifier does not trust: SKIP FORGED when signatures are
  required; otherwise decided as before, unsigned (an unknown key may be a marker's new key
  that this verifier has not been given yet; it is logged).

The deleter dead-letters SKIP FORGED with reason `forged`. Every outcome is counted by the
caller's `on_checked`; rejected ones also write a `tombstone.security` line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import structlog

from services.core.signing import SignatureStatus, TrustedKeys
from services.verifier.model import SkipReason, Target, Verdict, skip
from tombstone.v1 import pending_delete_pb2 as _pb

_security = structlog.get_logger("tombstone.security")

_REASONS = {
    SignatureStatus.UNSIGNED: "unsigned, and signatures are required",
    SignatureStatus.UNKNOWN_KEY: "signed by a key this verifier does not trust",
    SignatureStatus.BAD_SIGNATURE: "the signature does not match the PDLI's fields",
}


class Forged(Exception):
    """The PDLI must not be decided: its verdict is SKIP FORGED."""

    def __init__(self, status: SignatureStatus) -> None:
        super().__init__(_REASONS[status])
        self.verdict: Verdict = skip(SkipReason.FORGED, status.value, _REASONS[status])


Checked = Callable[[SignatureStatus, _pb.PendingDeleteLedgerInfo], None]


class SignatureGate:
    """Applies the trusted keys and the require-signed policy to parsed PDLIs."""

    def __init__(
        self,
        trusted: TrustedKeys,
        *,
        require_signed: bool,
        on_checked: Checked = lambda status, pdli: None,
    ) -> None:
        self._trusted = trusted
        self._require = require_signed
        self._on_checked = on_checked

    def apply(
        self, pdli: _pb.PendingDeleteLedgerInfo, parsed: Target | Exception
    ) -> Target | Exception:
        """`parsed` marked signed, unchanged, or replaced by `Forged`.

        A rejected signature wins over a parse error: a PDLI nobody trusted issued is forged,
        whatever else is wrong with it.
        """
        status = self._trusted.check(pdli)
        self._on_checked(status, pdli)
        if status is SignatureStatus.VALID:
            if isinstance(parsed, Target):
                return dataclasses.replace(parsed, signed=True)
            return parsed
        if status is SignatureStatus.BAD_SIGNATURE or self._require:
            _log_rejected(status, pdli, required=self._require)
            return Forged(status)
        if status is SignatureStatus.UNKNOWN_KEY:
            _log_rejected(status, pdli, required=False)
        return parsed


def _log_rejected(
    status: SignatureStatus, pdli: _pb.PendingDeleteLedgerInfo, *, required: bool
) -> None:
    _security.warning(
        "pdli_signature_rejected",
        result=status.value,
        required=required,
        signing_key_id=pdli.signing_key_id,
        ledger_id=pdli.ledger_id if pdli.HasField("ledger_id") else None,
        owner=pdli.managed_ledger_name or pdli.schema_id,
        source=_pb.Source.Name(pdli.source) if pdli.source in _pb.Source.values() else pdli.source,
        marker_id=pdli.marker_id,
        request_id=pdli.request_id,
    )
