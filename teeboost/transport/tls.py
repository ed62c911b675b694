"""Certificates for mutual TLS between parties, made with pyca/cryptography (``teeboost certs``).

The real flow keeps every private key with its owner:
1. the federation's CA operator runs ``init_ca`` once (a CA is never replaced without
   ``force``: that would break every certificate it signed);
2. each party runs ``request_certificate``: its key never leaves its host, and it sends the
   CSR (and, over another channel, the printed public-key fingerprint) to the CA operator;
3. the CA operator runs ``sign_request``, which names the party (CN and a DNS SAN, which
   clients check with a target name override, so parties can sit behind any address).
``create_federation_certs`` does all three in one directory, for local demos only: whoever
holds that directory can pose as any party.

Private keys are created afresh with ``O_EXCL|O_NOFOLLOW`` and mode 0600: never written
through a symlink or into an existing file, whose looser mode would be kept.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import ConfigError

__all__ = ["create_federation_certs", "init_ca", "request_certificate", "sign_request", "TlsFiles",
           "party_name_ok", "certificate_fingerprint", "public_key_fingerprint", "write_new_file",
           "CA_NAME"]

CA_NAME = "teeboost federation CA"


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


def certificate_fingerprint(cert: bytes | x509.Certificate) -> str:
    """``sha256:<hex>`` of a certificate's DER encoding (PEM or DER or parsed accepted)."""
    if not isinstance(cert, x509.Certificate):
        cert = x509.load_pem_x509_certificate(cert) if cert.lstrip().startswith(b"-----") \
            else x509.load_der_x509_certificate(cert)
    return "sha256:" + cert.fingerprint(hashes.SHA256()).hex()


def public_key_fingerprint(public_key) -> str:
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashes.Hash(hashes.SHA256())
    digest.update(der)
    return "sha256:" + digest.finalize().hex()


def write_new_file(path: Path, data: bytes, *, private: bool, force: bool = False, what: str = "file") -> None:
    """Create ``path`` afresh (O_EXCL|O_NOFOLLOW); an existing file or symlink is an error
    unless ``force``, which removes it first so its mode or target is never reused. Private
    files get mode 0600 whatever the umask."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not force:
            raise ConfigError(f"{path} already exists; refusing to replace the {what} (use --force if you really "
                              "mean to)")
        path.unlink()
    mode = stat.S_IRUSR | stat.S_IWUSR if private else 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        raise ConfigError(f"{path} appeared while it was being written; not replacing it") from None
    except OSError as exc:
        raise ConfigError(f"cannot create {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "teeboost federation"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


_RESERVED = ("ca", "localhost")


def _check_party(name: str) -> None:
    if not party_name_ok(name):
        raise ConfigError(f"party name {name!r} may use letters, digits, '-', '_' and '.' only (at most 63)")
    try:
        ipaddress.ip_address(name)
        reserved = True
    except ValueError:
        reserved = name.lower() in _RESERVED
    if reserved:
        raise ConfigError(f"party name {name!r} is reserved (the CA's files, loopback names and IP addresses)")


def init_ca(out_dir: str | Path, *, days: int = 3650, force: bool = False,
            ca_name: str = CA_NAME) -> tuple[Path, Path]:
    """The federation's CA: ``ca.pem`` (give to every party) and ``ca.key`` (keep offline)."""
    out = Path(out_dir)
    cert_path, key_path = out / "ca.pem", out / "ca.key"
    for path in (cert_path, key_path):
        if (path.exists() or path.is_symlink()) and not force:
            raise ConfigError(f"{path} already exists: a new CA would invalidate every certificate the old one "
                              "signed. Use --force only if you mean to re-issue every party's certificate")
    now = dt.datetime.now(dt.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name)).issuer_name(_name(ca_name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    write_new_file(key_path, _key_pem(key), private=True, force=force, what="CA key")
    write_new_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False, force=force,
                   what="CA certificate")
    return cert_path, key_path


def request_certificate(party: str, out_dir: str | Path, *, force: bool = False) -> tuple[Path, Path, str]:
    """This party's key (stays here, 0600) and a certificate signing request for the CA.
    Returns (key file, CSR file, public-key fingerprint to confirm with the CA operator)."""
    _check_party(party)
    out = Path(out_dir)
    key_path, csr_path = out / f"{party}.key", out / f"{party}.csr"
    if (key_path.exists() or key_path.is_symlink()) and not force:
        raise ConfigError(f"{key_path} already exists; refusing to replace this party's key (use --force to "
                          "re-key, then have the CA sign the new request)")
    key = ec.generate_private_key(ec.SECP256R1())
    csr = x509.CertificateSigningRequestBuilder().subject_name(_name(party)).sign(key, hashes.SHA256())
    write_new_file(key_path, _key_pem(key), private=True, force=force, what="private key")
    write_new_file(csr_path, csr.public_bytes(serialization.Encoding.PEM), private=False, force=True,
                   what="signing request")
    return key_path, csr_path, public_key_fingerprint(key.public_key())


def _load_ca(ca_dir: Path):
    try:
        ca_cert = x509.load_pem_x509_certificate((ca_dir / "ca.pem").read_bytes())
        ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), password=None)
    except FileNotFoundError as exc:
        raise ConfigError(f"{exc.filename} not found: run 'teeboost certs init-ca --out {ca_dir}' first") from None
    except ValueError as exc:
        raise ConfigError(f"{ca_dir}: ca.pem or ca.key is not a PEM certificate/key: {exc}") from None
    if ca_cert.public_key().public_numbers() != ca_key.public_key().public_numbers():
        raise ConfigError(f"{ca_dir}: ca.key is not the key of ca.pem")
    return ca_cert, ca_key


