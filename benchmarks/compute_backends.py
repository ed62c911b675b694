"""Ray against this machine's process pool: SecureBoost's encryption throughput, and what
each kind of task costs (the figures docs/scaling.md plans a multi-node cluster with).

Both backends get the same CPUs: the process pool runs ``--workers`` processes; Ray is a
private local instance started with ``num_cpus = --workers``. SecureBoost's encryption is
timed as the active party runs it for one tree of ``--rows`` rows: one plaintext per row
(g and h packed into one, as by default), through ``CryptoPool.encrypt`` with no
randomisers computed ahead, under a 2048-bit key. Each pool first builds its fixed-base
tables (timed apart as "set-up"), then encrypts ``--repeats`` times; the best time counts
and the overhead is Ray's best over the pool's best, minus one. Ciphertexts are checked to
decrypt to the plaintexts.

End to end: SecureBoost on Okamoto-Uchiyama trains on ``--rows`` rows (5 trees, depth 3,
both parties in this process) once with every party on the process pool and once with every
party on Ray; the trees must be identical and the ratio of total times is printed.

Per-task costs: a job's round trip when jobs run one at a time; jobs per second when many
small jobs are queued; moving a 16 MB argument to a job; storing and reading a 64 MB row
shard in Ray's object store; one passive bin-sum job per row; decryption per ciphertext.

Two nodes (``--two-nodes``): Ray's own test cluster starts two raylets on this machine, one
CPU each, each with its own object store, and the same figures are taken across them: a job on
the other node reading a 64 MB shard stored on this one goes through Ray's object transfer
(over loopback here, over the network between hosts), and the encryption runs with one
worker per node.

    python benchmarks/compute_backends.py [--rows 100000] [--workers 2] [--scheme paillier ou]
                                          [--two-nodes]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from teeboost.compute import ComputeOptions, LocalBackend, RowShards, open_backend
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.crypto.pool import CryptoPool
from teeboost.crypto.randomizer_length import randomizer_bits
from teeboost.crypto.schemes import generate_keypair
from teeboost.federation import train_local

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.secureboost import resample  # noqa: E402
from tests.helpers import federated_descriptions  # noqa: E402

PLAINTEXT_BITS = 106  # g and h in one plaintext: two 53-bit slots, SecureBoost's packing at 1e5 rows


def best(times: list[float]) -> float:
    return min(times)


def time_encryption(backend, key, plaintexts: list[int], repeats: int, workers: int) -> dict:
    started = time.perf_counter()
    pool = CryptoPool(key, workers=workers, pool_id=f"bench-{uuid.uuid4().hex}", backend=backend)
    # every worker builds its tables before (Ray: at) its first job; a small warm-up reaches them all
    pool.encrypt(plaintexts[:workers * 8 * 64])
    setup = time.perf_counter() - started
    runs = []
    ciphertexts = None
    for _ in range(repeats):
        started = time.perf_counter()
        ciphertexts = pool.encrypt(plaintexts)
        runs.append(time.perf_counter() - started)
    check = np.random.default_rng(1).choice(len(plaintexts), 256, replace=False)
    assert pool.decrypt(ciphertexts[check]) == [plaintexts[i] for i in check], "ciphertexts do not decrypt"
    decrypt_started = time.perf_counter()
    pool.decrypt(ciphertexts[:4096])
    decrypt_seconds = (time.perf_counter() - decrypt_started) / 4096
    pool.close()
    return {"setup_s": round(setup, 3), "encrypt_s": [round(t, 3) for t in runs], "best_s": round(best(runs), 3),
            "per_second": round(len(plaintexts) / best(runs)), "decrypt_us_per_ct": round(decrypt_seconds * 1e6, 1)}


def task_costs(backend, workers: int) -> dict:
    pool = backend.pool(workers)
    pool.map(abs, range(workers * 4))  # workers started
    trips = []
    for i in range(200):
        started = time.perf_counter()
        pool.map(abs, [i])
        trips.append(time.perf_counter() - started)
    started = time.perf_counter()
    pool.map(abs, range(5000))
    per_job = (time.perf_counter() - started) / 5000
    block = np.ones(16 << 20, dtype=np.uint8)
    moves = []
    for _ in range(5):
        started = time.perf_counter()
        pool.map(len, [block])
        moves.append(time.perf_counter() - started)
    out = {"round_trip_ms": round(statistics.median(trips) * 1e3, 3),
           "queued_job_us": round(per_job * 1e6, 1),
           "ship_16mb_ms": round(min(moves) * 1e3, 1)}
    if backend.by_reference:
        shard = np.ones(64 << 20, dtype=np.uint8)
        puts, gets = [], []
        for _ in range(5):
            started = time.perf_counter()
            ref = backend.put(shard)
            puts.append(time.perf_counter() - started)
            started = time.perf_counter()
            pool.map(len, [ref])
            gets.append(time.perf_counter() - started)
            del ref
        out["put_64mb_ms"] = round(min(puts) * 1e3, 1)
        out["job_on_stored_64mb_ms"] = round(min(gets) * 1e3, 1)
    pool.close()
    return out


def bin_sum_cost(backend, key, workers: int, rows: int, features: int = 5, width: int = 33) -> dict:
    """A passive party's level work: ciphertext products per feature x bin over one node's rows."""
    pool = CryptoPool(key.public, workers=workers, pool_id=f"bench-sums-{uuid.uuid4().hex}", backend=backend)
    rng = np.random.default_rng(2)
    one = key.public.ciphertext_bytes
    cts = rng.integers(0, 256, (rows, 1, one), dtype=np.uint8)
    cts[:, 0, 0] = 0  # below n^2
    bins = rng.integers(0, width, (features, rows), dtype=np.uint8)
    started = time.perf_counter()
    ct_shards = RowShards.split(backend, cts, backend.shard_rows)
    bin_shards = RowShards.split(backend, bins, backend.shard_rows, axis=1)
    store = time.perf_counter() - started
    node = np.sort(rng.choice(rows, rows // 2, replace=False))
    pool.bin_sums_sharded(ct_shards, bin_shards, node[:4096], width)  # warm-up
    started = time.perf_counter()
    pool.bin_sums_sharded(ct_shards, bin_shards, node, width)
    seconds = time.perf_counter() - started
    pool.close()
    return {"store_shards_s": round(store, 3), "node_rows": int(node.size), "node_s": round(seconds, 3),
            "us_per_row_feature": round(seconds / node.size / features * 1e6, 2)}


def end_to_end(rows: int, workers: int, key_bits: int) -> dict:
    active, passive = resample(rows)
    options = ProtocolOptions(scheme="ou", key_bits=key_bits, insecure_key_bits=key_bits < 2048)
    out, models = {}, {}
    for name, compute in (("process pool", ComputeOptions(workers=workers)),
                          ("ray", ComputeOptions(backend="ray", workers=workers))):
        started = time.perf_counter()
        small = BoostParams(n_trees=5, max_depth=3, subsample=0.8, max_bin=32)  # the measured (seed paper's) setting
        models[name], run = train_local(active, [passive], small, "secureboost", options=options, compute=compute)
        out[name] = {"total_s": round(time.perf_counter() - started, 2), "phases": run.phases}
    out["same_trees"] = federated_descriptions(models["ray"]) == federated_descriptions(models["process pool"])
    out["ray_ratio"] = round(out["ray"]["total_s"] / out["process pool"]["total_s"], 3)
    return out


def _length(value) -> int:
    return len(value)


def two_nodes(key_bits: int, rows: int, plaintexts: list[int]) -> dict:
    """Figures across two raylets (two nodes) on this machine; see the module docstring."""
    import ray
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"head_node": 1}})
    cluster.add_node(num_cpus=1, resources={"other_node": 1})
    cluster.wait_for_nodes()
    try:
        backend = open_backend(ComputeOptions(backend="ray", address=cluster.address))
        size = ray.remote(_length)
        shard = np.ones(64 << 20, dtype=np.uint8)
        reads = {}
        for where in ("head_node", "other_node"):
            times = []
            for _ in range(5):
                ref = ray.put(shard)
                started = time.perf_counter()
                ray.get(size.options(resources={where: 0.01}).remote(ref))
                times.append(time.perf_counter() - started)
                del ref
            reads[where] = round(min(times[1:]) * 1e3, 1)  # the first read also starts a worker
        trips = []
        ray.get(size.options(resources={"other_node": 0.01}).remote([1]))
        for _ in range(50):
            started = time.perf_counter()
            ray.get(size.options(resources={"other_node": 0.01}).remote([1]))
            trips.append(time.perf_counter() - started)
        key = generate_keypair("ou", key_bits, insecure_key_bits=key_bits < 2048)
        encryption = time_encryption(backend, key, plaintexts, 2, 2)
        return {"describe": backend.describe(), "read_64mb_same_node_ms": reads["head_node"],
                "read_64mb_other_node_ms": reads["other_node"],
                "round_trip_other_node_ms": round(statistics.median(trips) * 1e3, 3),
                "ou_encryption": encryption}
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scheme", nargs="+", default=["paillier"], choices=("paillier", "ou"))
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--two-nodes", action="store_true", help="also measure across two raylets on this machine")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results-compute.txt"))
    args = parser.parse_args()

    local = LocalBackend(args.workers)
    ray = open_backend(ComputeOptions(backend="ray", num_cpus=args.workers, workers=args.workers))
    rng = np.random.default_rng(0)
    slots = rng.integers(0, 1 << (PLAINTEXT_BITS // 2), (args.rows, 2), dtype=np.int64).tolist()
    plaintexts = [(g << (PLAINTEXT_BITS // 2)) | h for g, h in slots]
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    say(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
        f"{args.workers} workers each; {ray.describe()}")
    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "workers": args.workers,
                           "ray": ray.describe()}, "rows": args.rows, "encryption": {}}
    for scheme in args.scheme:
        key = generate_keypair(scheme, args.key_bits, insecure_key_bits=args.key_bits < 2048)
        row = {}
        # alternate the backends so a slow patch of the machine does not favour one
        for name, backend in (("process pool", local), ("ray", ray)):
            row[name] = time_encryption(backend, key, plaintexts, args.repeats, args.workers)
        row["ray_overhead"] = round(row["ray"]["best_s"] / row["process pool"]["best_s"] - 1, 4)
        row["exponent_bits"] = randomizer_bits(scheme, args.key_bits, None)
        results["encryption"][scheme] = row
        say(f"{scheme} {args.key_bits}-bit, {args.rows:,} encryptions on {args.workers} workers "
              f"({row['exponent_bits']}-bit random exponents):")
        for name in ("process pool", "ray"):
            r = row[name]
            say(f"  {name:<13} set-up {r['setup_s']:6.2f} s   encrypt best {r['best_s']:7.2f} s "
                  f"({r['per_second']:,}/s; runs {r['encrypt_s']})   decrypt {r['decrypt_us_per_ct']} us/ct")
        say(f"  Ray's overhead on encryption: {row['ray_overhead'] * 100:+.1f}% (target <= +15%)")
    results["end_to_end"] = run = end_to_end(args.rows, args.workers, args.key_bits)
    say(f"SecureBoost-OU end to end, {args.rows:,} rows, 5 trees: process pool {run['process pool']['total_s']} s, "
        f"Ray {run['ray']['total_s']} s ({run['ray_ratio']}x), same trees: {run['same_trees']}")
    key = generate_keypair("paillier", args.key_bits, insecure_key_bits=args.key_bits < 2048)
    results["tasks"] = {"process pool": task_costs(local, args.workers), "ray": task_costs(ray, args.workers)}
    results["bin_sums"] = {"process pool": bin_sum_cost(local, key, args.workers, args.rows),
                           "ray": bin_sum_cost(ray, key, args.workers, args.rows)}
    say("per-task costs:")
    for name in ("process pool", "ray"):
        say(f"  {name:<13} {json.dumps(results['tasks'][name])}")
    say(f"passive bin sums (one node of half the rows, 5 features, 33 bins, {args.key_bits}-bit Paillier):")
    for name in ("process pool", "ray"):
        say(f"  {name:<13} {json.dumps(results['bin_sums'][name])}")
    if args.two_nodes:
        results["two_nodes"] = nodes = two_nodes(args.key_bits, args.rows, plaintexts)
        say(f"two nodes ({nodes['describe']}): a job reading a 64 MB shard stored on its own node "
            f"{nodes['read_64mb_same_node_ms']} ms, on the other node {nodes['read_64mb_other_node_ms']} ms; "
            f"round trip of a job on the other node {nodes['round_trip_other_node_ms']} ms; "
            f"OU encryption of {args.rows:,} rows, one worker per node: {nodes['ou_encryption']['best_s']} s "
            f"({nodes['ou_encryption']['per_second']:,}/s)")
    args.out.write_text("\n".join(lines) + "\n\n" + json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
