"""TLS: listener options, the client certificate as identity, and a development CA.

A client certificate signed by the configured client CA authenticates its
holder: the subject's CN is the user, each O a group (as Kubernetes reads
them). ``make_ca`` and ``issue`` back ``shoal certs`` and ``shoal up``.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from shoal.machinery.files import write_atomically

Peer = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class Tls:
    """A listener's certificate and key; with ``client_ca``, clients may present certificates
    signed by it, and their identity reaches the app as ``scope["shoal.peer"]``."""

    cert: Path
    key: Path
    client_ca: Path | None = None


def peer_of(transport: asyncio.BaseTransport) -> Peer | None:
    """(CN, O...) of the verified client certificate of a connection, if it sent one."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    names: dict[str, list[str]] = {}
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            names.setdefault(key, []).append(value)
    common = names.get("commonName")
    if not common:
        return None
    return common[0], tuple(names.get("organizationName", ()))


class PeerAwareProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol that puts the client certificate's identity in the scope."""

    _peer: Peer | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = peer_of(transport)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._peer is not None:
            self.scope["shoal.peer"] = self._peer  # type: ignore[typeddict-unknown-key]


def tls_options(tls: Tls | None) -> dict[str, Any]:
    """Keyword arguments of ``uvicorn.Config`` for a TLS listener (none for plain HTTP)."""
    if tls is None:
        return {}
    options: dict[str, Any] = {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}
    if tls.client_ca is not None:
        options.update(
            ssl_ca_certs=str(tls.client_ca),
            ssl_cert_reqs=ssl.CERT_OPTIONAL,
            http=PeerAwareProtocol,
        )
    return options


# a development CA -------------------------------------------------------------------


def _name(common: str, groups: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    return x509.Name(attributes)


def _pem(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> tuple[bytes, bytes]:
    return (
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        cert.public_bytes(serialization.Encoding.PEM),
    )


def make_ca(common: str = "shoal-ca", days: int = 3650) -> tuple[bytes, bytes]:
    """A self-signed CA: (key PEM, certificate PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return _pem(key, cert)


def issue(
    ca_key_pem: bytes,
    ca_cert_pem: bytes,
    common: str,
    groups: tuple[str, ...] = (),
    hosts: tuple[str, ...] = (),
    days: int = 365,
) -> tuple[bytes, bytes]:
    """A certificate for a server (``hosts``) or a client (CN user, O groups), signed by the CA."""
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common, groups))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return _pem(key, builder.sign(ca_key, hashes.SHA256()))


def write_pair(directory: Path, name: str, pair: tuple[bytes, bytes]) -> tuple[Path, Path]:
    """Write ``name.key`` (mode 0600) and ``name.crt``; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    write_atomically(key_path, pair[0], private=True)
    write_atomically(cert_path, pair[1])
    return key_path, cert_path


def ca_hash(pem: bytes | str) -> str:
    """``sha256:<hex>`` of a CA certificate's public key (its SubjectPublicKeyInfo), as
    kubeadm's ``--discovery-token-ca-cert-hash``: what ``shoal join --ca-hash`` pins."""
    data = pem.encode() if isinstance(pem, str) else pem
    cert = x509.load_pem_x509_certificate(data)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashes.Hash(hashes.SHA256())
    digest.update(spki)
    return "sha256:" + digest.finalize().hex()
