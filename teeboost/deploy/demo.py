"""``teeboost demo``: the whole federation as separate OS processes on loopback.

Splits the bundled Give Me Some Credit sample into an active party's file (label + 5
columns) and a passive party's file (5 columns) whose ids only partly overlap and are
shuffled differently, creates a federation CA and party certificates and a simulated enclave
platform per party, starts the passive party as its own process (mutual TLS), then for every
protocol runs the active party as its own process (PSI, training, held-out evaluation by
federated prediction), predicts new rows over the network, and prints one report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from ..datasets import GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL
from ..errors import TeeboostError
from ..param_defaults import DEMO_SETTINGS, DEMO_SETTINGS_TEXT
from ..tee.identity import PartyIdentity
from ..tee.simulated import SimulatedPlatform
from ..transport.tls import create_federation_certs
from .active import shutdown_peers
from .config import load_config
from .example_data import party_frames

__all__ = ["run_demo", "write_federation"]

PROTOCOLS = ("plain", "secureboost", "ntee", "onetee", "strict")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _table(name: str, values: dict) -> str:
    return f"[{name}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in values.items()) + "\n"


def write_federation(workdir: Path, n_passive: int = 1, *, overlap_seed: int = 0,
                     training: dict | None = None, rows: int | None = None) -> dict[str, Path]:
    """Data files, certificates, platforms and configs of a loopback federation (on the first
    ``rows`` rows of the bundled sample; all by default). The active party's [training] holds
    the demo's small settings (``DEMO_SETTINGS``), which ``training`` overrides key by key."""
    workdir.mkdir(parents=True, exist_ok=True)
    # ids overlap partly: each party misses a different 5% of the rows, and orders them its own way
    frames = party_frames(n_passive, seed=overlap_seed, rows=rows)
    names = list(frames)
    for name, frame in frames.items():
        frame.to_csv(workdir / f"{name}.csv", index=False)
    create_federation_certs(workdir / "certs", names, force=True)  # the demo's own directory
    roots, identities = [], []
    for name in names:
        roots.append(SimulatedPlatform.load_or_create(workdir / f"platform-{name}.key").attestation_root.hex())
        identities.append(PartyIdentity.load_or_create(workdir / f"identity-{name}.key").public_key.hex())
    configs = {}
    for k, name in enumerate(names):
        party = {"name": name, "role": "active" if k == 0 else "passive", "data": f"{name}.csv",
                 "id_column": GIVE_ME_SOME_CREDIT_ID, "model_dir": f"model-{name}"}
        if k == 0:
            party["label"] = GIVE_ME_SOME_CREDIT_LABEL
        else:
            party.update(index=k, listen="127.0.0.1:0")
        text = _table("party", party)
        text += _table("tls", {"ca": "certs/ca.pem", "cert": f"certs/{name}.pem", "key": f"certs/{name}.key"})
        text += _table("tee", {"platform": f"platform-{name}.key", "trusted_roots": roots,
                               "identity": f"identity-{name}.key", "identities": identities,
                               "allow_simulated": True})  # the demo runs on the simulated backend
        text += _table("network", {"timeout": 300, "connect_timeout": 30})
        # the demo compares every protocol, so it opts into the two that reveal aggregates, and it
        # scores the same held-out rows with each of them: a budget for five models' routing (every
        # routing answer is a bit; one 5 x depth-3 model takes up to 15 per row). A real party
        # keeps the default of 8 bits per row per day (docs/hardening.md, "The leakage budget")
        text += _table("policy", {"protocols": list(PROTOCOLS), "max_bits_per_row_per_day": 256}
                       if k else {"protocols": list(PROTOCOLS)})
        if k == 0:  # nodes of at least 20 rows: the passive party's default floor (k)
            text += _table("training", {"protocol": "plain", "min_samples_leaf": 20, **DEMO_SETTINGS,
                                        **(training or {})})
        configs[name] = workdir / f"{name}.toml"
        configs[name].write_text(text)
    return configs


