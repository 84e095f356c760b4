"""`benchmarks.marker --encode`: the marker's encode and sign path in process, no broker.

CPU time (this thread's, so a loaded machine inflates it less than wall time) per PDLI of
encoding one Mark call's PDLIs as `Marker._send` does (`own_fields`, `IntentEncoder`),
unsigned and signed, then each part of signing on its own, best of `rounds` repetitions.
With `--cprofile N`, the N functions of the signed encode with the most own time.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from benchmarks._truth import require
from services.core import signature_tree as tree
from services.core.signing import CanonicalTemplate, IntentSigner, SignatureStatus, TrustedKeys
from services.marker.owners import LedgerRef, resolve_owner
from services.marker.planning import MarkRequest, Stamp, own_fields, shared_fields
from services.systopic import IntentEncoder, OutgoingMessage, decode_intent
from tombstone.v1 import pending_delete_pb2 as _pd

_KEY = Ed25519PrivateKey.generate()


def bench_request() -> MarkRequest:
    """The Mark request every marker benchmark sends: one managed ledger's ledgers."""
    owner = resolve_owner(
        _pd.MANAGED_LEDGER,
        topic_name="",
        ml_name="public/default/persistent/bench-0",
        cursor_name="",
        schema_id="",
    )
    return MarkRequest(owner=owner, ledger_ids=(), request_id="0" * 32)


def _call_parts(ledgers: int) -> tuple[_pd.PendingDeleteLedgerInfo, list[LedgerRef]]:
    request = bench_request()
    stamp = Stamp(7, 1_700_000_000_000, 1_700_000_005_000, "marker-bench", "bench")
    return shared_fields(request, stamp), [LedgerRef(1_000_000 + i) for i in range(ledgers)]


def signed_messages(count: int, per_call: int = 100) -> list[OutgoingMessage]:
    """`count` PDLI messages signed as a signing marker sends them (`per_call` ledgers a
    call, so each carries its call's tree proof), for the raw client to send the same bytes."""
    signer = IntentSigner({"bench": _KEY}, "bench")
    out: list[OutgoingMessage] = []
    while len(out) < count:
        shared, refs = _call_parts(per_call)
        encoder = IntentEncoder(shared, signer)
        out += encoder.encode_many([own_fields(ref, tier) for ref in refs for tier in ref.tiers])
    return out[:count]


def _best_us(work: Callable[[], object], per: int, rounds: int, calls: int) -> float:
    """Least thread CPU µs per item over `rounds` runs of `calls` calls of `work`."""
    best = float("inf")
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(calls):
            work()
        best = min(best, (time.thread_time() - started) / calls)
    return best / per * 1e6


def run_encode(ledgers: int, rounds: int, calls: int, cprofile: int) -> None:
    shared, refs = _call_parts(ledgers)
    signer = IntentSigner({"bench": _KEY}, "bench")

    def encode(sign: bool) -> list[OutgoingMessage]:
        encoder = IntentEncoder(shared, signer if sign else None)
        return encoder.encode_many([own_fields(ref, tier) for ref in refs for tier in ref.tiers])

    trusted = TrustedKeys({"bench": _KEY.public_key()})
    statuses = {trusted.check(decode_intent(m.payload)) for m in encode(True)}
    require(statuses == {SignatureStatus.VALID}, f"signed PDLIs do not verify: {statuses}")

    owns = [own_fields(ref, _pd.LEDGER) for ref in refs]
    template = CanonicalTemplate(shared)
    leaves = [template.leaf_hash(own) for own in owns]
    batches = [leaves[i : i + tree.MAX_LEAVES] for i in range(0, len(leaves), tree.MAX_LEAVES)]
    message = tree.root_message(len(batches[0]), tree.build(batches[0])[0])
    figures = {
        "encode, unsigned": lambda: encode(False),
        "encode, signed": lambda: encode(True),
        "  leaf hashes": lambda: [template.leaf_hash(own) for own in owns],
        f"  trees ({' + '.join(str(len(b)) for b in batches)} leaves)": lambda: [
            tree.build(b) for b in batches
        ],
        f"  Ed25519 ({len(batches)} signatures)": lambda: [_KEY.sign(message) for _ in batches],
        "  signature fields (trees, signatures, fields)": lambda: signer.signature_fields_of_leaves(
            leaves
        ),
    }
    print(f"in process, {ledgers} PDLIs per call, best of {rounds} x {calls} calls (thread CPU):")
    for name, work in figures.items():
        print(f"{name:48s} {_best_us(work, ledgers, rounds, calls):6.2f} µs/PDLI")
    if cprofile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [encode(True) for _ in range(calls)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(cprofile)
