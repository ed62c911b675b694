"""Hardware quote producers (tee.producers) against temporary directories that emulate Gramine's
/dev/attestation and the kernel's configfs-tsm. Nothing here touches hardware."""

import hashlib
import tomllib
import types
from importlib import resources
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from teeboost.errors import EnclaveError
from teeboost.tee.producers import (GramineSgxProducer, QuoteProducer, TsmReportProducer, hardware_report_data,
                                    producer_from_config)
from teeboost.tee.runtime import EnclaveRuntime

BINDING = hashlib.sha256(b"responder|ephemeral key|nonces|run").digest()
NONCE = bytes(range(32))
QUOTE_HEADER = b"FAKE-SGX-QUOTE:"


# ------------------------------------------------------------------ hardware_report_data

def test_hardware_report_data_is_the_documented_hash():
    expected = hashlib.sha512(b"teeboost-hw-quote-v1|" + BINDING + b"|" + NONCE).digest()
    assert hardware_report_data(BINDING, NONCE) == expected
    assert len(expected) == 64


def test_hardware_report_data_binds_binding_and_nonce():
    base = hardware_report_data(BINDING, NONCE)
    other_binding = bytes([BINDING[0] ^ 1]) + BINDING[1:]
    other_nonce = NONCE[:-1] + bytes([NONCE[-1] ^ 1])
    assert hardware_report_data(other_binding, NONCE) != base
    assert hardware_report_data(BINDING, other_nonce) != base
    assert hardware_report_data(b"", NONCE) != hardware_report_data(b"\0", NONCE)
    assert len(hardware_report_data(b"x" * 64, NONCE)) == 64


@pytest.mark.parametrize("binding, nonce", [(b"x" * 65, NONCE), (BINDING, NONCE[:31]), (BINDING, NONCE + b"!"),
                                            (BINDING, b"")])
def test_hardware_report_data_checks_lengths(binding, nonce):
    with pytest.raises(EnclaveError, match="64 bytes and the nonce 32 bytes"):
        hardware_report_data(binding, nonce)


# ------------------------------------------------------------------ Gramine-SGX

def fake_gramine(root: Path, attestation_type: str = "dcap") -> Path:
    """A /dev/attestation stand-in (Gramine creates these pseudo-files itself)."""
    root.mkdir()
    (root / "attestation_type").write_text(attestation_type)
    (root / "user_report_data").write_bytes(b"")
    (root / "quote").write_bytes(b"")
    return root


class GramineEmulation(GramineSgxProducer):
    """Emulates Gramine through the producer's documented hook: after the production write of
    `user_report_data`, the "platform" answers `quote` with a fake quote embedding exactly the
    bytes that landed in that file."""

    def _write_attribute(self, path, data):
        super()._write_attribute(path, data)
        assert path == self.root / "user_report_data"
        (self.root / "quote").write_bytes(QUOTE_HEADER + path.read_bytes())


def test_gramine_producer_round_trip(tmp_path):
    root = fake_gramine(tmp_path / "attestation")
    producer = GramineEmulation(root)
    report_data = hardware_report_data(BINDING, NONCE)
    quote = producer.quote(report_data)
    assert (root / "user_report_data").read_bytes() == report_data  # exactly the 64 bytes, nothing more
    assert quote == QUOTE_HEADER + report_data
    assert producer.backend == "gramine-sgx"
    assert isinstance(producer, QuoteProducer)


def test_gramine_producer_reads_the_quote_file(tmp_path):
    """Without emulation: whatever the platform left in `quote` is returned byte for byte."""
    root = fake_gramine(tmp_path / "attestation")
    (root / "quote").write_bytes(b"\x03\x00platform quote")
    assert GramineSgxProducer(root).quote(b"\x11" * 64) == b"\x03\x00platform quote"
    assert (root / "user_report_data").read_bytes() == b"\x11" * 64


def test_gramine_producer_refuses_without_dcap(tmp_path):
    root = fake_gramine(tmp_path / "attestation", attestation_type="none")
    (root / "quote").write_bytes(b"would-be quote")
    with pytest.raises(EnclaveError, match="says 'none', not 'dcap'"):
        GramineSgxProducer(root).quote(b"\0" * 64)
    assert (root / "user_report_data").read_bytes() == b""  # refused before writing anything


def test_gramine_producer_refuses_outside_gramine_and_empty_quotes(tmp_path):
    with pytest.raises(EnclaveError, match="not running under Gramine-SGX"):
        GramineSgxProducer(tmp_path / "missing").quote(b"\0" * 64)
    root = fake_gramine(tmp_path / "attestation")
    with pytest.raises(EnclaveError, match="empty quote"):
        GramineSgxProducer(root).quote(b"\0" * 64)
    with pytest.raises(EnclaveError, match="exactly 64 bytes"):
        GramineSgxProducer(root).quote(b"\0" * 32)


