"""Setting up enclaves by hand: the commands that print the public keys other parties need, the
comparison of two parties' public [tee] set-ups (every mismatch named with its fix), and the
in-process flow's switch for simulated enclaves when a strict model is loaded."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from teeboost import VerticalBoostClassifier
from teeboost.cli import main
from teeboost.config import ProtocolOptions
from teeboost.deploy.tee_check import compare_profiles, explain_attestation_failure, own_profile
from teeboost.errors import AttestationError, ConfigError, ProtocolError
from teeboost.federation import _environments


def test_public_key_prints_what_platform_and_identity_printed(tmp_path, capsys):
    assert main(["tee", "platform", "--out", str(tmp_path / "platform.key")]) == 0
    root = capsys.readouterr().out.strip()
    assert main(["tee", "identity", "--out", str(tmp_path / "identity.key")]) == 0
    identity = capsys.readouterr().out.strip()
    assert main(["tee", "public-key", str(tmp_path / "platform.key")]) == 0
    shown = capsys.readouterr()
    assert shown.out.strip() == root and "trusted_roots" in shown.err
    assert main(["tee", "public-key", str(tmp_path / "identity.key")]) == 0
    shown = capsys.readouterr()
    assert shown.out.strip() == identity and "identities" in shown.err
    # an existing platform file: its key again, never a new platform
    assert main(["tee", "platform", "--out", str(tmp_path / "platform.key")]) == 0
    shown = capsys.readouterr()
    assert shown.out.strip() == root and "an existing simulated platform" in shown.err
    # an existing identity key likewise: its public key again, never a new key (a re-run set-up works)
    before = (tmp_path / "identity.key").read_bytes()
    assert main(["tee", "identity", "--out", str(tmp_path / "identity.key")]) == 0
    shown = capsys.readouterr()
    assert shown.out.strip() == identity and "an existing identity key, kept" in shown.err
    assert (tmp_path / "identity.key").read_bytes() == before
    # what is not an identity key is refused, not replaced
    assert main(["tee", "identity", "--out", str(tmp_path / "platform.key")]) == 2
    assert "not a teeboost party identity key" in capsys.readouterr().err


def test_public_key_of_something_else_says_what_it_takes(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["tee", "public-key", str(tmp_path / "notes.txt")]) == 2
    assert "neither a simulated platform file" in capsys.readouterr().err
    assert main(["tee", "public-key", str(tmp_path / "missing.key")]) == 2
    assert "no such file; `teeboost tee platform --out" in capsys.readouterr().err


@pytest.fixture(scope="module")
def profiles():
    """Two parties of one correctly set-up N-TEE federation: (active, passive)."""
    envs = _environments(True, ProtocolOptions(allow_simulated_tee=True), 1)
    return tuple(own_profile(env, party=name, index=k, protocol="ntee")
                 for k, (env, name) in enumerate(zip(envs, ("active", "passive-1"))))


def test_matching_profiles_pass(profiles):
    active, passive = profiles
    compare_profiles(active, passive)
    compare_profiles(passive, active)


@pytest.mark.parametrize("change, message", [
    (lambda p: {"aes_bits": 256}, "party 'passive-1' 256: set the same at every party"),
    (lambda p: {"identities": p.identities[:1]}, "lists 2 key(s) in [tee] identities and party 'passive-1' 1"),
    (lambda p: {"trusted_roots": np.vstack([p.trusted_roots, np.full((1, 32), 7, np.uint8)])},
     "every party must list the same [tee] trusted_roots (the enclave code's measurement covers them): only party "
     "'passive-1' lists " + "07" * 32),
    (lambda p: {"allow_simulated": False}, "party 'active' sets [tee] allow_simulated = true and party 'passive-1' "
                                           "does not"),
    (lambda p: {"measurement": bytes(32), "version": "0.0.9"},
     "party 'passive-1' teeboost 0.0.9 (0000000000000000...): install the same teeboost version"),
])
def test_each_mismatch_is_named_with_its_fix(profiles, change, message):
    active, passive = profiles
    other = dataclasses.replace(passive, **change(passive))
    with pytest.raises(ConfigError) as refused:
        compare_profiles(active, other)
    assert "party 'active' and party 'passive-1' cannot attest each other's enclaves for protocol 'ntee'" \
        in str(refused.value)
    assert message in str(refused.value)


def test_an_opaque_refusal_after_matching_profiles_says_what_is_left_to_check():
    remote = ProtocolError("passive party 1 refused the request: AttestationError: remote attestation failed")
    for opaque in (remote, AttestationError()):
        explained = explain_attestation_failure(opaque)
        assert type(explained) is type(opaque) and str(explained).startswith(str(opaque))
        assert "set-ups were compared before the enclaves started and fit" in str(explained)
        assert "unmodified teeboost" in str(explained)
    assert explain_attestation_failure(ConfigError("something else")) is None


def test_example_data_is_each_partys_own_file(tmp_path, capsys):
    assert main(["example-data", "--out", str(tmp_path), "--rows", "1000", "--new-rows", "50"]) == 0
    active = pd.read_csv(tmp_path / "active.csv", dtype={"id": str})
    passive = pd.read_csv(tmp_path / "passive-1.csv", dtype={"id": str})
    new = pd.read_csv(tmp_path / "new.csv", dtype={"id": str})
    assert "SeriousDlqin2yrs" in active.columns and "SeriousDlqin2yrs" not in new.columns
    assert "age" in passive.columns and "age" not in active.columns
    shared = set(active["id"]) & set(passive["id"])
    assert 0 < len(shared) < min(len(active), len(passive))  # ids only partly shared
    assert len(new) == 50 and set(new["id"]) <= set(passive["id"]) and not set(new["id"]) & set(active["id"])
    assert main(["example-data", "--out", str(tmp_path)]) == 2  # never over existing files unless --force
    assert "--force" in capsys.readouterr().err


def test_a_loaded_strict_model_predicts_between_simulated_enclaves_when_asked(tmp_path, small_credit):
    active, passives = small_credit
    model = VerticalBoostClassifier(protocol="strict", n_trees=1, max_depth=2, allow_simulated_tee=True, subsample=0.8, max_bin=32)
    expected = model.fit(active, passives).predict_proba(active, passives)
    model.save(tmp_path)
    with pytest.raises(ConfigError, match="allow_simulated_tee=True"):
        VerticalBoostClassifier.load(tmp_path).predict_proba(active, passives)
    loaded = VerticalBoostClassifier.load(tmp_path, allow_simulated_tee=True)
    np.testing.assert_allclose(loaded.predict_proba(active, passives), expected)
