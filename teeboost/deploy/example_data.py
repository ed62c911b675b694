"""The bundled Give Me Some Credit sample as each organisation's own CSV file, so a federation
can be tried across processes (``teeboost example-data``, ``teeboost demo``).

Like real partners, the parties hold different columns about customers that only partly
overlap: the active party the label and five columns, each passive party its share of the
other five, each missing a different 5% of the ids and ordering its rows its own way. Some
customers can be set aside as new rows the active party later wants scored: they leave its
training file (label dropped) but stay in every passive party's file, as a partner's
customer base would hold them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit
from ..errors import ConfigError

__all__ = ["party_frames", "write_example_data"]

_KEPT = 0.95  # share of all ids each party holds


def party_frames(n_passive: int = 1, *, seed: int = 0, rows: int | None = None) -> dict[str, pd.DataFrame]:
    """Each party's rows by party name ("active", "passive-1", ...), from the first ``rows``
    rows of the sample (all by default)."""
    frame = load_give_me_some_credit()
    if rows is not None:
        frame = frame.iloc[:rows]
    rng = np.random.default_rng(seed)
    n = len(frame)
    passive_groups = np.array_split(np.array(GIVE_ME_SOME_CREDIT_PASSIVE), n_passive)
    active_columns = [c for c in frame.columns if c not in GIVE_ME_SOME_CREDIT_PASSIVE]
    frames = {}
    for k, name in enumerate(["active"] + [f"passive-{i}" for i in range(1, n_passive + 1)]):
        keep = np.sort(rng.permutation(n)[: int(n * _KEPT)])
        columns = active_columns if k == 0 else [GIVE_ME_SOME_CREDIT_ID, *passive_groups[k - 1]]
        frames[name] = frame.iloc[keep][columns].sample(frac=1.0, random_state=k)
    return frames


def write_example_data(out: Path, n_passive: int = 1, *, seed: int = 0, rows: int | None = None,
                       new_rows: int = 0, force: bool = False) -> dict[str, Path]:
    """Write ``<name>.csv`` per party and, with ``new_rows``, ``new.csv``: that many customers
    held by every party, taken out of the active party's file, without their label."""
    total = len(load_give_me_some_credit())
    if not 1 <= n_passive <= len(GIVE_ME_SOME_CREDIT_PASSIVE):
        raise ConfigError(f"--passive-parties {n_passive}: the sample has {len(GIVE_ME_SOME_CREDIT_PASSIVE)} passive "
                          "columns, so 1 to 5 passive parties")
    if rows is not None and not 100 <= rows <= total:
        raise ConfigError(f"--rows {rows}: the bundled sample has {total:,} rows; take 100 to {total}")
    if not 0 <= new_rows <= (rows or total) // 4:
        raise ConfigError(f"--new-rows {new_rows}: set aside at most a quarter of the {rows or total} rows")
    frames = party_frames(n_passive, seed=seed, rows=rows)
    targets = {name: out / f"{name}.csv" for name in frames}
    if new_rows:
        targets["new"] = out / "new.csv"
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not force:
        raise ConfigError(f"{', '.join(existing)} already exist(s): choose another --out, or --force to replace")
    if new_rows:
        held_by_all = set.intersection(*(set(f[GIVE_ME_SOME_CREDIT_ID]) for f in frames.values()))
        active = frames["active"]
        candidates = active[active[GIVE_ME_SOME_CREDIT_ID].isin(held_by_all)]
        new = candidates.sample(n=new_rows, random_state=seed + 1)
        frames["active"] = active.drop(index=new.index)
        frames["new"] = new.drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.to_csv(targets[name], index=False)
    return targets