# ------------------------------------------------------------------ configfs-tsm

class FakeTsm(TsmReportProducer):
    """Emulates the kernel's configfs-tsm over a plain directory, through the producer's three
    documented kernel-boundary hooks: mkdir populates the entry, an inblob write bumps
    `generation` and regenerates `outblob`, rmdir takes the attributes away."""

    def __init__(self, root, provider=None, *, kernel_provider="tdx_guest", racing_writer=False):
        super().__init__(root, provider)
        self.kernel_provider = kernel_provider
        self.racing_writer = racing_writer
        self.entries = []  # every entry the producer created

    def _make_entry(self, entry):
        super()._make_entry(entry)
        self.entries.append(entry)
        (entry / "generation").write_text("0\n")
        (entry / "provider").write_text(self.kernel_provider + "\n")
        (entry / "inblob").write_bytes(b"")
        (entry / "outblob").write_bytes(b"")

    def _kernel_write(self, entry, data):
        (entry / "inblob").write_bytes(data)
        generation = int((entry / "generation").read_text()) + 1
        (entry / "generation").write_text(f"{generation}\n")
        (entry / "outblob").write_bytes(f"{self.kernel_provider}-report:".encode() + data)

    def _write_attribute(self, path, data):
        super()._write_attribute(path, data)  # the production write, then the kernel's reaction
        self._kernel_write(path.parent, data)
        if self.racing_writer:  # another process writes its own inblob before we read outblob
            self._kernel_write(path.parent, b"\xee" * 64)

    def _remove_entry(self, entry):
        for child in entry.iterdir():
            child.unlink()
        super()._remove_entry(entry)


def test_tsm_producer_round_trip(tmp_path):
    producer = FakeTsm(tmp_path)
    assert producer.backend == "tsm"  # provider unknown until the kernel says
    report_data = hardware_report_data(BINDING, NONCE)
    seen = {}
    original = producer._kernel_write

    def spy(entry, data):
        seen["inblob"] = data
        seen["entry"] = entry
        original(entry, data)

    producer._kernel_write = spy
    quote = producer.quote(report_data)
    assert seen["inblob"] == report_data
    assert seen["entry"].parent == tmp_path and seen["entry"].name.startswith("teeboost-")
    assert quote == b"tdx_guest-report:" + report_data
    assert producer.backend == "tdx"
    assert list(tmp_path.iterdir()) == []  # the entry is gone
    producer.quote(report_data)
    assert len(set(producer.entries)) == 2  # a fresh entry per quote


def test_tsm_producer_backends_from_provider(tmp_path):
    assert FakeTsm(tmp_path, "tdx_guest").backend == "tdx"
    assert FakeTsm(tmp_path, "sev_guest").backend == "sev-snp"
    assert FakeTsm(tmp_path, "arm_cca_guest").backend == "tsm:arm_cca_guest"
    producer = FakeTsm(tmp_path, kernel_provider="sev_guest")
    assert producer.quote(b"\1" * 64) == b"sev_guest-report:" + b"\1" * 64
    assert producer.backend == "sev-snp"


def test_tsm_producer_refuses_provider_mismatch(tmp_path):
    producer = FakeTsm(tmp_path, "tdx_guest", kernel_provider="sev_guest")
    with pytest.raises(EnclaveError, match="provider is 'sev_guest', expected 'tdx_guest'"):
        producer.quote(b"\0" * 64)
    assert list(tmp_path.iterdir()) == []  # removed on failure too
    pinned = FakeTsm(tmp_path)
    pinned.quote(b"\0" * 64)
    pinned.kernel_provider = "sev_guest"  # the first quote pinned tdx_guest
    with pytest.raises(EnclaveError, match="expected 'tdx_guest'"):
        pinned.quote(b"\0" * 64)


