"""All protocols side by side on the same rows: training wall time, bytes each way, and
ratios against SecureBoost, with every run checked to grow plain's trees; strict mode's time and
bytes beside N-TEE's.

Rows are resampled from the bundled Give Me Some Credit sample; 10 features split 5/5; 5
trees, depth 3, lr 0.3, subsample 0.8, 32 bins; SecureBoost with 2048-bit Paillier (and
optionally Okamoto-Uchiyama); N-TEE, 1-TEE and strict with AES-128-GCM attested channels on the
simulated enclave backend (enclave processes on this machine; no SGX). All parties share
this machine's 2 cores. Training time includes enclave start-up and attestation.

    python benchmarks/protocols.py [--rows 10000 100000 150000] [--skip-secureboost]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import PartyData, split_columns
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)
from teeboost.federation import train_local

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers import federated_descriptions  # noqa: E402

PARAMS = BoostParams(n_trees=5, max_depth=3, learning_rate=0.3, subsample=0.8, max_bin=32)


def resample(n_rows: int, seed: int = 0) -> tuple[PartyData, PartyData]:
    frame = load_give_me_some_credit().drop(columns=[GIVE_ME_SOME_CREDIT_ID])  # a row number, not a feature
    active, (passive,) = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL)
    index = np.random.default_rng(seed).integers(0, active.n_rows, n_rows)
    return active.take(index), passive.take(index)


def runs(skip_secureboost: bool, with_ou: bool) -> list[tuple[str, str, ProtocolOptions]]:
    out = [("plain", "plain", ProtocolOptions())]
    if not skip_secureboost:
        out.append(("secureboost", "secureboost", ProtocolOptions()))
        if with_ou:
            out.append(("secureboost/ou", "secureboost", ProtocolOptions(scheme="ou")))
    out += [("ntee", "ntee", ProtocolOptions(allow_simulated_tee=True)),
            ("onetee", "onetee", ProtocolOptions(allow_simulated_tee=True)),  # bins once, the default
            ("onetee/index-sets", "onetee", ProtocolOptions(onetee_bins_once=False, allow_simulated_tee=True)),
            ("strict", "strict", ProtocolOptions(allow_simulated_tee=True))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 150_000])
    parser.add_argument("--skip-secureboost", action="store_true")
    parser.add_argument("--with-ou", action="store_true", help="also run SecureBoost on Okamoto-Uchiyama")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          "enclaves: simulated backend (separate processes, no hardware isolation)")
    print(f"{'rows':>7} {'protocol':<18} {'train s':>8} {'MB a->p':>9} {'MB p->a':>9} {'MB total':>9} "
          f"{'time vs SB':>10} {'bytes vs SB':>11} {'same trees':>10}")
    results = []
    for n_rows in args.rows:
        active, passive = resample(n_rows)
        reference = None
        baseline = None
        for label, protocol, options in runs(args.skip_secureboost, args.with_ou):
            started = time.perf_counter()
            model, run = train_local(active, [passive], PARAMS, protocol, options=options)
            seconds = time.perf_counter() - started
            trees = federated_descriptions(model, statistics=False)  # strict publishes no gains or node sizes
            reference = trees if reference is None else reference
            sent, received = run.traffic["bytes"]["active_to_passive"], run.traffic["bytes"]["passive_to_active"]
            total = sent + received
            if label == "secureboost":
                baseline = (seconds, total)
            speed = f"{baseline[0] / seconds:>9.1f}x" if baseline else f"{'':>10}"
            volume = f"{baseline[1] / total:>10.1f}x" if baseline else f"{'':>11}"
            print(f"{n_rows:>7} {label:<18} {seconds:>8.2f} {sent / 1e6:>9.2f} {received / 1e6:>9.2f} "
                  f"{total / 1e6:>9.2f} {speed} {volume} {str(trees == reference):>10}", flush=True)
            results.append({"rows": n_rows, "protocol": label, "seconds": seconds, "bytes": run.traffic["bytes"],
                            "bytes_by_message": run.traffic["bytes_by_message"], "phases": run.phases,
                            "same_trees": trees == reference})
    print("\nstrict beside N-TEE (the issue's bound: at most 3x N-TEE's time):")
    for n_rows in args.rows:
        by = {r["protocol"]: r for r in results if r["rows"] == n_rows}
        if "strict" in by and "ntee" in by:
            ntee, strict = by["ntee"], by["strict"]
            print(f"{n_rows:>9} rows: time {strict['seconds'] / ntee['seconds']:.2f}x N-TEE "
                  f"({strict['seconds']:.2f} s vs {ntee['seconds']:.2f} s), bytes "
                  f"{sum(strict['bytes'].values()) / sum(ntee['bytes'].values()):.2f}x "
                  f"({sum(strict['bytes'].values()) / 1e6:.1f} MB vs {sum(ntee['bytes'].values()) / 1e6:.1f} MB)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
