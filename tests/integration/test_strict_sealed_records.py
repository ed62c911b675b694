"""A strict run leaves a passive host no split record (issue #32): real processes.

The passive host is the adversary of the labels here. After a strict run it keeps its data, its
model file (digest, tree count, records sealed by its enclave), its audit log and its stdout.
These tests read everything it wrote the way it would, then take the records out by the only
way there is: the label owner's signed consent (``teeboost consent``) handed to the passive
party (``teeboost disclose``). A consent signed by anyone else is refused and audited; the
export built from disclosed records predicts what the federation predicts.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.protocols.strict.enclave.consent import Consent
from teeboost.tee.identity import PartyIdentity

from ..helpers import stop_passive_parties

TRAINING = {"n_trees": 6, "max_depth": 3}


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """A strict model trained by the active party's process and one passive party's process.
    The passive party releases predictions at full precision (``output_bits = "none"``) so an
    export can be compared with them exactly."""
    workdir = tmp_path_factory.mktemp("sealed")
    configs = write_federation(workdir, n_passive=1, training=TRAINING)
    passive = configs["passive-1"]
    passive.write_text(passive.read_text().replace("max_bits_per_row_per_day = 256",
                                                   'max_bits_per_row_per_day = 256\noutput_bits = "none"'))
    process, address = start_passive(passive, workdir / "passive-1.address", workdir / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
    assert trained.returncode == 0, trained.stderr
    yield workdir, configs
    stop_passive_parties(configs["active"], [process])


def passive_host_files(workdir):
    """Every file the passive host wrote or was sent: its model folder, audit log and ledgers,
    stdout. (Its own data, config, certificate and keys are its inputs.)"""
    inputs = {"passive-1.csv", "passive-1.toml", "passive-1.address", "platform-passive-1.key",
              "identity-passive-1.key"}
    found = [p for p in workdir.rglob("*") if p.is_file() and "passive-1" in str(p.relative_to(workdir))
             and p.name not in inputs and "certs" not in p.parts]
    assert any(p.name == "passive-1.json" for p in found) and any(p.suffix == ".jsonl" for p in found)
    return {p: p.read_bytes() for p in found}


def records_in(value) -> list:
    """Split records anywhere in a JSON document (any non-empty "records" list, any object with
    a "threshold")."""
    if isinstance(value, dict):
        here = [value] if "threshold" in value else []
        if isinstance(value.get("records"), list):
            here += value["records"]
        return here + [r for v in value.values() for r in records_in(v)]
    if isinstance(value, list):
        return [r for v in value for r in records_in(v)]
    return []


def json_documents(data: bytes):
    text = data.decode("utf-8", errors="replace")
    try:
        yield json.loads(text)
        return
    except ValueError:
        pass
    for line in text.splitlines():  # JSON lines (audit log)
        try:
            yield json.loads(line)
        except ValueError:
            continue


def text_of(data: bytes) -> str:
    """A file read as text, except a sealed blob (``teeboost.tee.sealing``: a tag, a nonce,
    AES-GCM ciphertext), which is random bytes: a token like "5.0" turns up in those by chance
    (about once in 16 MiB). Every other file, SQLite included, is searched as text."""
    if data.startswith(b"TBS1"):
        return ""
    return data.decode("utf-8", errors="replace")


def consent_and_disclose(workdir, configs):
    consent = workdir / "consent-passive-1.json"
    signed = cli("consent", "--config", str(configs["active"]), "--party", "passive-1", "--out", str(consent),
                 "--json")
    assert signed.returncode == 0, signed.stderr
    opened = cli("disclose", "--config", str(configs["passive-1"]), "--consent", str(consent), "--json")
    assert opened.returncode == 0, opened.stderr
    return json.loads(opened.stdout)


def test_a_passive_host_holds_no_split_record_until_the_label_owner_consents(federation):
    workdir, configs = federation
    before = passive_host_files(workdir)
    model_file = workdir / "model-passive-1" / "passive-1.json"
    saved = json.loads(model_file.read_text())
    assert saved["records"] == [] and saved["protocol"] == "strict" and len(saved["model_digest"]) == 64
    sealed = base64.b64decode(saved["sealed_records"])
    assert len(sealed) > 100
    for path, data in before.items():
        for document in json_documents(data):
            assert records_in(document) == [], f"{path.name} holds split records"

    disclosed = consent_and_disclose(workdir, configs)
    after = json.loads(model_file.read_text())
    records = after["records"]
    assert disclosed["records"] == len(records) > 0
    assert after["disclosure"]["party"] == 1 and after["sealed_records"] == saved["sealed_records"]
    # none of the disclosed thresholds was anywhere in what the host held before: as text (a
    # number token) or as float64 bytes
    thresholds = {float(r["threshold"]) for r in records if not r.get("categories")}
    assert thresholds
    for path, data in before.items():
        numbers = {float(m) for m in re.findall(r"(?<![\w.])-?\d+\.\d+(?:e-?\d+)?(?![\w.])", text_of(data))}
        on_file = [t for t in thresholds if t in numbers or np.float64(t).tobytes() in data]
        assert not on_file, f"{path.name} holds thresholds {on_file}"
    log = (workdir / "audit-passive-1.jsonl").read_text()
    assert '"disclosed"' in log and '"consented"' in (workdir / "audit-active.jsonl").read_text()


def test_a_consent_not_signed_by_the_label_owner_is_refused_and_audited(federation, tmp_path):
    workdir, configs = federation
    model_file = workdir / "model-passive-1" / "passive-1.json"
    saved = json.loads(model_file.read_text())
    digest = saved["model_digest"]
    # the passive host signs its own "consent" with its identity key (or a fresh one)
    for key in (PartyIdentity.load(workdir / "identity-passive-1.key"), PartyIdentity.generate()):
        forged = tmp_path / "forged.json"
        Consent.sign(key, digest, 1, "passive-1").save(forged)
        result = cli("disclose", "--config", str(configs["passive-1"]), "--consent", str(forged))
        assert result.returncode != 0 and "consent" in result.stderr, result.stderr
    # the label owner's real consent, for another model
    other = Consent.sign(PartyIdentity.load(workdir / "identity-active.key"), "ab" * 32, 1, "passive-1")
    other.save(tmp_path / "other.json")
    result = cli("disclose", "--config", str(configs["passive-1"]), "--consent", str(tmp_path / "other.json"))
    assert result.returncode != 0 and "names model" in result.stderr, result.stderr
    # the label owner's genuine consent for this model, with one byte of the sealed records flipped
    genuine = tmp_path / "genuine.json"
    assert cli("consent", "--config", str(configs["active"]), "--party", "1", "--out", str(genuine)).returncode == 0
    original = model_file.read_bytes()
    blob = bytearray(base64.b64decode(saved["sealed_records"]))
    blob[len(blob) // 2] ^= 1
    model_file.write_text(json.dumps({**saved, "sealed_records": base64.b64encode(bytes(blob)).decode()}))
    try:
        result = cli("disclose", "--config", str(configs["passive-1"]), "--consent", str(genuine))
        assert result.returncode != 0 and "integrity" in result.stderr.lower(), result.stderr
    finally:
        model_file.write_bytes(original)
    assert json.loads(model_file.read_text())["records"] == saved["records"]
    assert '"refused"' in (workdir / "audit-passive-1.jsonl").read_text()


def test_the_export_after_consent_predicts_what_the_federation_predicts(federation):
    workdir, configs = federation
    consent_and_disclose(workdir, configs)
    parts = []
    for model_dir, party in (("model-active", "active"), ("model-passive-1", "passive-1")):
        part = workdir / f"part-{party}.json"
        result = cli("export", str(workdir / model_dir), "--party", party, "--part", str(part))
        assert result.returncode == 0, result.stderr
        parts.append(str(part))
    merged = workdir / "xgboost.json"
    assert cli("export", "merge", *parts, "--out", str(merged)).returncode == 0

    active = pd.read_csv(workdir / "active.csv", dtype={"id": str})
    passive = pd.read_csv(workdir / "passive-1.csv", dtype={"id": str})
    new = active[active["id"].isin(passive["id"])].head(300).drop(columns=["SeriousDlqin2yrs"])
    new.to_csv(workdir / "new.csv", index=False)
    result = cli("predict", "--config", str(configs["active"]), "--data", str(workdir / "new.csv"),
                 "--output", str(workdir / "federated.csv"))
    assert result.returncode == 0, result.stderr
    federated = pd.read_csv(workdir / "federated.csv", dtype={"id": str})

    booster = xgb.Booster()
    booster.load_model(str(merged))
    joined = new.merge(passive, on="id")
    matrix = xgb.DMatrix(joined[booster.feature_names].to_numpy(dtype=np.float64), missing=np.nan,
                         feature_names=booster.feature_names)
    theirs = pd.Series(booster.predict(matrix).astype(np.float64), index=joined["id"])
    ours = federated.set_index("id")["probability_1"]
    assert len(ours) == 300
    assert np.abs(ours.to_numpy() - theirs.loc[ours.index].to_numpy()).max() <= 1e-6
