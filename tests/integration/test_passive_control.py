"""A passive party in control, as separate processes over gRPC with mutual TLS: per-party
keys from the CA flow, a policy that refuses plain, PSI-aligned prediction, audit logs."""

import json
import re
import subprocess
import sys

import pandas as pd

from teeboost.audit_report import read_audit
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.transport.tls import certificate_fingerprint

from ..helpers import stop_passive_parties


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def per_party_certificates(workdir, configs):
    """The README's flow: the CA operator makes the CA; each party makes its own key and a
    request; the CA signs each request. No directory ever holds two parties' keys."""
    assert run_cli("certs", "init-ca", "--out", str(workdir / "ca")).returncode == 0
    for name in ("active", "passive-1"):
        home = workdir / f"home-{name}"
        result = run_cli("certs", "request", "--party", name, "--out", str(home))
        assert result.returncode == 0, result.stderr
        result = run_cli("certs", "sign", "--ca", str(workdir / "ca"), "--csr", str(home / f"{name}.csr"))
        assert result.returncode == 0, result.stderr
        (home / "ca.pem").write_bytes((workdir / "ca" / "ca.pem").read_bytes())
        text = configs[name].read_text()
        text = re.sub(r"\[tls\]\n(.*\n){3}", f'[tls]\nca = "home-{name}/ca.pem"\ncert = "home-{name}/{name}.pem"\n'
                                              f'key = "home-{name}/{name}.key"\n', text)
        configs[name].write_text(text)
    assert sorted(p.name for p in (workdir / "home-active").iterdir() if p.suffix == ".key") == ["active.key"]


def test_a_passive_party_that_serves_ntee_only(tmp_path):
    configs = write_federation(tmp_path, n_passive=1, training={"n_trees": 2, "max_depth": 3}, rows=5000)
    per_party_certificates(tmp_path, configs)
    passive_text = configs["passive-1"].read_text()
    passive_text = re.sub(r"\[policy\]\nprotocols = .*\n", '[policy]\nprotocols = ["ntee"]\nmax_trees = 10\n',
                          passive_text)
    configs["passive-1"].write_text(passive_text)
    process, address = start_passive(configs["passive-1"], tmp_path / "p1.address", tmp_path / "p1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    try:
        # 1. the active party asks for plain: refused by the passive party's policy, named at both ends
        refused = run_cli("party", "--config", str(configs["active"]), "--protocol", "plain")
        assert refused.returncode != 0
        assert "party 'passive-1' refuses by its policy ([policy] protocols)" in refused.stderr
        assert "'plain' is not allowed" in refused.stderr and not (tmp_path / "model-passive-1").exists()
        passive_log = read_audit(tmp_path / "audit-passive-1.jsonl")
        refusal = [e for e in passive_log if e["event"] == "refused"][-1]
        active_cert = certificate_fingerprint((tmp_path / "home-active" / "active.pem").read_bytes())
        assert refusal["rule"] == "protocols" and refusal["peer"] == active_cert
        active_log = read_audit(tmp_path / "audit-active.jsonl")
        passive_cert = certificate_fingerprint((tmp_path / "home-passive-1" / "passive-1.pem").read_bytes())
        assert active_log[0]["event"] == "run" and active_log[0]["peer"] == {"passive-1": passive_cert}
        assert [e for e in active_log if e["event"] == "refused"][-1]["rule"] == "protocols"

        # 2. the protocol it allows trains
        result = run_cli("party", "--config", str(configs["active"]), "--protocol", "ntee", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["n_trees"] == 2

        # 3. prediction: aligned by PSI; ids the passive party lacks are left unscored, never echoed
        frame = pd.read_csv(tmp_path / "active.csv", dtype={"id": str}).drop(columns=["SeriousDlqin2yrs"])
        passive_ids = set(pd.read_csv(tmp_path / "passive-1.csv", dtype={"id": str})["id"])
        held = frame[frame["id"].isin(passive_ids)].head(20)
        lacking = frame[~frame["id"].isin(passive_ids)].head(5)
        pd.concat([held, lacking]).to_csv(tmp_path / "new.csv", index=False)
        predicted = run_cli("predict", "--config", str(configs["active"]), "--data", str(tmp_path / "new.csv"),
                            "--output", str(tmp_path / "p.csv"), "--json")
        assert predicted.returncode == 0, predicted.stderr
        assert json.loads(predicted.stdout)["unscored"] == 5
        output = pd.read_csv(tmp_path / "p.csv", dtype={"id": str})
        assert list(output.columns) == ["id", "probability_1", "prediction", "scored_by", "reason"]
        assert output["probability_1"].head(20).notna().all() and output["probability_1"].tail(5).isna().all()
        assert output["scored_by"].head(20).str.startswith("model@").all() and output["scored_by"].tail(5).isna().all()
        assert output["reason"].tail(5).str.contains("not held by every passive party").all()
        assert set(output["prediction"].dropna()) <= {0, 1}
        text = (tmp_path / "audit-passive-1.jsonl").read_text() + (tmp_path / "p1.log").read_text()
        assert not any(f'"{i}"' in text for i in lacking["id"])

        events = [e["event"] for e in read_audit(tmp_path / "audit-active.jsonl")]
        for event in ("run", "aligned", "trained", "refused", "align", "predict"):
            assert event in events, event

        # 4. its audit log, summarised
        summary = run_cli("audit", "show", "--config", str(configs["passive-1"]))
        assert summary.returncode == 0, summary.stderr
        assert "refusals: 1" in summary.stdout and "protocols: 1" in summary.stdout
        assert re.search(r"run \S+\s+ntee\s+peer sha256:", summary.stdout)
        assert "prediction batches: 1, rows scored: 20" in summary.stdout
    finally:
        stop_passive_parties(configs["active"], [process])
    assert read_audit(tmp_path / "audit-passive-1.jsonl")[-1]["event"] == "shutdown"
