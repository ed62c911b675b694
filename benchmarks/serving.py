"""Online scoring under load: ``teeboost serve`` in front of a passive party holding 1e4 or 1e6 ids.

Per protocol (ntee, strict): the loopback federation of ``teeboost demo`` (each party its own
OS process, gRPC with mutual TLS, simulated enclaves) trains a model of ``--trees`` x
``--depth`` (XGBoost's 100 x 6 by default) on the first ``--train-rows`` rows of the bundled
sample; then the passive party's data file is replaced by one holding ``--sizes`` ids (its own
rows plus made-up customers drawn from them), and ``teeboost serve --config`` scores the
customers both parties hold. The load generator is wrk (C, one thread, its own process), with
four cases per size: ``--clients`` connections sending single-row requests back to back (as
fast as the service answers); the same connections each pausing ``--pause-ms`` after every
answer (a paced load); one connection alone (nothing to batch with: each request pays every
round trip and byte itself); and ``--bulk-clients`` connections sending ``--bulk-rows``-row
requests. Bytes between the parties come from the service's own counter
(``teeboost_party_bytes_total`` in /metrics), per request.

Every duration is wall time on this machine, with the service, the passive party, its enclaves
and the load generator sharing its cores. One JSON line per case goes to
``benchmarks/results-serving.jsonl`` (``--out``).

    python benchmarks/serving.py                       # ntee and strict, 1e4 and 1e6 ids
    python benchmarks/serving.py --protocols ntee --sizes 10000 --seconds 5   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation  # noqa: E402

WRK_SCRIPT = r"""
local bodies = {}
for line in io.lines(os.getenv("TEEBOOST_BODIES")) do bodies[#bodies + 1] = line end
local pause = tonumber(os.getenv("TEEBOOST_PAUSE_MS") or "0")
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  return wrk.format(nil, "/v1/score", nil, bodies[(counter * 7919) % #bodies + 1])
end
delay = function() return pause end
response = function(status, headers, body)
  if status == 200 and not string.find(body, '"status":"scored"', 1, true) then unscored = (unscored or 0) + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format('{"requests": %d, "seconds": %.3f, "p50_ms": %.3f, "p99_ms": %.3f, "non2xx": %d, '
    .. '"socket_errors": %d}\n', summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(99) / 1e3, summary.errors.status, summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout))
end
"""


def cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True, **kwargs)


def metric(url: str, name: str, **labels: str) -> float:
    """The sum of /metrics samples of ``name`` whose labels include ``labels``."""
    import httpx

    total = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        key, _, value = line.rpartition(" ")
        series, _, rest = key.partition("{")
        found = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if series == name and all(found.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


def load(url: str, model: str, rows: list, clients: int, per_request: int, seconds: float, workdir: Path,
         pause_ms: float = 0.0) -> dict:
    """wrk (a load generator in C, one thread): ``clients`` connections, each sending its next
    request as soon as the last is answered (``pause_ms`` 0: as fast as the service goes) or
    that long after it."""
    bodies = workdir / f"bodies-{per_request}.jsonl"
    if not bodies.exists():
        with bodies.open("w") as out:
            for i in range(len(rows)):
                out.write(json.dumps({"model": model, "rows": [rows[(i + j) % len(rows)]
                                                               for j in range(per_request)]}) + "\n")
    script = workdir / "score.lua"
    script.write_text(WRK_SCRIPT)
    env = {**os.environ, "TEEBOOST_BODIES": str(bodies), "TEEBOOST_PAUSE_MS": str(pause_ms)}
    done = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--timeout", "10s", "-s", str(script), url],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def passive_file(workdir: Path, size: int, seed: int = 0) -> int:
    """The passive party's data with ``size`` ids: its own rows, then made-up customers drawn
    from them (a new id each), written under another name and renamed into place."""
    own = pd.read_csv(workdir / "passive-1.original.csv", dtype={"id": str})
    extra = size - len(own)
    if extra > 0:
        rng = np.random.default_rng(seed)
        made = own.iloc[rng.integers(0, len(own), extra)].copy()
        made["id"] = [f"synthetic-{i}" for i in range(extra)]
        own = pd.concat([own, made], ignore_index=True)
    else:
        own = own.iloc[:size]
    tmp = workdir / "passive-1.csv.tmp"
    own.to_csv(tmp, index=False)
    os.replace(tmp, workdir / "passive-1.csv")
    return len(own)


def start_serve(config: Path, workdir: Path) -> tuple[subprocess.Popen, str]:
    ready = workdir / "serve.ready"
    ready.unlink(missing_ok=True)
    log = (workdir / "serve.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "teeboost.cli", "serve", "--config", str(config), "--port", "0",
                                "--ready-file", str(ready), "--allow-simulated-tee", "--max-rows", "1000"],
                               stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"teeboost serve did not start: {(workdir / 'serve.log').read_text()[-3000:]}")
        time.sleep(0.2)
    return process, json.loads(ready.read_text())["url"]


def case(url: str, rows: list, seconds: float, workdir: Path, protocol: str, size: int, per_request: int,
         clients: int, pause_ms: float = 0.0) -> dict:
    before_bytes = metric(url, "teeboost_party_bytes_total")
    before_rows = {how: metric(url, "teeboost_serve_rows_total", how=how) for how in ("federated", "fallback", "error")}
    result = load(url, "default", rows, clients, per_request, seconds, workdir, pause_ms)
    sent = metric(url, "teeboost_party_bytes_total") - before_bytes
    requests = result["requests"]
    return {"protocol": protocol, "passive_ids": size, "rows_per_request": per_request, "clients": clients,
            "pause_ms": pause_ms, "requests": requests, "non_2xx": result["non2xx"],
            "socket_errors": result["socket_errors"],
            "rows": {how: int(metric(url, "teeboost_serve_rows_total", how=how) - n) for how, n in before_rows.items()},
            "p50_ms": round(result["p50_ms"], 2), "p99_ms": round(result["p99_ms"], 2),
            "requests_per_s": round(requests / result["seconds"], 1),
            "rows_per_s": round(requests * per_request / result["seconds"], 1),
            "bytes_per_request": round(sent / max(1, requests), 1), "seconds": round(result["seconds"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--protocols", nargs="+", default=["ntee", "strict"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 1_000_000])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--train-rows", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--bulk-clients", type=int, default=4)
    parser.add_argument("--bulk-rows", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--pause-ms", type=float, default=50.0,
                        help="the paced case: each client waits this long after each answer")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-serving.jsonl")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="teeboost-serving-"))
    configs = write_federation(workdir, training={"n_trees": args.trees, "max_depth": args.depth,
                                                  "learning_rate": 0.3, "max_bin": 256, "subsample": 1.0},
                               rows=args.train_rows)
    passive = configs["passive-1"]
    # the bench scores the same customers over and over: a budget far above a real party's
    passive.write_text(re.sub(r"max_bits_per_row_per_day = \d+", "max_bits_per_row_per_day = 1000000000",
                              passive.read_text()))
    os.replace(workdir / "passive-1.csv", workdir / "passive-1.original.csv")
    (workdir / "passive-1.csv").write_bytes((workdir / "passive-1.original.csv").read_bytes())
    process, address = start_passive(passive, workdir / "passive-1.address", workdir / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    active = pd.read_csv(workdir / "active.csv", dtype={"id": str})
    shared = active[active["id"].isin(pd.read_csv(workdir / "passive-1.original.csv", dtype={"id": str})["id"])]
    features = [c for c in shared.columns if c not in ("id", "SeriousDlqin2yrs")]
    rows = [{"id": r["id"], "features": {c: (None if pd.isna(r[c]) else float(r[c])) for c in features}}
            for r in shared.head(2000).to_dict("records")]
    results = []
    try:
        for protocol in args.protocols:
            (workdir / "passive-1.csv").write_bytes((workdir / "passive-1.original.csv").read_bytes())
            started = time.perf_counter()
            trained = cli("party", "--config", str(configs["active"]), "--protocol", protocol, "--json")
            if trained.returncode:
                raise SystemExit(trained.stderr)
            print(f"{protocol}: trained {args.trees} x {args.depth} in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)
            serve, url = start_serve(configs["active"], workdir)
            try:
                for size in args.sizes:
                    n = passive_file(workdir, size)
                    started = time.perf_counter()
                    import httpx

                    while True:  # the passive party builds its new id set (in the background), then sends it
                        health = httpx.get(f"{url}/healthz", timeout=600).json()
                        party = health["models"]["default"]["health"]["passive-1"]
                        if party.get("ids") == n:
                            break
                        if time.perf_counter() - started > 900:
                            raise SystemExit(f"the passive party's id set of {n} ids was not ready in 900 s: {health}")
                        time.sleep(1.0)
                    warm = time.perf_counter() - started
                    # one request first: a strict session's attestation and its passive table (1e6 rows)
                    # are set up before any timed case
                    httpx.post(f"{url}/v1/score", json={"model": "default", "rows": rows[:1]}, timeout=900)
                    load(url, "default", rows, 4, 1, 2, workdir)  # sessions and caches warm
                    cases = [
                        case(url, rows, args.seconds, workdir, protocol, n, 1, args.clients),  # back to back
                        case(url, rows, args.seconds, workdir, protocol, n, 1, args.clients, args.pause_ms),
                        case(url, rows, max(3, args.seconds // 3), workdir, protocol, n, 1, 1),  # one client alone
                        case(url, rows, args.seconds, workdir, protocol, n, args.bulk_rows, args.bulk_clients),
                    ]
                    for result in cases:
                        result.update(trees=args.trees, depth=args.depth, id_set_seconds=round(warm, 1),
                                      transport="gRPC, mutual TLS, loopback", enclaves="simulated",
                                      machine=f"{os.cpu_count()} cores")
                        results.append(result)
                        print(json.dumps(result), flush=True)
            finally:
                serve.terminate()
                serve.wait(timeout=30)
    finally:
        from teeboost.deploy.active import shutdown_peers
        from teeboost.deploy.config import load_config

        try:
            shutdown_peers(load_config(configs["active"]), "benchmark done")
        except Exception:  # noqa: BLE001
            process.terminate()
        process.wait(timeout=30)
    with args.out.open("a") as out:
        for result in results:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
