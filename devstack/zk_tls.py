"""Certificates for a devstack ZooKeeper's TLS port: a CA, a server certificate for
127.0.0.1/localhost and a client certificate, all PEM, made fresh in a folder.

ZooKeeper (3.5.5+) reads PEM key and trust stores itself (`ssl.keyStore.type=PEM`), so no
Java keystore tool is needed.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    """The CA certificate (trust store of both sides)."""
    server: Path
    """The server's key and certificate in one PEM (ZooKeeper's PEM key store)."""
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
    *,
    hosts: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if hosts:
        names: list[x509.GeneralName] = [x509.DNSName("localhost")]
        names += [x509.IPAddress(ipaddress.ip_address(h)) for h in hosts]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_tls_files(folder: Path, host: str = "127.0.0.1") -> TlsFiles:
    """A CA, a server certificate naming `host` and localhost, and a client certificate."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("tombstone-devstack-ca", ca_key, None)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _certificate("zookeeper", server_key, ("tombstone-devstack-ca", ca_key), hosts=(host,))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _certificate("tombstone", client_key, ("tombstone-devstack-ca", ca_key))
    files = TlsFiles(
        ca=folder / "ca.pem",
        server=folder / "server.pem",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
    )
    files.ca.write_bytes(_cert_pem(ca))
    files.server.write_bytes(_pem(server_key) + _cert_pem(server))
    files.client_cert.write_bytes(_cert_pem(client))
    files.client_key.write_bytes(_pem(client_key))
    return files