def test_tsm_producer_refuses_a_generation_race(tmp_path):
    producer = FakeTsm(tmp_path, racing_writer=True)
    with pytest.raises(EnclaveError, match="generation went from 0 to 2.*another writer raced"):
        producer.quote(b"\0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_tsm_producer_refuses_a_write_the_kernel_did_not_count(tmp_path):
    class Lost(FakeTsm):
        def _kernel_write(self, entry, data):
            (entry / "outblob").write_bytes(b"stale report")

    with pytest.raises(EnclaveError, match="generation went from 0 to 0"):
        Lost(tmp_path).quote(b"\0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_tsm_producer_without_configfs_names_the_path(tmp_path):
    with pytest.raises(EnclaveError, match="cannot create configfs-tsm report entry"):
        TsmReportProducer(tmp_path / "no-such-dir").quote(b"\0" * 64)


def test_tsm_production_hooks_are_the_plain_file_protocol(tmp_path):
    """Without the fake, a plain directory has no attributes: the producer fails, and still
    removes the entry it made."""
    with pytest.raises(EnclaveError, match="configfs-tsm report under"):
        TsmReportProducer(tmp_path).quote(b"\0" * 64)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ configuration

def test_producer_from_config(tmp_path):
    assert isinstance(producer_from_config("gramine-sgx", root=tmp_path), GramineSgxProducer)
    tsm = producer_from_config("tsm", root=str(tmp_path), provider="sev_guest")
    assert isinstance(tsm, TsmReportProducer) and tsm.root == tmp_path and tsm.backend == "sev-snp"
    assert producer_from_config("tdx").provider == "tdx_guest"
    assert producer_from_config("sev-snp").backend == "sev-snp"
    with pytest.raises(EnclaveError, match="unknown quote producer 'sgx-epid'"):
        producer_from_config("sgx-epid")
    with pytest.raises(EnclaveError, match="means provider 'tdx_guest'"):
        producer_from_config("tdx", provider="sev_guest")


# ------------------------------------------------------------------ the runtime

def make_runtime(producer=None):
    kwargs = {} if producer is None else {"producer": producer}
    return EnclaveRuntime(b"\7" * 32, Ed25519PrivateKey.generate(), b"\1" * 16, b"\2" * 32, {}, **kwargs)


class RecordingProducer(QuoteProducer):
    backend = "test-hw"

    def __init__(self):
        self.calls = []

    def quote(self, report_data):
        self.calls.append(report_data)
        return b"HW:" + report_data


def test_runtime_with_a_producer_quotes_through_it():
    producer = RecordingProducer()
    runtime = make_runtime(producer)
    assert runtime.backend == "test-hw"
    assert runtime.quote(BINDING, NONCE) == b"HW:" + hardware_report_data(BINDING, NONCE)
    assert producer.calls == [hardware_report_data(BINDING, NONCE)]
    with pytest.raises(EnclaveError):
        runtime.quote(BINDING, NONCE[:16])
    assert len(producer.calls) == 1


def test_runtime_backend_follows_a_tsm_producer(tmp_path):
    runtime = make_runtime(FakeTsm(tmp_path, kernel_provider="sev_guest"))
    assert runtime.backend == "tsm"
    assert runtime.quote(BINDING, NONCE) == b"sev_guest-report:" + hardware_report_data(BINDING, NONCE)
    assert runtime.backend == "sev-snp"


def test_runtime_without_a_producer_is_simulated():
    runtime = make_runtime()
    assert runtime.backend == "simulated"
    assert b"simulated" in runtime.quote(BINDING, NONCE)


# ------------------------------------------------------------------ the Gramine manifest template

def template_text():
    return resources.files("teeboost.tee").joinpath("gramine/enclave.manifest.template").read_text()


def test_manifest_template_ships_with_the_package_and_says_what_it_is():
    text = template_text()
    for line in ('sgx.remote_attestation = "dcap"', "sgx.debug = false", 'loader.entrypoint = "file:',
                 'libos.entrypoint = "{{ entrypoint }}"', "sgx.enclave_size", "sgx.max_threads",
                 "sgx.trusted_files", "fs.mounts", "loader.env.LD_LIBRARY_PATH"):
        assert line in text, line
    assert "NOT been rendered" in text and "run on SGX hardware" in text


def test_manifest_template_renders_to_valid_toml():
    jinja2 = pytest.importorskip("jinja2")  # Gramine's renderer; not a teeboost dependency
    gramine = types.SimpleNamespace(libos="/usr/lib/x86_64-linux-gnu/gramine/libsysdb.so",
                                    runtimedir=lambda libc="glibc": "/usr/lib/x86_64-linux-gnu/gramine/runtime/glibc")
    bootstrap = resources.files("teeboost.tee").joinpath("bootstrap.py").read_text()
    rendered = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template_text()).render(
        gramine=gramine, python=types.SimpleNamespace(stdlib="/usr/lib/python3.11"),
        entrypoint="/usr/bin/python3.11", arch_libdir="/lib/x86_64-linux-gnu", bootstrap=bootstrap,
        site_packages="/usr/local/lib/python3.11/dist-packages", site_dir="/opt/enclave/site",
        teeboost_dir="/opt/enclave/teeboost")
    manifest = tomllib.loads(rendered)
    assert manifest["loader"]["argv"] == ["/usr/bin/python3.11", "-I", "-B", "-c", bootstrap, "0", "1"]
    assert manifest["sgx"]["remote_attestation"] == "dcap" and manifest["sgx"]["debug"] is False
    assert "file:/opt/enclave/teeboost/" in manifest["sgx"]["trusted_files"]
