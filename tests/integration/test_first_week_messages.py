"""A user's first week (issue #35): what a deployed federation tells its operators is true.

One loopback federation (``write_federation``: the active party's config and one passive party
process, mutual TLS) whose passive party is set to SecureBoost with Okamoto-Uchiyama while the
active party keeps Paillier. The active party trains with early stopping; its audit log is
summarised, its ``--json`` report is compared with the one-process report, and a SecureBoost run
is started to see the scheme mismatch named before any id is exchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from teeboost.audit_report import read_audit
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation

from ..helpers import SMALL_FLAGS, stop_passive_parties

TRAINING = {"n_trees": 4, "max_depth": 2, "early_stopping_rounds": 2}


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """The federation, and the active party's ``--json`` report of a plain run with early stopping."""
    workdir = tmp_path_factory.mktemp("first-week")
    configs = write_federation(workdir, n_passive=1, training=TRAINING, rows=2000)
    passive = configs["passive-1"]
    passive.write_text(passive.read_text() + '\n[protocol]\nscheme = "ou"\n')  # the active party keeps paillier
    process, address = start_passive(passive, workdir / "passive-1.address", workdir / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "plain", "--json")
        assert trained.returncode == 0, trained.stderr
        yield workdir, configs, json.loads(trained.stdout)
    finally:
        stop_passive_parties(configs["active"], [process])


def test_audit_show_summarises_the_active_party_log(federation):
    """It crashed on the active party's entries (a fingerprint per peer, one message count)."""
    workdir, configs, _ = federation
    shown = cli("audit", "show", "--config", str(configs["active"]))
    assert shown.returncode == 0, shown.stderr
    assert "audit log of party 'active'" in shown.stdout
    assert "plain  peer passive-1 sha256:" in shown.stdout and "finished" in shown.stdout
    assert "messages: " in shown.stdout
    assert "this is the active party's log" in shown.stdout  # no passive budgets claimed for it


def test_the_deployed_report_has_the_keys_of_the_one_process_report(federation, tmp_path):
    """Same keys in ``teeboost train --json`` and ``teeboost party --json``, early stopping included."""
    _, _, deployed = federation
    local = cli("train", *SMALL_FLAGS, "--json", "--protocol", "plain", "--n-trees", "4", "--max-depth", "2",
                "--early-stopping-rounds", "2", "--model-dir", str(tmp_path / "m"))
    assert local.returncode == 0, local.stderr
    report = json.loads(local.stdout)
    assert set(deployed) == set(report), (set(deployed) ^ set(report))
    for key in ("stopped_early", "rounds_run", "best_round", "early_stopping_rounds"):
        assert key in deployed
    assert deployed["rounds_run"] >= deployed["n_trees"] == deployed["best_round"] + 1
    assert deployed["psi"]["intersection"] > 0 and report["psi"] is None
    assert deployed["transport"] == "grpc" and report["transport"] == "in-process"


def test_a_scheme_mismatch_is_named_before_any_alignment(federation):
    """paillier (active) against ou (passive): named with the table and key, nothing aligned."""
    workdir, configs, _ = federation
    log = workdir / "audit-passive-1.jsonl"
    aligned_before = sum(e["event"] == "align" for e in read_audit(log))
    run = cli("party", "--config", str(configs["active"]), "--protocol", "secureboost")
    assert run.returncode != 0
    assert "[protocol] scheme" in run.stderr and "'paillier'" in run.stderr and "'ou'" in run.stderr, run.stderr
    assert str(configs["active"]) in run.stderr  # where the active party's own setting is
    assert sum(e["event"] == "align" for e in read_audit(log)) == aligned_before