def _party_certificate(ca_cert, ca_key, party: str, public_key, days: int, dns: list[str],
                       ips: list[str]) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc)
    names: list[x509.GeneralName] = [x509.DNSName(party)] + [x509.DNSName(d) for d in dns if d != party]
    try:
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    except ValueError as exc:
        raise ConfigError(f"not an IP address: {exc}") from None
    return (
        x509.CertificateBuilder()
        .subject_name(_name(party)).issuer_name(ca_cert.subject)
        .public_key(public_key).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def sign_request(ca_dir: str | Path, csr_file: str | Path, out: str | Path | None = None, *, days: int = 365,
                 dns: list[str] | None = None, ips: list[str] | None = None,
                 force: bool = False) -> tuple[str, str, str]:
    """The CA signs a party's CSR. The CA decides what the certificate says: the party name
    from the request (checked), plus any extra names given here; nothing else is copied. The
    certificate goes to ``out`` (default: ``<party>.pem`` beside the request), never over the
    CA's own files. Returns (party, public-key fingerprint, certificate fingerprint, path)."""
    ca_cert, ca_key = _load_ca(Path(ca_dir))
    try:
        csr = x509.load_pem_x509_csr(Path(csr_file).read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{csr_file}: signing request not found") from None
    except ValueError as exc:
        raise ConfigError(f"{csr_file}: not a PEM certificate signing request ({exc})") from None
    if not csr.is_signature_valid:
        raise ConfigError(f"{csr_file}: the request's signature does not verify (corrupted or tampered)")
    names = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(names) != 1:
        raise ConfigError(f"{csr_file}: the request must name exactly one party (common name)")
    party = str(names[0].value)
    _check_party(party)
    if not isinstance(csr.public_key(), ec.EllipticCurvePublicKey):
        raise ConfigError(f"{csr_file}: only EC keys are signed (make the request with 'teeboost certs request')")
    out = Path(csr_file).parent / f"{party}.pem" if out is None else Path(out)
    ca_files = {(Path(ca_dir) / name).resolve() for name in ("ca.pem", "ca.key")}
    if out.resolve() in ca_files:
        raise ConfigError(f"{out} is one of the CA's own files; write the party's certificate elsewhere")
    cert = _party_certificate(ca_cert, ca_key, party, csr.public_key(), days, dns or [], ips or [])
    write_new_file(out, cert.public_bytes(serialization.Encoding.PEM), private=False, force=force,
                   what="certificate")
    return party, public_key_fingerprint(csr.public_key()), certificate_fingerprint(cert), out


def create_federation_certs(out_dir: str | Path, parties: list[str], *, days: int = 365,
                            force: bool = False) -> dict[str, TlsFiles]:
    """LOCAL DEMOS ONLY: a CA and every party's key and certificate in one directory, so
    whoever holds it can pose as any party. Real federations use init_ca / request / sign."""
    out = Path(out_dir)
    if not parties or len(set(parties)) != len(parties):
        raise ConfigError("give distinct party names")
    for party in parties:
        _check_party(party)
    if force:
        for party in parties:
            for suffix in (".key", ".pem"):
                (out / f"{party}{suffix}").unlink(missing_ok=True)
    ca_path, _ = init_ca(out, days=days, force=force)
    ca_cert, ca_key = _load_ca(out)
    files = {}
    for party in parties:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _party_certificate(ca_cert, ca_key, party, key.public_key(), days, ["localhost"], ["127.0.0.1"])
        cert_path, key_path = out / f"{party}.pem", out / f"{party}.key"
        write_new_file(key_path, _key_pem(key), private=True, what="private key")
        write_new_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False, what="certificate")
        files[party] = TlsFiles(ca_path, cert_path, key_path)
    return files


def peer_certificate_fingerprint(address: str, name: str, tls: TlsFiles, *, timeout: float = 10.0) -> str:
    """Fingerprint of the certificate a peer presents at ``address``, from a mutual-TLS
    handshake that checks it against the federation CA and the peer's party name."""
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(tls.ca))
    context.load_cert_chain(str(tls.cert), str(tls.key))
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
            with context.wrap_socket(sock, server_hostname=name) as secured:
                return certificate_fingerprint(secured.getpeercert(binary_form=True))
    except ssl.SSLError as exc:
        raise ConfigError(f"{name} at {address}: TLS handshake failed ({exc.reason or exc})") from None
