"""Certificates for serving admission over TLS, made with `cryptography`.

A self-signed CA (ECDSA P-256, `BasicConstraints(ca=True, path_length=0)`, key-cert-sign + CRL-sign) issues a
serving certificate whose subject alternative names cover what the apiserver dials: `S`, `S.N`, `S.N.svc`,
`S.N.svc.cluster.local` for Service `S` in namespace `N`, plus `localhost` and `127.0.0.1` (the dev cluster
calls the webhook by URL). Names are SANs, never just the CN: Go ≥ 1.15 ignores the CN.

Files are written atomically (temp file, then rename) so a reloading server never reads half a certificate;
private keys are mode 0600. Rotating only the leaf (`reuse_ca`) keeps `caBundle` valid.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT: Final = "ca.crt"
CA_KEY: Final = "ca.key"
TLS_CERT: Final = "tls.crt"
TLS_KEY: Final = "tls.key"
SKEW: Final = dt.timedelta(minutes=5)  # tolerate clocks slightly behind ours

PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True)
class CertBundle:
    """PEM bytes of a CA and of a serving certificate it signed."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def service_hosts(service: str, namespace: str, extra: Sequence[str] = ()) -> list[str]:
    """The names the apiserver may use for Service `service` in `namespace`, plus loopback and `extra`."""
    names = [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]
    return list(dict.fromkeys([*names, "localhost", "127.0.0.1", *extra]))


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _usage(**enabled: bool) -> x509.KeyUsage:
    flags = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
             "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
    return x509.KeyUsage(**{flag: enabled.get(flag, False) for flag in flags})


def _builder(subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey, days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def generate_ca(common_name: str = "lapilli-webhook-ca", days: int = 3650) -> tuple[bytes, bytes]:
    """A self-signed CA: (cert PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = _usage(key_cert_sign=True, crl_sign=True)
    cert = (
        _builder(common_name, name, key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _issue(
    ca_cert: bytes, ca_key: bytes, common_name: str, usage: x509.ObjectIdentifier, hosts: Sequence[str], days: int,
) -> tuple[bytes, bytes]:
    issuer = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    if not isinstance(signer, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an ECDSA key made by `lapilli certs generate`")
    key = ec.generate_private_key(ec.SECP256R1())
    aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key())
    builder = _builder(common_name, issuer.subject, key.public_key(), days)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    cert = (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(digital_signature=True, key_encipherment=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(aki, critical=False)
        .sign(signer, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving_cert(ca_cert: bytes, ca_key: bytes, hosts: Sequence[str], days: int = 365) -> tuple[bytes, bytes]:
    """A serving certificate for `hosts` (SANs; the first is also the CN) signed by the CA: (cert PEM, key PEM)."""
    return _issue(ca_cert, ca_key, hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, hosts, days)


def issue_client_cert(ca_cert: bytes, ca_key: bytes, common_name: str, days: int = 365) -> tuple[bytes, bytes]:
    """A client certificate (CN `common_name`, client-auth usage) signed by the CA: (cert PEM, key PEM) — what
    kube-scheduler presents to a TLS extender that verifies clients."""
    return _issue(ca_cert, ca_key, common_name, ExtendedKeyUsageOID.CLIENT_AUTH, (), days)


def generate(hosts: Sequence[str], *, ca: tuple[bytes, bytes] | None = None, days: int = 365) -> CertBundle:
    """A serving certificate for `hosts`, signed by `ca` (cert, key) or by a new CA."""
    ca_cert, ca_key = ca or generate_ca()
    cert, key = issue_serving_cert(ca_cert, ca_key, hosts, days)
    return CertBundle(ca_cert, ca_key, cert, key)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def read_ca(directory: Path) -> tuple[bytes, bytes] | None:
    """The CA in `directory` (`ca.crt`, `ca.key`), if both files are there."""
    cert, key = directory / CA_CERT, directory / CA_KEY
    return (cert.read_bytes(), key.read_bytes()) if cert.is_file() and key.is_file() else None


def write_bundle(bundle: CertBundle, directory: Path) -> dict[str, Path]:
    """Write ca.crt, ca.key, tls.crt, tls.key; the key is written before the certificate it belongs to."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {CA_CERT: (bundle.ca_cert, 0o644), CA_KEY: (bundle.ca_key, 0o600)}
    files |= {TLS_KEY: (bundle.key, 0o600), TLS_CERT: (bundle.cert, 0o644)}
    for name, (data, mode) in files.items():
        _write_atomic(directory / name, data, mode)
    return {name: directory / name for name in files}
