"""TLS and authentication of the devstack broker: a test CA made at start, the broker's
certificate, the token keys, and the files a client needs (CA, token, OAuth2 credentials).

`SecureFiles.create(directory)` writes everything once; the broker (`BrokerSecurity`) and the
issuer read the same directory, so a test, the demo or a service only needs its path.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import secrets
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from . import jwt

DEFAULT_HOSTNAMES = ("localhost", "127.0.0.1")
CLIENT_ID = "tombstone"
"""The OAuth2 client registered with the issuer, and the role of the static token."""


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hostnames: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hostnames:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def make_ca(common_name: str = "Tombstone devstack test CA") -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem(key)


def issue_certificate(
    ca_cert: bytes, ca_key: bytes, common_name: str, hostnames: tuple[str, ...] = ()
) -> tuple[bytes, bytes]:
    """A leaf certificate signed by the CA, naming `hostnames`: (certificate PEM, key PEM)."""
    issuer = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    assert isinstance(signer, rsa.RSAPrivateKey)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if hostnames:
        builder = builder.add_extension(_san(hostnames), critical=False)
    cert = builder.sign(signer, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _pem(key)


@dataclass(frozen=True)
class SecureFiles:
    """The files of one secured devstack, all under `directory`."""

    directory: Path

    @property
    def ca(self) -> Path:
        """The test CA certificate: the clients' trust file."""
        return self.directory / "ca.pem"

    @property
    def broker_cert(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def broker_key(self) -> Path:
        return self.directory / "broker.key"

    @property
    def client_cert(self) -> Path:
        """A client certificate (CN = `CLIENT_ID`) for mutual TLS."""
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    @property
    def token_private_key(self) -> Path:
        """Signs the static token and the issuer's access tokens (RS256)."""
        return self.directory / "token-private.pem"

    @property
    def token_public_key(self) -> Path:
        """What the broker validates tokens with (Pulsar's `tokenPublicKey`)."""
        return self.directory / "token-public.pem"

    @property
    def token(self) -> Path:
        """A token for role `CLIENT_ID`, without expiry (`pulsar tokens create`)."""
        return self.directory / "tombstone.token"

    @property
    def oauth2_credentials(self) -> Path:
        """The OAuth2 credentials file (`client_id`, `client_secret`) of `CLIENT_ID`."""
        return self.directory / "oauth2-credentials.json"

    @property
    def issuer_clients(self) -> Path:
        """The issuer's registered clients: JSON {client_id: client_secret}."""
        return self.directory / "issuer-clients.json"

    @classmethod
    def create(cls, directory: Path, hostnames: tuple[str, ...] = DEFAULT_HOSTNAMES) -> SecureFiles:
        """Write a fresh CA, certificates, keys, token and credentials (kept if present)."""
        files = cls(directory)
        if files.ca.exists():
            return files
        directory.mkdir(parents=True, exist_ok=True)
        ca_cert, ca_key = make_ca()
        broker_cert, broker_key = issue_certificate(ca_cert, ca_key, hostnames[0], hostnames)
        client_cert, client_key = issue_certificate(ca_cert, ca_key, CLIENT_ID)
        signing = _key()
        public = signing.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        secret = secrets.token_urlsafe(24)
        for path, data in (
            (files.broker_cert, broker_cert),
            (files.broker_key, broker_key),
            (files.client_cert, client_cert),
            (files.client_key, client_key),
            (files.token_private_key, _pem(signing)),
            (files.token_public_key, public),
        ):
            path.write_bytes(data)
            path.chmod(0o600)
        files.token.write_text(jwt.encode({"sub": CLIENT_ID}, private_key=_pem(signing)))
        files.oauth2_credentials.write_text(
            json.dumps({"client_id": CLIENT_ID, "client_secret": secret})
        )
        files.issuer_clients.write_text(json.dumps({CLIENT_ID: secret}))
        files.ca.write_bytes(ca_cert)  # last: its presence means the set is complete
        return files


@dataclass(frozen=True)
class BrokerSecurity:
    """TLS on both listeners (and the issuer), and who may connect."""

    cert_file: Path
    key_file: Path
    ca_file: Path
    """Trusted for client certificates (mutual TLS, `tls` authentication)."""
    authenticate: bool = True
    """Refuse a CONNECT or an admin call without a valid credential."""
    token_secret_key: bytes | None = field(default=None, repr=False)
    """HS256 key (Pulsar's `tokenSecretKey`)."""
    token_public_key: bytes | None = None
    """RS256 key, PEM (Pulsar's `tokenPublicKey`); the issuer's tokens verify with it."""
    issuer_signing_key: Path | None = None
    """When set, the broker also runs the OAuth2 issuer, signing with this PEM key."""
    issuer_clients: Path | None = None
    issuer_token_lifetime: float = 3600.0
    """Seconds an issued access token lives (`expires_in`)."""

    @classmethod
    def from_files(
        cls, files: SecureFiles, *, authenticate: bool = True, token_lifetime: float = 3600.0
    ) -> BrokerSecurity:
        return cls(
            cert_file=files.broker_cert,
            key_file=files.broker_key,
            ca_file=files.ca,
            authenticate=authenticate,
            token_public_key=files.token_public_key.read_bytes(),
            issuer_signing_key=files.token_private_key,
            issuer_clients=files.issuer_clients,
            issuer_token_lifetime=token_lifetime,
        )

    def server_context(self) -> ssl.SSLContext:
        """The listeners' TLS: our certificate; a client certificate is asked for, not needed."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.ca_file))
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def role_of_token(self, token: str) -> str:
        """The role (`sub`) of a valid token; `jwt.InvalidToken` otherwise."""
        claims = jwt.decode(
            token.strip(), secret=self.token_secret_key, public_key=self.token_public_key
        )
        return str(claims["sub"])
