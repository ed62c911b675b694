"""What checkpointing costs and what resuming saves: training with and without a checkpoint
after every round, checkpoint sizes, and a run interrupted after half its trees and resumed
(checked to end with the uninterrupted run's model files).

Rows resampled from the bundled Give Me Some Credit sample, 5/5 features, depth 3, lr 0.3,
subsample 0.8, 32 bins, all parties in this process (in-memory channel), simulated enclaves.

    python benchmarks/checkpoint.py [--rows 100000] [--trees 10] [--protocols plain ntee onetee]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from teeboost.checkpoint import active_checkpoint_file, passive_checkpoint_file
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.federation import train_local

sys.path.insert(0, str(Path(__file__).resolve().parent))
from protocols import resample  # noqa: E402


class Interrupt(Exception):
    pass


def model_bytes(model, directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in model.save(directory)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--protocols", nargs="+", default=["plain", "ntee", "onetee"])
    args = parser.parse_args()
    params = BoostParams(n_trees=args.trees, max_depth=3, learning_rate=0.3, subsample=0.8, max_bin=32)
    active, passive = resample(args.rows)
    print(f"{args.rows:,} rows, {args.trees} trees; seconds are best of 2 (simulated enclaves, in-memory channel)")
    print(f"{'protocol':10s} {'no ckpt s':>10s} {'ckpt s':>8s} {'overhead':>9s} {'active ckpt':>12s} "
          f"{'passive ckpt':>13s} {'resume s':>9s} {'same model':>10s}")
    for protocol in args.protocols:
        options = ProtocolOptions(allow_simulated_tee=True)
        work = Path(tempfile.mkdtemp(prefix="teeboost-ckpt-"))
        try:
            plain_times, ckpt_times = [], []
            for attempt in range(2):
                started = time.perf_counter()
                reference, _ = train_local(active, [passive], params, protocol, options=options)
                plain_times.append(time.perf_counter() - started)
                directory = work / f"ckpt-{attempt}"
                started = time.perf_counter()
                train_local(active, [passive], params, protocol, options=options, checkpoint_dir=directory)
                ckpt_times.append(time.perf_counter() - started)
            sizes = (active_checkpoint_file(work / "ckpt-0").stat().st_size,
                     passive_checkpoint_file(work / "ckpt-0", 1).stat().st_size)

            def stop_half(progress):
                if progress.tree_index + 1 == args.trees // 2 + 1:
                    raise Interrupt

            directory = work / "interrupted"
            try:
                train_local(active, [passive], params, protocol, options=options, checkpoint_dir=directory,
                            on_tree=stop_half)
            except Interrupt:
                pass
            started = time.perf_counter()
            resumed, _ = train_local(active, [passive], params, protocol, options=options, checkpoint_dir=directory,
                                     resume=True)
            resume_seconds = time.perf_counter() - started
            same = model_bytes(resumed, work / "a") == model_bytes(reference, work / "b")
            base, with_ckpt = min(plain_times), min(ckpt_times)
            print(f"{protocol:10s} {base:10.2f} {with_ckpt:8.2f} {100 * (with_ckpt / base - 1):8.1f}% "
                  f"{sizes[0] / 1e6:10.2f}MB {sizes[1] / 1e3:11.1f}kB {resume_seconds:9.2f} {str(same):>10s}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
