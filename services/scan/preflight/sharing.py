"""Pre-flight warning: namespaces here replicate to clusters that are not declared with
`--shared-cluster`. Geo-replicated clusters may share our BookKeeper; if they do and are not
declared, their ledgers are set apart (`replicated_undeclared`, `unknown_namespace`) rather
than judged, so the run says which clusters to declare. A warning, never a refusal: the
extract reads the policies again and a failed read fails the run there."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.scan.extract.stores import open_store
from services.scan.preflight.zk import quiet

if TYPE_CHECKING:
    from services.scan.extract.units import ExtractSettings

#: Reading every namespace's policies; a store too slow for it is left to the extract.
POLICIES_TIMEOUT_S = 3.0


async def check_replication(settings: ExtractSettings) -> str | None:
    """The warning line, or None (nothing replicates elsewhere, or the policies could not be
    read within the pre-flight's time)."""
    from services.scan.extract.namespaces import read_namespaces
    from services.scan.extract.tasks import Out, ReadLimits
    from services.scan.extract.units import policies_store

    store_url = policies_store(settings)
    out: Out = []
    try:
        with quiet("aiozk"):
            async with open_store(
                store_url,
                timeout_s=settings.zk_timeout_s,
                request_timeout_s=POLICIES_TIMEOUT_S,
                security=settings.zk_security,
            ) as store:
                async with asyncio.timeout(POLICIES_TIMEOUT_S):
                    await read_namespaces(store, out, ReadLimits(16))
            await asyncio.sleep(0)  # the closed session's tasks end while still quiet
    except Exception:  # the extract reads them again; its failure refuses the run
        return None
    known = {settings.cluster, *(c.name for c in settings.shared_clusters)}
    replicated = {
        row["namespace"]: others
        for _, row in out
        if (others := sorted(set(row["replication_clusters"] or ()) - known))
    }
    return replication_text(replicated)


def replication_text(replicated: dict[str, list[str]]) -> str | None:
    """The pre-flight's and the report's warning: namespaces replicating to clusters that
    are neither ours nor declared (`{namespace: [clusters]}`)."""
    if not replicated:
        return None
    namespaces = ", ".join(sorted(replicated))
    clusters = ", ".join(sorted({c for cs in replicated.values() for c in cs}))
    return (
        f"namespaces {namespaces} replicate to {clusters}: if these share our BookKeeper, "
        "declare them with --shared-cluster"
    )
