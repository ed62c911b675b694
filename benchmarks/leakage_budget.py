"""The leakage budget, measured (issue #31): what the budget lets an attacker learn, what it
costs a bank, and why N-TEE cannot live within it.

Every figure comes from a real ``PassiveService`` built from its TOML config (its policy, its
row ledger, its strict enclave's sealed ledger), reached by the active party's own host code
(PSI, ``train_active``, ``strict_margin``, ``FederatedOracle``) over the in-memory channel; the
enclaves run on the SIMULATED backend (separate processes, no hardware isolation). Data: the
bundled Give Me Some Credit sample (20,000 rows; the passive party holds age, MonthlyIncome,
NumberOfDependents, NumberOfOpenCreditLinesAndLoans, NumberRealEstateLoansOrLines).

1. curve: ages within +-2 years, against the budget b (1, 2, 4, 8, 16 bits per row per day,
   the passive policy's output_bits = b): the best attack we built, beside an ideal attacker
   who learns, per row, which of 2**b equal-mass bins of the public age distribution the row
   falls in (and guesses the bin's median). The attack: the active host knows the ages of 1%
   of the rows, trains a strict regression model on those rows with age as its label (the
   passive age column is the best predictor of itself), scores every row once (b bits each),
   and decodes each released value to the median known age among the known rows that got
   the same value. Baseline: a random draw from the known ages.
2. quantization: held-out AUC of a strict model at full precision and with every output
   released at 4..12 bits (the same margins, quantized by ``teeboost.core.release``; one
   batch is also scored through the enclaves at 8 bits and must equal it).
3. a bank's day: a strict model at 100 trees x depth 6 (min_samples_leaf 20) under the
   passive party's default policy scores 10,000 applicants once; then the same model trained
   with N-TEE scores the same applicants, and the refusal is printed.

    python benchmarks/leakage_budget.py [--parts curve quantization day] [--plot docs/leakage-budget.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from teeboost.config import BoostParams, ProtocolOptions  # noqa: E402
from teeboost.core.release import quantize_margins  # noqa: E402
from teeboost.data import split_columns  # noqa: E402
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL,  # noqa: E402
                               GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit)
from teeboost.deploy.config import load_config  # noqa: E402
from teeboost.deploy.messages import Finish, PredictData, Setup  # noqa: E402
from teeboost.deploy.passive import PassiveService  # noqa: E402
from teeboost.errors import ProtocolError  # noqa: E402
from teeboost.federation import _environments, train_active  # noqa: E402
from teeboost.metrics import roc_auc  # noqa: E402
from teeboost.parties.active import FederatedOracle, ensemble_digest  # noqa: E402
from teeboost.parties.psi import intersect_as_active  # noqa: E402
from teeboost.protocols.strict.hosts import strict_margin  # noqa: E402
from teeboost.transport.inmemory import InMemoryChannel  # noqa: E402

BUDGETS = (1, 2, 4, 8, 16)


class Federation:
    """A passive party as deployed (config file, audit log, ledgers) and the active host's
    channel to it."""

    def __init__(self, workdir: Path, passive_frame, policy: str | None, protocols=("ntee", "strict")):
        workdir.mkdir(parents=True, exist_ok=True)
        passive_frame.to_csv(workdir / "passive.csv", index=False)
        table = "" if policy is None else f"[policy]\nprotocols = {json.dumps(list(protocols))}\n{policy}\n"
        (workdir / "passive.toml").write_text(
            '[party]\nname = "telco"\nrole = "passive"\nindex = 1\nlisten = "127.0.0.1:0"\ndata = "passive.csv"\n'
            'id_column = "id"\n[tls]\ninsecure = true\n' + table)
        self.envs = _environments(True, ProtocolOptions(allow_simulated_tee=True), 1, None)
        self.service = PassiveService(load_config(workdir / "passive.toml"))
        self.service.env = lambda: self.envs[1]
        self.channel = InMemoryChannel({1: self.service.handle})
        self.workdir = workdir

    def align(self, active, purpose):
        rows, _ = intersect_as_active(self.channel, active.ids, purpose, allow_empty=True)
        return active.take(rows)

    def train(self, active, params, protocol, labels=None, run_id="run-1"):
        aligned = self.align(active, "train")
        if labels is not None:
            aligned = dataclasses.replace(aligned, labels=labels(aligned))
        empty = np.empty(0, dtype=np.int64)
        self.channel.request_all({1: Setup(run_id, protocol, json.dumps(params.to_dict()), 1,
                                           np.arange(aligned.n_rows), empty, empty)})
        model, _ = train_active(aligned, self.channel, params, protocol, env=self.envs[0],
                                party_names={1: "telco"})
        self.channel.request_all({1: Finish(protocol)})
        return model

    def score(self, model, batch, protocol="strict"):
        batch = self.align(batch, "predict")
        self.channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
        if protocol == "strict":
            return batch, strict_margin(self.channel, self.envs[0], model.ensemble, model.owner, batch.features,
                                        "predict")
        oracle = FederatedOracle(self.channel, "predict", model.owner, batch.features)
        return batch, model.ensemble.margin(batch.n_rows, oracle)

    def close(self):
        self.service.close()


def parties():
    frame = load_give_me_some_credit()
    active, (passive,) = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL,
                                       id_column=GIVE_ME_SOME_CREDIT_ID)
    passive_frame = frame[[GIVE_ME_SOME_CREDIT_ID, *GIVE_ME_SOME_CREDIT_PASSIVE]].rename(
        columns={GIVE_ME_SOME_CREDIT_ID: "id"})
    return frame, active, passive, passive_frame


def within(guess, truth, years=2.0):
    return float(np.mean(np.abs(guess - truth) <= years))


def ideal(ages, bits, rng):
    """Per row, which of 2**bits equal-mass bins of the public distribution it is in; the
    guess is that bin's median."""
    edges = np.quantile(ages, np.linspace(0, 1, 2 ** bits + 1)[1:-1])
    bins = np.searchsorted(edges, ages, side="right")
    guess = np.zeros_like(ages)
    for b in np.unique(bins):
        guess[bins == b] = np.median(ages[bins == b])
    return within(guess, ages)


