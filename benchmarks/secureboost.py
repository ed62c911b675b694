"""SecureBoost cost on this machine: wall time with its breakdown, and bytes each way.

Rows are resampled from the bundled Give Me Some Credit sample; 10 features split 5/5 between
one active and one passive party; 5 trees, depth 3, learning rate 0.3, subsample 0.8, 32 bins,
2048-bit keys, every party in this process (they share the machine's cores, as the passive and
active party would not in deployment). ``plain`` runs on the same rows first, as the reference
the ratios are taken against, and each secure run is checked to grow the same trees.
Breakdown: key setup (key generation, worker start, fixed-base tables); randomisers computed
ahead (in the background while the passive party sums: this overlaps the other phases, so it is
not part of "other"); encrypt online (the active party's wait for each tree's ciphertexts: a
multiplication per row, plus any randomisers the reserve did not hold, shown as "of which on
demand"); homomorphic sums (passive: bin sums, sibling subtraction, packing); decrypt (active);
other. Runs: Paillier with its default n/2-bit exponents, Paillier with --short-randomizer
(2 lambda = 224 bits), Okamoto-Uchiyama (224 bits by default); ratios against plain and
against default Paillier at the same size.

    python benchmarks/secureboost.py [--rows 10000 100000] [--runs paillier paillier-short ou]
                                     [--no-precompute]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import gmpy2
import numpy as np

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.crypto.randomizer_length import randomizer_bits
from teeboost.data import PartyData, split_columns
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)
from teeboost.federation import train_local

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers import federated_descriptions  # noqa: E402


def resample(n_rows: int, seed: int = 0) -> tuple[PartyData, PartyData]:
    frame = load_give_me_some_credit().drop(columns=[GIVE_ME_SOME_CREDIT_ID])  # a row number, not a feature
    active, (passive,) = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL)
    index = np.random.default_rng(seed).integers(0, active.n_rows, n_rows)
    return active.take(index), passive.take(index)


RUNS = {"paillier": ("paillier", None), "paillier-short": ("paillier", True), "ou": ("ou", None),
        "ou-full": ("ou", False)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", nargs="+", default=["paillier", "paillier-short", "ou"], choices=list(RUNS))
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--no-precompute", action="store_true", help="encrypt without the randomiser reserve")
    parser.add_argument("--crypto-workers", type=int, default=None,
                        help="worker processes per party (1 per party mimics two one-core hosts on this machine)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    params = BoostParams(n_trees=5, max_depth=3, learning_rate=0.3, subsample=0.8, max_bin=32)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"gmpy2 {gmpy2.version()}; {args.key_bits}-bit keys; all parties in one process; randomisers "
          f"{'computed on demand' if args.no_precompute else 'computed ahead (reserve)'}; crypto workers per party: "
          f"{args.crypto_workers or 'one per core'}")
    header = (f"{'rows':>7} {'protocol':<34} {'total s':>8} {'keys':>6} {'ahead':>6} {'online':>7} "
              f"{'demand':>7} {'sums':>6} {'decrypt':>8} {'other':>6} {'MB a->p':>8} {'MB p->a':>8} "
              f"{'x plain':>8} {'x paillier':>10} {'same trees':>10}")
    print(header)
    results = []
    for n_rows in args.rows:
        active, passive = resample(n_rows)
        started = time.perf_counter()
        reference, plain_run = train_local(active, [passive], params)
        plain_seconds = time.perf_counter() - started
        expected = federated_descriptions(reference)
        print(f"{n_rows:>7} {'plain':<34} {plain_seconds:>8.2f} {'':>6} {'':>6} {'':>7} {'':>7} {'':>6} {'':>8} "
              f"{'':>6} {plain_run.traffic['bytes']['active_to_passive'] / 1e6:>8.2f} "
              f"{plain_run.traffic['bytes']['passive_to_active'] / 1e6:>8.2f} {1.0:>8.1f}", flush=True)
        paillier_seconds = None
        for name in args.runs:
            scheme, short = RUNS[name]
            options = ProtocolOptions(scheme=scheme, key_bits=args.key_bits, insecure_key_bits=args.key_bits < 2048,
                                      short_randomizer=short, precompute_randomizers=not args.no_precompute,
                                      crypto_workers=args.crypto_workers)
            started = time.perf_counter()
            model, run = train_local(active, [passive], params, "secureboost", options=options)
            seconds = time.perf_counter() - started
            phases = run.phases
            ahead = phases.get("randomizers ahead", 0.0)
            other = seconds - sum(v for k, v in phases.items() if k not in ("randomizers ahead", "randomizers on demand"))
            same = federated_descriptions(model) == expected
            if name == "paillier":
                paillier_seconds = seconds
            versus = f"{seconds / paillier_seconds:>10.3f}" if paillier_seconds else f"{'':>10}"
            sent, received = run.traffic["bytes"]["active_to_passive"], run.traffic["bytes"]["passive_to_active"]
            label = f"secureboost/{name} ({randomizer_bits(scheme, args.key_bits, short)} b)"
            print(f"{n_rows:>7} {label:<34} {seconds:>8.2f} {phases.get('key setup', 0):>6.2f} {ahead:>6.2f} "
                  f"{phases.get('encrypt', 0):>7.2f} {phases.get('randomizers on demand', 0):>7.2f} "
                  f"{phases.get('homomorphic sums', 0):>6.2f} {phases.get('decrypt', 0):>8.2f} {other:>6.2f} "
                  f"{sent / 1e6:>8.2f} {received / 1e6:>8.2f} {seconds / plain_seconds:>8.1f} {versus} "
                  f"{str(same):>10}", flush=True)
            results.append({"rows": n_rows, "run": name, "scheme": scheme, "randomizer_bits":
                            randomizer_bits(scheme, args.key_bits, short), "precompute": not args.no_precompute,
                            "seconds": seconds, "phases": phases, "other": other, "bytes": run.traffic["bytes"],
                            "plain_seconds": plain_seconds, "plain_bytes": plain_run.traffic["bytes"],
                            "versus_paillier": seconds / paillier_seconds if paillier_seconds else None,
                            "same_trees": same})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
