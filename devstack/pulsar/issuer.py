"""A small OAuth2 issuer for the devstack: OpenID discovery and the `client_credentials`
grant, issuing RS256 access tokens that the broker's token provider trusts (as a real Pulsar
broker validates an identity provider's tokens with `tokenPublicKey`).

`GET /.well-known/openid-configuration` names the token endpoint; `POST /oauth/token` takes
the form Pulsar's `ClientCredentialFlow` sends (`grant_type`, `client_id`, `client_secret`,
`audience`, `scope`) and answers `access_token`, `token_type`, `expires_in`; unknown
credentials get 401 `invalid_client` (RFC 6749 §5.2).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from aiohttp import web

from . import jwt

TOKEN_PATH = "/oauth/token"
ISSUER_KEY: web.AppKey[Issuer] = web.AppKey("issuer")


class Issuer:
    def __init__(self, signing_key: Path, clients: Path, *, lifetime: float) -> None:
        self._signing_key = signing_key.read_bytes()
        self._clients: dict[str, str] = json.loads(clients.read_text(encoding="utf-8"))
        self.lifetime = lifetime
        self.issued = 0
        """Access tokens issued so far."""

    def grant(self, form: dict[str, str], issuer: str) -> web.Response:
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        client_id = form.get("client_id", "")
        secret = self._clients.get(client_id)
        if secret is None or form.get("client_secret") != secret:
            return web.json_response({"error": "invalid_client"}, status=401)
        now = int(time.time())
        claims: dict[str, object] = {
            "iss": issuer,
            "sub": client_id,
            "iat": now,
            "exp": now + int(self.lifetime),
        }
        if form.get("audience"):
            claims["aud"] = form["audience"]
        if form.get("scope"):
            claims["scope"] = form["scope"]
        self.issued += 1
        token = jwt.encode(claims, private_key=self._signing_key)
        return web.json_response(
            {"access_token": token, "token_type": "Bearer", "expires_in": int(self.lifetime)}
        )


def _base(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


async def discovery(request: web.Request) -> web.Response:
    base = _base(request)
    return web.json_response(
        {
            "issuer": base,
            "token_endpoint": base + TOKEN_PATH,
            "grant_types_supported": ["client_credentials"],
        }
    )


async def token(request: web.Request) -> web.Response:
    form = {key: str(value) for key, value in (await request.post()).items()}
    return request.app[ISSUER_KEY].grant(form, _base(request))


def make_issuer_app(issuer: Issuer) -> web.Application:
    app = web.Application()
    app[ISSUER_KEY] = issuer
    app.add_routes(
        [
            web.get("/.well-known/openid-configuration", discovery),
            web.post(TOKEN_PATH, token),
        ]
    )
    return app
