"""The admin client as the security settings say: the TLS context and the credentials of the
binary client (`PulsarSecurity`), and the failure counter every service exports."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client import Counter

from services.core.errors import PermissionDenied, StartupRefused, TombstoneError, Unavailable
from services.core.metrics import Metrics
from services.core.pulsar_security import PulsarSecurity
from services.systopic.admin import (
    ADMIN_CALLS,
    FAILURE_REASONS,
    AdminCredentials,
    BearerToken,
    PulsarAdmin,
)
from services.systopic.oauth2 import OAuth2TokenSource


def admin_failures(metrics: Metrics) -> Counter:
    """`tombstone_pulsar_admin_failures_total{call,reason}`, every series present from 0 so
    that the first failure already shows as an increase."""
    counter = metrics.counter(
        "pulsar_admin_failures",
        "Pulsar admin HTTP calls that failed, by call and reason (unavailable, unauthorized, "
        "other).",
        ["call", "reason"],
    )
    for call in ADMIN_CALLS:
        for reason in FAILURE_REASONS:
            counter.labels(call, reason)
    return counter


def admin_credentials(
    http: aiohttp.ClientSession, security: PulsarSecurity, *, timeout: float = 10
) -> AdminCredentials:
    """The bearer token of the configured plugin; none for `none` and `tls` (the client
    certificate travels in the TLS handshake)."""
    if security.auth_plugin == "oauth2":
        assert security.oauth2 is not None
        source = OAuth2TokenSource(
            http, security.oauth2, ssl_context=security.ssl_context(), timeout=timeout
        )
        return BearerToken(source.token, on_refused=source.invalidate)
    supplier = security.token_supplier()
    if supplier is None:
        return AdminCredentials()
    read = supplier

    async def token() -> str:
        # A token file is read off the loop: it may sit on a slow mount. Unreadable (being
        # rotated, unmounted) it is a call that could not be made, as for the binary client.
        try:
            return await asyncio.to_thread(read)
        except OSError as exc:
            raise Unavailable(f"cannot read {security.token_file}: {exc}") from exc

    return BearerToken(token)


def secured_admin(
    http: aiohttp.ClientSession,
    base_url: str,
    security: PulsarSecurity,
    *,
    failures: Counter | None = None,
    timeout: float = 10,
) -> PulsarAdmin:
    """A `PulsarAdmin` speaking TLS and authenticating as `security` says."""
    return PulsarAdmin(
        http,
        base_url,
        credentials=admin_credentials(http, security, timeout=timeout),
        ssl_context=security.ssl_context() if base_url.startswith("https://") else None,
        failures=failures,
        timeout=timeout,
    )


async def confirm_credentials(
    base_url: str,
    security: PulsarSecurity,
    topic: str,
    *,
    failures: Counter | None = None,
    timeout: float = 10,
) -> None:
    """At start, one admin call with the configured credentials: a refusal ends the start
    with a line naming the plugin (`StartupRefused`, exit 2) instead of the binary client's
    timeout, which cannot tell a refused credential from a silent broker. An admin API that
    does not answer proves nothing either way: the start goes on and the clients decide."""
    if security.auth_plugin == "none":
        return
    async with aiohttp.ClientSession() as http:
        admin = secured_admin(http, base_url, security, failures=failures, timeout=timeout)
        try:
            await admin.partitions(topic)
        except PermissionDenied as exc:
            raise StartupRefused(
                f"Pulsar refuses the credentials of TOMBSTONE_PULSAR_AUTH_PLUGIN="
                f"{security.auth_plugin} ({exc}); check them and the role's permissions"
            ) from exc
        except TombstoneError:
            return