def start_passive(config: Path, ready: Path, log: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "teeboost.cli", "party", "--config", str(config),
                                "--ready-file", str(ready)], stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if process.poll() is not None:
            raise TeeboostError(f"passive party exited with code {process.returncode}: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise TeeboostError("passive party did not start within 60 s")
        time.sleep(0.1)
    return process, ready.read_text().strip()


def set_peer_addresses(active_config: Path, addresses: dict[int, tuple[str, str]]) -> None:
    text = active_config.read_text().split("[[peers]]")[0]
    for index, (name, address) in sorted(addresses.items()):
        text += f"[[peers]]\nindex = {index}\nname = {json.dumps(name)}\naddress = {json.dumps(address)}\n\n"
    active_config.write_text(text)


def run_demo(workdir: Path | None = None, *, protocols=PROTOCOLS, as_json: bool = False) -> int:
    own_tmp = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="teeboost-demo-")) if own_tmp else workdir
    say = (lambda *a: None) if as_json else (lambda *a: print(*a, file=sys.stderr, flush=True))
    say(f"teeboost demo: federation in {workdir}: one active and one passive party, each its own OS process, "
        "gRPC with mutual TLS on 127.0.0.1; enclaves on the simulated backend")
    say(f"  training: {DEMO_SETTINGS_TEXT}")
    configs = write_federation(workdir)
    process, address = start_passive(configs["passive-1"], workdir / "passive-1.address", workdir / "passive-1.log")
    reports = []
    try:
        set_peer_addresses(configs["active"], {1: ("passive-1", address)})
        for protocol in protocols:
            say(f"  training with {protocol} ...")
            result = subprocess.run([sys.executable, "-m", "teeboost.cli", "party", "--config", str(configs["active"]),
                                     "--protocol", protocol, "--json"], capture_output=True, text=True, timeout=1800)
            if result.returncode != 0:
                raise TeeboostError(f"active party failed under {protocol}: {result.stderr.strip()[-2000:]}")
            reports.append(json.loads(result.stdout))
        new_rows = workdir / "active-new.csv"
        active_rows = pd.read_csv(workdir / "active.csv", dtype={GIVE_ME_SOME_CREDIT_ID: str})
        held_by_passive = set(pd.read_csv(workdir / "passive-1.csv", dtype={GIVE_ME_SOME_CREDIT_ID: str})[GIVE_ME_SOME_CREDIT_ID])
        both = active_rows[active_rows[GIVE_ME_SOME_CREDIT_ID].isin(held_by_passive)]
        both.head(500).drop(columns=[GIVE_ME_SOME_CREDIT_LABEL]).to_csv(new_rows, index=False)
        say("  predicting 500 new rows over the network ...")
        prediction = subprocess.run([sys.executable, "-m", "teeboost.cli", "predict", "--config", str(configs["active"]),
                                     "--data", str(new_rows), "--output", str(workdir / "predictions.csv"), "--json"],
                                    capture_output=True, text=True, timeout=600)
        if prediction.returncode != 0:
            raise TeeboostError(f"federated prediction failed: {prediction.stderr.strip()[-2000:]}")
        predicted = json.loads(prediction.stdout)
    finally:
        try:
            shutdown_peers(load_config(configs["active"]), "demo finished")
        except TeeboostError:
            pass
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
    if as_json:
        print(json.dumps({"workdir": str(workdir), "settings": DEMO_SETTINGS_TEXT, "demo": reports,
                          "prediction": predicted}))
        return 0
    psi = reports[0]["psi"]
    print(f"PSI (ristretto255): active {psi['active_ids']} ids, passive {psi['passive_ids']['1']} ids, "
          f"intersection {psi['intersection']} rows, {psi['seconds']:.2f} s")
    print(f"training: {DEMO_SETTINGS_TEXT}")
    print(f"{'protocol':<12} {'held-out ' + reports[0]['metric']:>13} {'train s':>8} {'MB on wire':>11}  transport")
    for r in reports:
        extra = f", enclaves {r['enclaves'].split(' (')[0]}" if r.get("enclaves") else ""
        print(f"{r['protocol']:<12} {r['value']:>13.4f} {r['train_seconds']:>8.2f} {r['bytes_total'] / 1e6:>11.2f}  "
              f"gRPC, {r['tls']}{extra}")
    print(f"federated prediction: {predicted['rows']} rows -> {predicted['output']} "
          f"({predicted['bytes_total']:,} bytes on the wire)")
    print(f"model files per party under {workdir}/model-*")
    return 0
