"""Certificates for mutual TLS between parties: a small federation CA and one certificate
per party, made with pyca/cryptography (``teeboost certs``).

Each party certificate names the party (CN and a DNS SAN, which clients check with a target
name override, so parties can sit behind any address) plus the loopback names for local runs.
A peer without a certificate from the federation's CA cannot connect.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import ConfigError

__all__ = ["create_federation_certs", "TlsFiles", "party_name_ok"]


def party_name_ok(name: str) -> bool:
    return bool(name) and all(c.isalnum() or c in "-_." for c in name) and len(name) <= 63


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes, bytes]:
        try:
            return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from None


def _write(path: Path, data: bytes, private: bool = False) -> None:
    if private:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "teeboost federation"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def create_federation_certs(out_dir: str | Path, parties: list[str], *, days: int = 365,
                            ca_name: str = "teeboost federation CA") -> dict[str, TlsFiles]:
    """CA key/certificate and one key/certificate per party (ECDSA P-256, SHA-256)."""
    out = Path(out_dir)
    if not parties or len(set(parties)) != len(parties):
        raise ConfigError("give distinct party names")
    for party in parties:
        if not party_name_ok(party):
            raise ConfigError(f"party name {party!r} may use letters, digits, '-', '_' and '.' only")
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name)).issuer_name(_name(ca_name))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = out / "ca.pem"
    _write(ca_path, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(out / "ca.key", ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), private=True)
    files = {}
    for party in parties:
        key = ec.generate_private_key(ec.SECP256R1())
        san = x509.SubjectAlternativeName([
            x509.DNSName(party), x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ])
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(party)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        cert_path, key_path = out / f"{party}.pem", out / f"{party}.key"
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()), private=True)
        files[party] = TlsFiles(ca_path, cert_path, key_path)
    return files
