"""OAuth2 client credentials for the admin HTTP calls, done the way Pulsar's client does them.

The binary client gets its access token itself (`AuthenticationOauth2`); the admin API is
plain HTTP, so here we do the same: find the token endpoint in the issuer's
`/.well-known/openid-configuration`, ask it for a token with the `client_credentials` grant
(client id and secret from the credentials file, plus audience and scope when set), keep the
token until shortly before it expires, then ask again. A failure is `Unavailable` (the issuer
is out, or answers nonsense), or `PermissionDenied` when the issuer refuses the credentials
(401/403, or `invalid_client`): never an unhandled error.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from services.core.errors import PermissionDenied, Unavailable
from services.core.pulsar_security import OAuth2Credentials

REFRESH_MARGIN = 30.0
"""Seconds before its expiry a token is replaced, so no call carries one that just expired."""
DEFAULT_LIFETIME = 300.0
"""Assumed lifetime of a token whose answer has no `expires_in`."""
_REFUSALS = frozenset({"invalid_client", "unauthorized_client", "access_denied", "invalid_grant"})


class OAuth2TokenSource:
    """Access tokens for one set of client credentials, cached until shortly before expiry."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        credentials: OAuth2Credentials,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10,
        clock: Callable[[], float] = time.monotonic,
        refresh_margin: float = REFRESH_MARGIN,
    ) -> None:
        self._session = session
        self._credentials = credentials
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._clock = clock
        self._margin = refresh_margin
        self._endpoint: str | None = None
        self._token: str | None = None
        self._valid_until = 0.0
        self._lock = asyncio.Lock()
        self.grants = 0
        """Tokens obtained so far (each a client_credentials grant)."""

    async def token(self) -> str:
        """A token valid for at least the refresh margin (one grant at a time)."""
        async with self._lock:
            if self._token is None or self._clock() >= self._valid_until:
                await self._refresh()
            assert self._token is not None
            return self._token

    def invalidate(self) -> None:
        """Forget the token (the server refused it): the next call asks for a new one."""
        self._token = None

    async def _refresh(self) -> None:
        endpoint = await self._token_endpoint()
        started = self._clock()
        form = {
            "grant_type": "client_credentials",
            "client_id": self._credentials.client_id,
            "client_secret": self._credentials.client_secret,
        }
        if self._credentials.audience:
            form["audience"] = self._credentials.audience
        if self._credentials.scope:
            form["scope"] = self._credentials.scope
        status, body = await self._request("POST", endpoint, data=form)
        error = body.get("error") if isinstance(body, dict) else None
        if status in (400, 401, 403) and (status != 400 or error in _REFUSALS):
            raise PermissionDenied(
                f"OAuth2 issuer refused client {self._client}: {error or status}"
            )
        token = body.get("access_token") if isinstance(body, dict) else None
        if status != 200 or not isinstance(token, str) or not token:
            raise Unavailable(f"OAuth2 token endpoint {endpoint}: HTTP {status}, no access_token")
        lifetime = _lifetime(body)
        self._token = token
        self._valid_until = started + max(lifetime - self._margin, lifetime / 2)
        self.grants += 1

    @property
    def _client(self) -> str:
        return self._credentials.client_id

    async def _token_endpoint(self) -> str:
        if self._endpoint is None:
            url = f"{self._credentials.issuer_url}/.well-known/openid-configuration"
            status, body = await self._request("GET", url)
            endpoint = body.get("token_endpoint") if isinstance(body, dict) else None
            if status != 200 or not isinstance(endpoint, str) or not endpoint:
                raise Unavailable(f"OAuth2 discovery {url}: HTTP {status}, no token_endpoint")
            self._endpoint = endpoint
        return self._endpoint

    async def _request(
        self, method: str, url: str, *, data: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        try:
            async with self._session.request(
                method, url, data=data, ssl=self._ssl, timeout=self._timeout
            ) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise Unavailable(f"OAuth2 {method} {url}: {exc!r}") from exc
        if status >= 500:
            raise Unavailable(f"OAuth2 {method} {url}: HTTP {status}")
        try:
            return status, json.loads(text) if text.strip() else None
        except ValueError:
            return status, None


def _lifetime(body: dict[str, Any]) -> float:
    expires_in = body.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
        return float(expires_in)
    return DEFAULT_LIFETIME
