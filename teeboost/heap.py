"""Long-running processes leave what they loaded at start-up out of the garbage collector's full passes.

A full (generation 2) collection walks every tracked object. In ``teeboost serve`` that is about
110,000 objects of imported libraries and the loaded model: some 60-70 ms on this project's
machine, run every few seconds under load, which was the p99 of online scoring
(benchmarks/serving.py). ``gc.freeze()`` moves what exists now into a permanent generation that
collections skip; whatever is made later is collected as usual.
"""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> None:
    """Collect once, then freeze what survives: call when start-up (or a large load) is done."""
    gc.collect()
    gc.freeze()
