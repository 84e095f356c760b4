"""The devstack broker's TLS and authentication, seen by the real `pulsar-client`: token and
OAuth2 client credentials over `pulsar+ssl`, a client certificate, and the refusals (no or
bad credential, an untrusted CA, a certificate for another host) that a real broker and the
client's TLS checks give."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from devstack.pulsar import PulsarBrokerProcess
from devstack.pulsar.process import OAUTH2_AUDIENCE
from devstack.pulsar.security import SecureFiles, make_ca

TOPIC = "persistent://public/default/secured"


@pytest.fixture
def clients() -> Iterator[list[pulsar.Client]]:
    made: list[pulsar.Client] = []
    yield made
    for client in made:
        client.close()


def _client(
    made: list[pulsar.Client],
    broker: PulsarBrokerProcess,
    authentication: pulsar.Authentication | None,
    *,
    trust: Path | None = None,
    verify_hostname: bool = True,
    url: str | None = None,
    **options: object,
) -> pulsar.Client:
    assert broker.secure is not None
    client = pulsar.Client(
        url or broker.service_url,
        authentication=authentication,
        tls_trust_certs_file_path=str(trust or broker.secure.ca),
        tls_validate_hostname=verify_hostname,
        operation_timeout_seconds=3,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        **options,
    )
    made.append(client)
    return client


def _round_trip(client: pulsar.Client, payload: bytes) -> bytes:
    consumer = client.subscribe(TOPIC, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(TOPIC)
    producer.send(payload)
    message = consumer.receive(timeout_millis=10_000)
    consumer.acknowledge(message)
    return bytes(message.data())


def _token(broker: PulsarBrokerProcess) -> pulsar.Authentication:
    assert broker.secure is not None
    return pulsar.AuthenticationToken(broker.secure.token.read_text().strip())


def _oauth2(broker: PulsarBrokerProcess, credentials: Path | None = None) -> pulsar.Authentication:
    assert broker.secure is not None
    params = {
        "issuer_url": broker.issuer_url,
        "private_key": str(credentials or broker.secure.oauth2_credentials),
        "audience": OAUTH2_AUDIENCE,
    }
    return pulsar.AuthenticationOauth2(json.dumps(params))


def test_urls_name_tls(secure: PulsarBrokerProcess) -> None:
    assert (secure.service_url[:13], secure.admin_url[:8], (secure.issuer_url or "")[:8]) == (
        "pulsar+ssl://",
        "https://",
        "https://",
    )


def test_token_over_tls(secure: PulsarBrokerProcess, clients: list[pulsar.Client]) -> None:
    assert _round_trip(_client(clients, secure, _token(secure)), b"token") == b"token"


def test_oauth2_client_credentials_over_tls(
    secure: PulsarBrokerProcess, clients: list[pulsar.Client]
) -> None:
    """The client discovers the issuer's token endpoint, gets an access token by the
    client_credentials grant and sends it on CONNECT; the broker checks its RS256 signature."""
    assert _round_trip(_client(clients, secure, _oauth2(secure)), b"oauth2") == b"oauth2"


def test_client_certificate_authenticates(
    secure: PulsarBrokerProcess, clients: list[pulsar.Client]
) -> None:
    """AuthenticationTLS: the role is the common name of the verified client certificate."""
    files = secure.secure
    assert files is not None
    auth = pulsar.AuthenticationTLS(str(files.client_cert), str(files.client_key))
    client = _client(
        clients,
        secure,
        auth,
        tls_certificate_file_path=str(files.client_cert),
        tls_private_key_file_path=str(files.client_key),
    )
    assert _round_trip(client, b"mtls") == b"mtls"


@pytest.mark.parametrize("credential", ["none", "forged token", "wrong secret"])
def test_a_missing_or_bad_credential_is_refused(
    secure: PulsarBrokerProcess, clients: list[pulsar.Client], tmp_path: Path, credential: str
) -> None:
    """The broker answers CONNECT with ERROR AuthenticationError and closes: nothing is
    produced, and the broker says why in its log."""
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"client_id": "tombstone", "client_secret": "not-it"}))
    auth = {
        "none": None,
        "forged token": pulsar.AuthenticationToken("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"),
        "wrong secret": _oauth2(secure, wrong),
    }[credential]
    client = _client(clients, secure, auth)
    with pytest.raises(pulsar.PulsarException):
        client.create_producer(TOPIC)
    if credential != "wrong secret":  # the issuer refused: the client never connected
        assert "refusing CONNECT" in secure.log_text()


def test_an_untrusted_ca_is_refused(
    secure: PulsarBrokerProcess, clients: list[pulsar.Client], tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(make_ca("another CA")[0])
    client = _client(clients, secure, _token(secure), trust=other_ca)
    with pytest.raises(pulsar.PulsarException):
        client.create_producer(TOPIC)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarBrokerProcess]:
    """A secured broker whose certificate names only another host."""
    directory = tmp_path_factory.mktemp("elsewhere") / "security"
    SecureFiles.create(directory, ("elsewhere.invalid",))
    with PulsarBrokerProcess(secure_dir=directory) as broker:
        yield broker


def test_a_certificate_for_another_host_is_refused_when_verifying(
    elsewhere: PulsarBrokerProcess, clients: list[pulsar.Client]
) -> None:
    client = _client(clients, elsewhere, _token(elsewhere))
    with pytest.raises(pulsar.PulsarException):
        client.create_producer(TOPIC)


def test_without_hostname_verification_the_ca_alone_decides(
    elsewhere: PulsarBrokerProcess, clients: list[pulsar.Client]
) -> None:
    client = _client(clients, elsewhere, _token(elsewhere), verify_hostname=False)
    assert _round_trip(client, b"ca only") == b"ca only"


def _admin_status(broker: PulsarBrokerProcess, token: str | None) -> int:
    assert broker.secure is not None
    request = urllib.request.Request(f"{broker.admin_url}/admin/v2/clusters")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=str(broker.secure.ca))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _issued_token(
    broker: PulsarBrokerProcess, secret: str | None = None
) -> tuple[int, dict[str, Any]]:
    assert broker.secure is not None
    credentials = json.loads(broker.secure.oauth2_credentials.read_text())
    context = ssl.create_default_context(cafile=str(broker.secure.ca))
    discovery = f"{broker.issuer_url}/.well-known/openid-configuration"
    with urllib.request.urlopen(discovery, timeout=10, context=context) as response:
        endpoint = json.loads(response.read())["token_endpoint"]
    form = {
        "grant_type": "client_credentials",
        "client_id": credentials["client_id"],
        "client_secret": secret or credentials["client_secret"],
        "audience": OAUTH2_AUDIENCE,
    }
    data = urllib.parse.urlencode(form).encode()
    try:
        with urllib.request.urlopen(endpoint, data=data, timeout=10, context=context) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_admin_api_needs_a_credential(secure: PulsarBrokerProcess) -> None:
    assert secure.secure is not None
    status, answer = _issued_token(secure)
    statuses = (
        _admin_status(secure, None),
        _admin_status(secure, "not.a.token"),
        _admin_status(secure, secure.secure.token.read_text().strip()),
        _admin_status(secure, answer["access_token"]),
    )
    assert (status, statuses) == (200, (401, 401, 200, 200))


def test_issuer_refuses_a_wrong_secret(secure: PulsarBrokerProcess) -> None:
    assert _issued_token(secure, secret="wrong") == (401, {"error": "invalid_client"})
