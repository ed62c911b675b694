"""Per-party keys: the CA signs requests; private keys stay with their party, mode 0600."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from teeboost.errors import ConfigError
from teeboost.transport.tls import create_federation_certs, init_ca, request_certificate, sign_request


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", "certs", *args], capture_output=True, text=True,
                          timeout=120)


def test_the_per_party_flow_keeps_each_key_with_its_party(tmp_path):
    ca_dir, bank, telco = tmp_path / "ca", tmp_path / "bank", tmp_path / "telco"
    result = cli("init-ca", "--out", str(ca_dir))
    assert result.returncode == 0, result.stderr
    assert mode(ca_dir / "ca.key") == 0o600
    for name, where in (("bank", bank), ("telco", telco)):
        result = cli("request", "--party", name, "--out", str(where))
        assert result.returncode == 0, result.stderr
        printed = result.stdout.split("sha256:")[1].split()[0]
        assert mode(where / f"{name}.key") == 0o600
        result = cli("sign", "--ca", str(ca_dir), "--csr", str(where / f"{name}.csr"))
        assert result.returncode == 0, result.stderr
        assert printed in result.stdout  # the CA operator compares it with what the party read out
        cert = x509.load_pem_x509_certificate((where / f"{name}.pem").read_bytes())
        ca = x509.load_pem_x509_certificate((ca_dir / "ca.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        assert cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == name
        assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName) == [name]
    assert not (ca_dir / "bank.key").exists() and not (bank / "telco.key").exists()


def test_the_ca_is_never_replaced_without_force(tmp_path):
    init_ca(tmp_path)
    before = (tmp_path / "ca.pem").read_bytes()
    with pytest.raises(ConfigError, match="invalidate every certificate"):
        init_ca(tmp_path)
    result = cli("init-ca", "--out", str(tmp_path))
    assert result.returncode != 0 and "already exists" in result.stderr
    assert (tmp_path / "ca.pem").read_bytes() == before
    with pytest.raises(ConfigError, match="invalidate"):
        create_federation_certs(tmp_path, ["active", "passive-1"])  # the demo command respects it too
    init_ca(tmp_path, force=True)
    assert (tmp_path / "ca.pem").read_bytes() != before


def test_a_reissued_key_is_0600_even_over_a_world_readable_file(tmp_path):
    key = tmp_path / "bank.key"
    key.write_text("old key")
    os.chmod(key, 0o644)
    with pytest.raises(ConfigError, match="refusing to replace this party's key"):
        request_certificate("bank", tmp_path)
    assert key.read_text() == "old key"
    old_umask = os.umask(0)
    try:
        request_certificate("bank", tmp_path, force=True)
    finally:
        os.umask(old_umask)
    assert mode(key) == 0o600 and key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    (tmp_path / "demo").mkdir()
    for name in ("ca.key", "active.key"):
        (tmp_path / "demo" / name).write_text("x")
        os.chmod(tmp_path / "demo" / name, 0o644)
    create_federation_certs(tmp_path / "demo", ["active"], force=True)
    assert mode(tmp_path / "demo" / "ca.key") == 0o600 and mode(tmp_path / "demo" / "active.key") == 0o600


def test_a_key_is_never_written_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("not a key")
    (tmp_path / "bank.key").symlink_to(target)
    with pytest.raises(ConfigError, match="already exists"):
        request_certificate("bank", tmp_path)
    request_certificate("bank", tmp_path, force=True)  # replaces the link itself, never its target
    assert target.read_text() == "not a key"
    assert not (tmp_path / "bank.key").is_symlink() and mode(tmp_path / "bank.key") == 0o600


def test_the_ca_signs_only_sound_requests(tmp_path):
    init_ca(tmp_path / "ca")
    _, csr, _ = request_certificate("bank", tmp_path)
    text = csr.read_bytes()
    der = x509.load_pem_x509_csr(text).public_bytes(serialization.Encoding.DER)
    tampered = bytearray(der)
    tampered[-5] ^= 0x01  # flip a bit of the signature
    (tmp_path / "bad.csr").write_bytes(b"-----BEGIN CERTIFICATE REQUEST-----\n"
                                       + base64.encodebytes(bytes(tampered))
                                       + b"-----END CERTIFICATE REQUEST-----\n")
    with pytest.raises(ConfigError, match="does not verify"):
        sign_request(tmp_path / "ca", tmp_path / "bad.csr", tmp_path / "bad.pem")
    key = ec.generate_private_key(ec.SECP256R1())
    odd = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(x509.NameOID.COMMON_NAME, "bank; drop")])).sign(key, hashes.SHA256())
    (tmp_path / "odd.csr").write_bytes(odd.public_bytes(serialization.Encoding.PEM))
    with pytest.raises(ConfigError, match="party name"):
        sign_request(tmp_path / "ca", tmp_path / "odd.csr", tmp_path / "odd.pem")
    with pytest.raises(ConfigError, match="init-ca"):
        sign_request(tmp_path / "no-ca", csr, tmp_path / "x.pem")
    party, _, _, _ = sign_request(tmp_path / "ca", csr, tmp_path / "bank.pem")
    assert party == "bank"
    with pytest.raises(ConfigError, match="already exists"):  # renewal is explicit
        sign_request(tmp_path / "ca", csr, tmp_path / "bank.pem")


def test_the_one_shot_command_says_it_is_for_demos(tmp_path):
    result = cli("demo", "--out", str(tmp_path), "--parties", "active,passive-1")
    assert result.returncode == 0, result.stderr
    assert "LOCAL DEMO ONLY" in result.stderr


def test_a_certificate_is_named_after_its_party_and_never_lands_on_the_ca(tmp_path):
    """Red-team finding: a request saved as ca.csr in the CA's directory, signed with
    --force, replaced ca.pem; names like 'ca', 'localhost' or an IP address were signed."""
    ca = tmp_path / "ca"
    init_ca(ca)
    _, csr, _ = request_certificate("mallory", tmp_path)
    planted = ca / "ca.csr"
    planted.write_bytes(csr.read_bytes())
    party, _, _, out = sign_request(ca, planted, force=True)
    assert out == ca / "mallory.pem" and party == "mallory"
    with pytest.raises(ConfigError, match="CA's own files"):
        sign_request(ca, planted, ca / "ca.pem", force=True)
    x509.load_pem_x509_certificate((ca / "ca.pem").read_bytes()).extensions.get_extension_for_class(
        x509.BasicConstraints).value.ca  # still the CA certificate
    for name in ("ca", "localhost", "127.0.0.1", "CA"):
        with pytest.raises(ConfigError, match="reserved"):
            request_certificate(name, tmp_path / "x")
