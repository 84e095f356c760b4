"""Where an offload record's objects live: its endpoint and region, checked and canonical.

Pulsar writes each ledger's offload location into its offload context (`driverMetadata`:
`bucket`, `region`, `serviceEndpoint`, or `endpoint` before 2.7), from the namespace's offload
policies, so one cluster's ledgers can sit behind several endpoints and regions. No aiobotocore
here: the ports and policies of the services import this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.config import S3Config, canonical_endpoint, check_region


@dataclass(frozen=True)
class S3Location:
    """Where requests for one offload record go: a canonical endpoint (None: AWS, where the
    region picks the host) and the region requests are signed for."""

    endpoint: str | None
    region: str

    def describe(self) -> str:
        return f"{self.endpoint or 'AWS'} ({self.region})"


class LocationRefused(ValueError):
    """An offload record names an endpoint or region that is not well-formed."""


class EndpointNotAllowed(LocationRefused):
    """An offload record names an endpoint off the allow-list."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(f"endpoint {endpoint!r} is not allowed")
        self.endpoint = endpoint


class TooManyLocations(RuntimeError):
    """A new location beyond the bound of open clients (`S3Clients`): retried later."""


def default_location(config: S3Config) -> S3Location:
    """The configured endpoint and region: where records naming none of their own live."""
    return S3Location(config.default_endpoint, config.region)


def resolve_location(
    endpoint: str | None,
    region: str | None,
    *,
    default: S3Location,
    allowed_endpoints: frozenset[str],
) -> S3Location:
    """The location a record's endpoint and region (either may be empty) name.

    An empty endpoint is the configured one; an empty region, the configured region. A named
    endpoint must be on the allow-list once canonical (`EndpointNotAllowed`): the credentials
    are the configured ones, and they go to no host the operator did not name. A malformed
    endpoint or region is `LocationRefused`.
    """
    where = default.endpoint
    if endpoint:
        try:
            where = canonical_endpoint(endpoint)
        except ValueError as exc:
            raise LocationRefused(f"endpoint {endpoint!r}: {exc}") from exc
        if where != default.endpoint and where not in allowed_endpoints:
            raise EndpointNotAllowed(where)
    try:
        signed_for = check_region(region) if region else default.region
    except ValueError as exc:
        raise LocationRefused(f"region: {exc}") from exc
    return S3Location(where, signed_for)


UNCONFIGURED = S3Location(None, S3Config().region)
"""The location of an `S3Config` with nothing set: AWS, the default region."""
