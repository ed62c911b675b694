"""Online scoring under load: ``teeboost serve`` in front of a passive party holding 1e4 or 1e6 ids.

Per protocol (ntee, strict): the loopback federation of ``teeboost demo`` (each party its own
OS process, gRPC with mutual TLS, simulated enclaves) trains a model of ``--trees`` x
``--depth`` (XGBoost's 100 x 6 by default) on the first ``--train-rows`` rows of the bundled
sample; then the passive party's data file is replaced by one holding ``--sizes`` ids (its own
rows plus made-up customers drawn from them), and ``teeboost serve --config`` scores the
customers both parties hold. A load generator in its own process (asyncio + httpx) keeps
``--clients`` clients each sending single-row requests back to back for ``--seconds``, then
``--bulk-clients`` clients sending ``--bulk-rows``-row requests. Bytes between the parties come
from the service's own counter (``teeboost_party_bytes_total`` in /metrics); per single-row
request they are also measured with one client (no batching with others: the worst case).

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

LOAD = r'''
import asyncio, json, sys, time
import httpx

async def main(url, model, rows, clients, per_request, seconds):
    latencies, errors, statuses = [], 0, {}
    stop = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=30.0, limits=httpx.Limits(max_connections=clients)) as http:
        async def client(c):
            nonlocal errors
            i = c * 7919
            while time.perf_counter() < stop:
                batch = [rows[(i + j) % len(rows)] for j in range(per_request)]
                i += per_request * clients + 1
                started = time.perf_counter()
                reply = await http.post("/v1/score", json={"model": model, "rows": batch})
                latencies.append(time.perf_counter() - started)
                if reply.status_code != 200:
                    errors += 1
                    continue
                for row in reply.json()["rows"]:
                    statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        began = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        elapsed = time.perf_counter() - began
    print(json.dumps({"latencies": latencies, "errors": errors, "statuses": statuses, "elapsed": elapsed}))

spec = json.loads(sys.stdin.read())
asyncio.run(main(**spec))
'''


def cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True, **kwargs)


def metric(url: str, name: str) -> float:
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M))


def load(url: str, model: str, rows: list, clients: int, per_request: int, seconds: float) -> dict:
    spec = {"url": url, "model": model, "rows": rows, "clients": clients, "per_request": per_request,
            "seconds": seconds}
    done = subprocess.run([sys.executable, "-c", LOAD], input=json.dumps(spec), capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


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


def case(url: str, model: str, rows: list, args, protocol: str, size: int, per_request: int, clients: int) -> dict:
    before_bytes = metric(url, "teeboost_party_bytes_total")
    result = load(url, model, rows, clients, per_request, args.seconds)
    sent = metric(url, "teeboost_party_bytes_total") - before_bytes
    lat = np.array(result["latencies"]) * 1000
    requests = len(lat)
    return {"protocol": protocol, "passive_ids": size, "rows_per_request": per_request, "clients": clients,
            "requests": requests, "errors": result["errors"], "statuses": result["statuses"],
            "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
            "rows_per_s": round(requests * per_request / result["elapsed"], 1),
            "bytes_per_request": round(sent / max(1, requests), 1), "seconds": round(result["elapsed"], 1)}


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
    parser.add_argument("--seconds", type=float, default=20.0)
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

                    httpx.get(f"{url}/healthz", timeout=600)  # the passive party builds and sends its id set
                    warm = time.perf_counter() - started
                    load(url, "default", rows, 4, 1, 2.0)  # sessions and caches warm
                    single = case(url, "default", rows, args, protocol, n, 1, args.clients)
                    alone = case(url, "default", rows, argparse.Namespace(seconds=3.0), protocol, n, 1, 1)
                    bulk = case(url, "default", rows, args, protocol, n, args.bulk_rows, args.bulk_clients)
                    single["bytes_per_request_alone"] = alone["bytes_per_request"]
                    single["p50_ms_alone"] = alone["p50_ms"]
                    for result in (single, bulk):
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
