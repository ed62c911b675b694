"""Long fuzz run of the message decoders: ``python -m tests.fuzz --minutes 10``.

``--write-seeds`` (re)writes one valid frame per message type into the corpus. Crashing
inputs are saved into the corpus and reported; the exit code is 1 if there were any.
"""

import argparse
import os
import time
import traceback

import numpy as np

from .harness import CORPUS, check, corpus, save_crash, seed_frames
from .harness import mutate


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--write-seeds", action="store_true")
    args = parser.parse_args()
    if args.write_seeds:
        CORPUS.mkdir(exist_ok=True)
        for name, frame in seed_frames().items():
            (CORPUS / f"seed-{name}.bin").write_bytes(frame)
        print(f"wrote {len(seed_frames())} seeds to {CORPUS}")
        return 0
    entries = list(corpus().values())
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "big"))
    deadline = time.monotonic() + 60 * args.minutes
    runs = crashes = 0
    started = time.monotonic()
    while time.monotonic() < deadline:
        data = mutate(entries[int(rng.integers(0, len(entries)))], rng, entries)
        runs += 1
        try:
            check(data)
        except Exception:  # anything but ProtocolError is a decoder bug
            crashes += 1
            path = save_crash(data)
            print(f"CRASH saved to {path}:\n{traceback.format_exc(limit=3)}")
    seconds = time.monotonic() - started
    print(f"{runs:,} inputs in {seconds:.0f} s ({runs / seconds:,.0f}/s) from {len(entries)} corpus entries; "
          f"{crashes} crash(es)")
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