def curve(out, workroot: Path):
    frame, active, passive, passive_frame = parties()
    age = passive.features[:, list(passive.feature_names).index("age")]
    ages_by_id = dict(zip(passive.ids, age))
    rng = np.random.default_rng(0)
    known = rng.permutation(active.n_rows)[: active.n_rows // 100]  # the active host knows 1% of the ages
    known_ids = set(active.ids[known])
    known_active = active.take(np.sort(known))
    baseline = within(rng.choice(age[known], size=age.size), age)
    out(f"\n== 1. ages within +-2 y against the budget (1% of ages known: {known.size} rows; "
        f"a random draw from them: {baseline:.1%})")
    out(f"{'bits/row/day':>12} {'ideal':>8} {'attack':>8} {'distinct values':>16} {'rows scored':>12}")
    # of the settings tried (30-200 trees, depth 4-6, learning rate 0.1-0.5, subsample 0.5-1),
    # the one that recovered the most ages
    params = BoostParams(objective="regression", n_trees=150, max_depth=6, learning_rate=0.1, subsample=1.0,
                         min_samples_leaf=20, max_bin=32)
    rows = []
    for bits in BUDGETS:
        fed = Federation(workroot / f"curve-{bits}", passive_frame,
                         f"output_bits = {bits}\nmax_bits_per_row_per_day = {bits}", protocols=("strict",))
        model = fed.train(known_active, params, "strict", labels=lambda a: np.array([ages_by_id[i] for i in a.ids]))
        scored, released = fed.score(model, active)
        fed.close()
        truth = np.array([ages_by_id[i] for i in scored.ids])
        value = released[:, 0]
        is_known = np.array([i in known_ids for i in scored.ids])
        by_value = np.zeros_like(value)
        for v in np.unique(value):  # the median known age among known rows that got this value
            same = (value == v) & is_known
            if same.any():
                by_value[value == v] = np.median(truth[same])
            else:  # no known row got it: the nearest value that a known row got
                nearest = np.unique(value[is_known])[np.argmin(np.abs(np.unique(value[is_known]) - v))]
                by_value[value == v] = np.median(truth[(value == nearest) & is_known])
        # the attacker keeps whichever decoding does better on the rows it knows: the released
        # value itself (a regression on age) or the known rows' median per released value
        decoded = max((value, by_value), key=lambda d: within(d[is_known], truth[is_known]))
        attack = within(decoded[~is_known], truth[~is_known])
        best = ideal(age, bits, rng)
        rows.append({"bits": bits, "ideal": best, "attack": attack, "distinct": int(np.unique(value).size),
                     "rows": int(value.size)})
        out(f"{bits:>12} {best:>8.1%} {attack:>8.1%} {np.unique(value).size:>16} {value.size:>12}")
    return {"baseline": baseline, "points": rows}


def quantization(out, workroot: Path):
    frame, active, passive, passive_frame = parties()
    rng = np.random.default_rng(1)
    order = rng.permutation(active.n_rows)
    train_rows, test_rows = np.sort(order[: int(0.7 * order.size)]), np.sort(order[int(0.7 * order.size):])
    params = BoostParams(n_trees=100, max_depth=6, min_samples_leaf=20, subsample=0.8, max_bin=32)
    fed = Federation(workroot / "quantization", passive_frame, "max_bits_per_row_per_day = 8")
    started = time.perf_counter()
    model = fed.train(active.take(train_rows), params, "strict")
    seconds = time.perf_counter() - started
    test = active.take(test_rows)
    scored, released = fed.score(model, test)  # through the enclaves: the default policy's 8 bits
    config = fed.service.config
    fed.close()
    from teeboost.federation import FederatedModel
    from teeboost.model_files import load_passive, passive_file

    passive_model = load_passive(config.model_dir / passive_file(1))  # the passive party's saved model file
    full_model = FederatedModel(model, [passive_model], ProtocolOptions(allow_simulated_tee=True))
    passive_rows = passive.take(np.array([list(passive.ids).index(i) for i in scored.ids]))
    margin, _ = full_model.predict_margin(scored.features, [passive_rows.features])  # full precision, one operator
    assert np.array_equal(quantize_margins(model.ensemble, margin, 8), released), "the enclave's 8 bits differ"
    y = (scored.labels.astype(float) > 0).astype(int)
    full = roc_auc(y, margin[:, 0])
    out(f"\n== 2. held-out AUC, strict 100 trees x depth 6 (trained in {seconds:.1f} s on {train_rows.size} rows; "
        f"{scored.n_rows} held-out rows)")
    out(f"{'precision':>12} {'AUC':>8} {'difference':>11} {'distinct values':>16}")
    out(f"{'full':>12} {full:>8.5f} {0:>11.5f} {np.unique(margin).size:>16}")
    rows = [{"bits": None, "auc": full}]
    for bits in (4, 6, 8, 10, 12):
        quantized = quantize_margins(model.ensemble, margin, bits)
        auc = roc_auc(y, quantized[:, 0])
        rows.append({"bits": bits, "auc": auc, "difference": auc - full})
        out(f"{bits:>12} {auc:>8.5f} {auc - full:>+11.5f} {np.unique(quantized).size:>16}")
    out("  (8 bits through the enclaves equals the quantized full-precision margins: checked)")
    return rows


def bank_day(out, workroot: Path):
    frame, active, passive, passive_frame = parties()
    rng = np.random.default_rng(2)
    order = rng.permutation(active.n_rows)
    history, applicants = active.take(np.sort(order[:10_000])), active.take(np.sort(order[10_000:]))
    params = BoostParams(n_trees=100, max_depth=6, min_samples_leaf=20, subsample=0.8, max_bin=32)
    out(f"\n== 3. a bank's day: train on 10,000 customers, score {applicants.n_rows} applicants once "
        "(the passive party's default policy: no [policy] table except the protocols it serves)")
    report = {}
    for protocol in ("strict", "ntee"):
        fed = Federation(workroot / f"day-{protocol}", passive_frame, "", protocols=("ntee", "strict"))
        started = time.perf_counter()
        model = fed.train(history, params, protocol)
        trained = time.perf_counter() - started
        started = time.perf_counter()
        try:
            scored, margin = fed.score(model, applicants, protocol)
            outcome = f"scored {scored.n_rows} applicants in {time.perf_counter() - started:.1f} s"
            refused = None
        except ProtocolError as exc:
            outcome, refused = "REFUSED", str(exc)
        day = fed.service.ledger.day()
        charged = [json.loads(line) for line in (fed.workdir / "audit-telco.jsonl").read_text().splitlines()
                   if '"charged"' in line]
        fed.close()
        largest = charged[-1]["window_largest_per_row"] if charged else day["largest_per_row"]
        out(f"  {protocol:>6}: trained in {trained:.1f} s; {outcome}; largest bits per row today: {largest} "
            f"(budget 8)")
        if refused:
            out(f"          the refusal: {refused}")
        report[protocol] = {"trained_seconds": trained, "outcome": outcome, "largest_bits_per_row": largest,
                            "refusal": refused}
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["curve", "quantization", "day"],
                        choices=["curve", "quantization", "day"])
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "leakage-budget.png")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    out = lambda text: print(text, flush=True)  # noqa: E731
    out("teeboost leakage budget benchmark (enclaves: SIMULATED backend)")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "curve" in args.parts:
            results["curve"] = curve(out, Path(tmp))
            plot(results["curve"], args.plot)
            out(f"  plot: {args.plot}")
        if "quantization" in args.parts:
            results["quantization"] = quantization(out, Path(tmp))
        if "day" in args.parts:
            results["day"] = bank_day(out, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def plot(result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = result["points"]
    bits = [p["bits"] for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(bits, [100 * p["ideal"] for p in points], "o-", label="ideal attacker (2^b quantile bins)")
    ax.plot(bits, [100 * p["attack"] for p in points], "s-", label="best attack built (strict model, 1% known)")
    ax.axhline(100 * result["baseline"], color="grey", ls="--", label="random draw from the known 1%")
    ax.set_xscale("log", base=2)
    ax.set_xticks(bits, [str(b) for b in bits])
    ax.set_xlabel("budget: bits per row per day (= output_bits, one score per row)")
    ax.set_ylabel("ages within +-2 years (%)")
    ax.set_ylim(0, 100)
    ax.set_title("What the leakage budget lets the active party learn\n(bundled Give Me Some Credit; simulated enclaves)", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
