"""TLS with a certificate made in the test, and optional client certificates."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from devstack.fake_verifier import verify_request
from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig, TlsServerConfig
from services.core.errors import Unavailable
from services.core.grpc_server import ServiceRunner
from tests.core.conftest import grpc_config, start_service
from tombstone.v1 import verifier_pb2_grpc


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


Key = ec.EllipticCurvePrivateKey


def _issue(subject: str, key: Key, issuer: tuple[x509.Name, Key] | None) -> x509.Certificate:
    """A CA certificate when `issuer` is None, else a leaf for localhost/127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(directory: Path, name: str, cert: x509.Certificate, key: Key) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, and a server and a client certificate it signed."""
    directory = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _issue("tombstone-test-ca", ca_key, None)
    ca, _ = _write(directory, "ca", ca_cert, ca_key)
    pairs = []
    for name in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        pairs.append(_write(directory, name, _issue(name, key, (ca_cert.subject, ca_key)), key))
    return Pki(ca, *pairs[0], *pairs[1])


async def _tls_runner(pki: Pki, *, require_client_cert: bool) -> AsyncIterator[ServiceRunner]:
    tls = TlsServerConfig(pki.server_cert, pki.server_key, pki.ca, require_client_cert)
    runner, _ = await start_service(dataclasses.replace(grpc_config(), tls=tls))
    try:
        yield runner
    finally:
        await runner.shutdown()


@pytest.fixture
async def tls_runner(pki: Pki) -> AsyncIterator[ServiceRunner]:
    async for runner in _tls_runner(pki, require_client_cert=False):
        yield runner


@pytest.fixture
async def mtls_runner(pki: Pki) -> AsyncIterator[ServiceRunner]:
    async for runner in _tls_runner(pki, require_client_cert=True):
        yield runner


async def verify(config: ClientConfig) -> str:
    async with open_channel(config) as channel:
        with rpc_errors("verifier"):
            response = await verifier_pb2_grpc.VerifierStub(channel).Verify(verify_request(4))
    return str(response.reason)


async def test_tls_call_succeeds_with_the_ca(pki: Pki, tls_runner: ServiceRunner) -> None:
    """A client trusting the CA talks to the TLS server."""
    config = ClientConfig(address=f"localhost:{tls_runner.port}", tls_ca_file=pki.ca)
    assert await verify(config) == "ledger 4"


async def test_plaintext_client_cannot_talk_to_tls(tls_runner: ServiceRunner) -> None:
    """A plaintext client fails with Unavailable against a TLS server."""
    with pytest.raises(Unavailable):
        await verify(ClientConfig(address=f"localhost:{tls_runner.port}"))


async def test_required_client_cert_is_enforced(pki: Pki, mtls_runner: ServiceRunner) -> None:
    """With client certificates required, a client without one is refused."""
    with pytest.raises(Unavailable):
        await verify(ClientConfig(address=f"localhost:{mtls_runner.port}", tls_ca_file=pki.ca))


async def test_client_cert_is_accepted(pki: Pki, mtls_runner: ServiceRunner) -> None:
    """A client presenting a certificate signed by the client CA is served."""
    config = ClientConfig(
        address=f"localhost:{mtls_runner.port}",
        tls_ca_file=pki.ca,
        tls_cert_file=pki.client_cert,
        tls_key_file=pki.client_key,
    )
    assert await verify(config) == "ledger 4"
