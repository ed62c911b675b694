"""A strict passive host plays the label owner itself, to read its enclave's ledgers.

The threat: the passive host wants to know which of its customers the label owner scored
online today (who applied for a loan), which its enclave keeps from it. It holds the sealed
online ledger log, the batch ledger, the row ledger's versions and keyed-hash secret, its
platform and identity key, and the genuine code. So it makes an identity key of its own,
pins it as "the active party" in a federation it runs alone, trains a strict model with labels
it made up, and scores one customer in a batch with a budget of one score a day: if its enclave
counted the genuine online log, the customer scored online would be refused (sealed to the
active enclave, which is its own) and a customer not scored answered. The ledgers are bound
to the label owner whose key signed the session, so its enclave opens none of them.
"""

from __future__ import annotations

import shutil
import sqlite3

import pandas as pd
import pytest

from teeboost.deploy.active import run_prediction
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.errors import TeeboostError
from teeboost.model_files import load_active
from teeboost.data import PartyData
from teeboost.policy import SealedRefusal
from teeboost.serving.federated import FederatedScorer

from ..helpers import stop_passive_parties
from .helpers import fresh_customer, model_inputs
from .test_online_federated import TRAINING, _owner, cli


def _start(workdir, configs, name):
    process, address = start_passive(configs["passive-1"], workdir / f"{name}.address", workdir / f"{name}.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    return process


def _one_day_of_one_score(config_path):
    text = config_path.read_text()
    assert "max_bits_per_row_per_day = 256" in text
    config_path.write_text(text.replace("max_bits_per_row_per_day = 256", "max_bits_per_row_per_day = 8"))


def _batch(workdir, config, frame, name):
    """What the host of the active party sees of a batch: the scores, or why not."""
    frame.to_csv(workdir / f"{name}.csv", index=False)
    try:
        run_prediction(config, workdir / f"{name}.csv", workdir / f"{name}-out.csv")
    except SealedRefusal as exc:
        return "refused", exc.rule
    except TeeboostError as exc:
        return "error", type(exc).__name__
    return "scored", len(pd.read_csv(workdir / f"{name}-out.csv"))


@pytest.mark.serial
def test_a_strict_passive_host_running_its_own_label_owner_cannot_read_which_customers_were_scored_online(
        tmp_path):
    genuine = tmp_path / "genuine"
    configs = write_federation(genuine, n_passive=1, training=TRAINING)
    processes = [_start(genuine, configs, "passive-1")]
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
        assert trained.returncode == 0, trained.stderr
        config = load_config(configs["active"])
        model = load_active(config.model_dir / "active.json")
        frame = pd.read_csv(genuine / "active.csv", dtype={"id": str}).iloc[700:702]
        features = PartyData.from_frame(frame[["id", *model.feature_names]], id_column="id", name="active",
                                        source="test").conform(model.feature_names, model.vocabularies, "model").features
        x, y = list(frame["id"])
        scorer = FederatedScorer(config, "credit")
        try:  # the label owner scores customer X online (with inputs no batch of training asked)
            assert scorer.score([x], features[:1] + 1.0).reasons == [None]
        finally:
            scorer.close()
    finally:
        stop_passive_parties(configs["active"], processes)
    assert (genuine / f"audit-passive-1.{_owner(configs)}.strict-online-ledger.log").stat().st_size > 0

    # the passive host, alone: its own platform and identity, a label owner of its own making
    own = tmp_path / "own"
    own.mkdir()
    for name in ("platform-passive-1.key", "identity-passive-1.key"):
        shutil.copy(genuine / name, own / name)
    shutil.copy(genuine / "platform-passive-1.key", own / "platform-active.key")  # its own machine, for both
    attack = write_federation(own, n_passive=1, training=TRAINING)
    # every enclave configured as the genuine ones are (the configuration is measured, and what
    # a measurement sealed opens only under it): the same trusted platforms
    roots = next(line for line in configs["passive-1"].read_text().splitlines() if line.startswith("trusted_roots"))
    for path in attack.values():
        path.write_text("\n".join(roots if line.startswith("trusted_roots") else line
                                  for line in path.read_text().splitlines()) + "\n")
    _one_day_of_one_score(attack["passive-1"])  # its enclave's budget: one score (8 bits) a row a day
    processes = [_start(own, attack, "passive-1")]
    try:
        trained = cli("party", "--config", str(attack["active"]), "--protocol", "strict", "--json")
        assert trained.returncode == 0, trained.stderr
    finally:
        stop_passive_parties(attack["active"], processes)
    # then the genuine row ledger (its keyed-hash secret) and online log, under the names and
    # version records of its own label owner, with no batch ledger (version 0: the host keeps them)
    theirs, mine = _owner(configs), _owner(attack)
    shutil.copy(genuine / "audit-passive-1.budget.sqlite", own / "audit-passive-1.budget.sqlite")
    shutil.copy(genuine / f"audit-passive-1.{theirs}.strict-online-ledger.log",
                own / f"audit-passive-1.{mine}.strict-online-ledger.log")
    (own / f"audit-passive-1.{mine}.strict-ledger.sealed").unlink(missing_ok=True)
    with sqlite3.connect(own / "audit-passive-1.budget.sqlite") as db:
        version = db.execute("SELECT value FROM meta WHERE name = ?", (f"online_ledger_version:{theirs}",)).fetchone()
        assert version and int(version[0]) > 0
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"online_ledger_version:{mine}", int(version[0])))
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, 0)", (f"strict_ledger_version:{mine}",))
    processes = [_start(own, attack, "passive-1.probing")]
    try:
        own_config = load_config(attack["active"])
        rows = pd.read_csv(own / "active.csv", dtype={"id": str}).drop(columns=["SeriousDlqin2yrs"])
        rows = rows[rows["id"].isin([x, y])].set_index("id")
        seen = {who: _batch(own, own_config, rows.loc[[who]].reset_index(), f"probe-{who}") for who in (x, y)}
    finally:
        stop_passive_parties(attack["active"], processes)
    # what its own label owner learns is the same for the customer scored online and the other
    assert seen[x] == seen[y], seen
    assert seen[x][0] == "error", seen
    log = (own / "passive-1.probing.log").read_text()
    assert "does not open here" in log and "online ledger log" in log, log[-2000:]


