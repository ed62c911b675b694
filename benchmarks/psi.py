"""ECDH private set intersection (ristretto255) at scale: wall time and bytes.

Two parties in one process over the in-memory channel (every message serialised and counted);
ids overlap by ``--overlap``; blinding uses one worker process per core.

    python benchmarks/psi.py [--ids 100000] [--overlap 0.8] [--batch 1000]

Then a prediction batch of ``--batch`` ids is aligned the same way (every batch is aligned by
PSI): the passive party re-blinds its whole set with a fresh scalar (its hashed ids are kept),
so a batch costs about one blinding of the passive set, whatever its own size.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from teeboost.parties.psi import PsiPassive, intersect_as_active
from teeboost.transport.inmemory import InMemoryChannel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=100_000)
    parser.add_argument("--overlap", type=float, default=0.8)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    n = args.ids
    shared = int(n * args.overlap)
    rng = np.random.default_rng(0)
    active_ids = np.array([f"customer-{i}" for i in rng.permutation(n)], dtype=object)
    passive_ids = np.array([f"customer-{i}" for i in rng.permutation(np.r_[np.arange(shared), np.arange(n, 2 * n - shared)])],
                           dtype=object)
    passive = PsiPassive(passive_ids)
    channel = InMemoryChannel({1: passive.handle})
    started = time.perf_counter()
    rows, sizes = intersect_as_active(channel, active_ids)
    seconds = time.perf_counter() - started
    aligned = passive.rows["train"]
    assert rows.size == shared and sorted(passive_ids[aligned]) == sorted(active_ids[rows])
    assert list(passive_ids[aligned]) == list(active_ids[rows])  # same rows, same order
    traffic = channel.traffic.to_dict()
    print(f"{os.cpu_count()} cores; {n:,} x {n:,} ids, {shared:,} shared: {seconds:.1f} s, "
          f"{traffic['bytes_total'] / 1e6:.1f} MB ({traffic['bytes']['active_to_passive'] / 1e6:.1f} MB active->passive, "
          f"{traffic['bytes']['passive_to_active'] / 1e6:.1f} MB back); intersection verified")
    batch = active_ids[: args.batch]
    before = channel.traffic.total
    started = time.perf_counter()
    batch_rows, _ = intersect_as_active(channel, batch, "predict", allow_empty=True)
    batch_seconds = time.perf_counter() - started
    assert list(passive_ids[passive.rows["predict"]]) == list(batch[batch_rows])
    print(f"prediction batch of {batch.size:,} ids against {n:,}: {batch_rows.size:,} shared, {batch_seconds:.1f} s "
          f"({batch_seconds / seconds:.2f} of the training alignment), "
          f"{(channel.traffic.total - before) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
