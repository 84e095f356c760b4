"""BookKeeper delete through a bookie's HTTP admin API, for deployments whose metadata store
the deleter cannot reach: `DELETE /api/v1/ledger/delete?ledger_id=<id>`.

The bookie deletes with `Version.ANY`: the verified version cannot be enforced on this path.
The window between the verifier's read and this call is the price; prefer the ZooKeeper
backend wherever it is reachable.
"""

from __future__ import annotations

import aiohttp

from services.deleter.backends.limits import BackendLimits
from services.deleter.ports import DeleteFailed, DeleteResult, Tier


class BookieHttpDeleter:
    """`BookKeeperDeleter` over the bookie HTTP admin API."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        limits: BackendLimits,
        timeout: float = 10.0,
    ) -> None:
        self._session = session
        self._base_url = base_url.rstrip("/")
        self._limits = limits
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        url = f"{self._base_url}/api/v1/ledger/delete"
        try:
            async with (
                self._limits.operation(),
                self._session.delete(
                    url, params={"ledger_id": str(ledger_id)}, timeout=self._timeout
                ) as response,
            ):
                body = (await response.text())[:300]
                status = response.status
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise DeleteFailed(Tier.BOOKKEEPER, f"bookie HTTP {url}: {exc!r}") from exc
        if status == 200:
            return DeleteResult(
                Tier.BOOKKEEPER,
                True,
                {"bookie_url": self._base_url, "verified_version": version, "znode_path": path},
            )
        # 404 means a wrong URL or method here (the API answers 200 for a missing ledger);
        # 403 a refused call: neither heals by itself.
        permanent = status in (401, 403, 404, 405)
        raise DeleteFailed(
            Tier.BOOKKEEPER, f"bookie HTTP {status} from {url}: {body}", permanent=permanent
        )