@pytest.mark.serial
def test_a_label_owner_that_rotates_its_key_does_not_get_a_fresh_day(tmp_path):
    """Red team: the label owner says it rotated its identity key; the passive operator pins
    the new one, as it must; the label owner trains strict again and scores, the same day, a
    customer whose day it had spent. The new key's ledgers start empty, so it was answered.
    Now strict sessions for the new key wait until the old key's ledgers have been quiet a
    whole window, and say until when."""
    from teeboost.tee.identity import PartyIdentity

    configs = write_federation(tmp_path, n_passive=1, training=TRAINING)
    _one_day_of_one_score(configs["passive-1"])
    customer, row = fresh_customer(tmp_path)

    def score(delta):
        config = load_config(configs["active"])
        scorer = FederatedScorer(config, "credit")
        try:
            return scorer.score([customer], model_inputs(config, row) + delta).reasons[0]
        finally:
            scorer.close()

    processes = [_start(tmp_path, configs, "passive-1")]
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
        assert trained.returncode == 0, trained.stderr
        assert score(1.0) is None
        assert "max_bits_per_row_per_day" in (score(2.0) or "")  # its day is spent
    finally:
        stop_passive_parties(configs["active"], processes)
    old = PartyIdentity.load(tmp_path / "identity-active.key").public_key.hex()
    new = PartyIdentity.load_or_create(tmp_path / "identity-active-2.key").public_key.hex()
    for name, path in configs.items():  # the rotation, pinned by both
        text = path.read_text().replace(old, new)
        path.write_text(text.replace('identity = "identity-active.key"', 'identity = "identity-active-2.key"')
                        if name == "active" else text)
    processes = [_start(tmp_path, configs, "passive-1.rotated")]
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
    finally:
        stop_passive_parties(configs["active"], processes)
    assert trained.returncode != 0
    assert "max_bits_per_row_per_day" in trained.stderr and "start at" in trained.stderr, trained.stderr[-2000:]
