"""What the serving tests share: small models trained by the real commands, rows as the API
takes them, ``teeboost predict``'s answers for them, and ``teeboost serve`` started as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import uvicorn

from teeboost.cli import main
from teeboost.config import BoostParams
from teeboost.data import PartyData
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)
from teeboost.federation import train_local
from teeboost.serving.server import _Server, bind, url_of

from ..helpers import SMALL_FLAGS

ROOT = Path(__file__).resolve().parents[2]
SMALL = [*SMALL_FLAGS, "--json"]


def train(model_dir: Path, *args: str) -> Path:
    """``teeboost train`` with small settings (in this process: the command's own code)."""
    assert main(["train", *SMALL, "--model-dir", str(model_dir), *args]) == 0
    return model_dir


def credit_frame() -> pd.DataFrame:
    return load_give_me_some_credit()


def active_only_credit(model_dir: Path) -> Path:
    """The fallback: trained on the active party's credit columns only (no passive party)."""
    frame = credit_frame().drop(columns=GIVE_ME_SOME_CREDIT_PASSIVE)
    active = PartyData.from_frame(frame, id_column=GIVE_ME_SOME_CREDIT_ID, label=GIVE_ME_SOME_CREDIT_LABEL,
                                  name="active")
    model, _ = train_local(active, [], BoostParams(n_trees=5, max_depth=3, subsample=0.8, max_bin=32), "plain")
    model.active.id_column = GIVE_ME_SOME_CREDIT_ID
    model.save(model_dir)
    return model_dir


def request_rows(frame: pd.DataFrame, columns: list[str], id_column: str = "id") -> list[dict]:
    """A frame's rows as the API takes them (NaN -> null)."""
    rows = []
    for record in frame.to_dict("records"):
        features = {c: (None if isinstance(record[c], float) and np.isnan(record[c]) else record[c]) for c in columns}
        features = {c: (v.item() if isinstance(v, np.generic) else v) for c, v in features.items()}
        rows.append({"id": str(record[id_column]), "features": features})
    return rows


def predict_csv(model_dir: Path, frame: pd.DataFrame, tmp: Path, *extra: str) -> pd.DataFrame:
    """What ``teeboost predict --model-dir`` writes for these rows, read back exactly (as text,
    each number parsed by Python's correctly rounded ``float``)."""
    data, output = tmp / f"rows-{model_dir.name}.csv", tmp / f"predicted-{model_dir.name}.csv"
    frame.to_csv(data, index=False)
    assert main(["predict", "--model-dir", str(model_dir), "--data", str(data), "--output", str(output),
                 *extra]) == 0
    written = pd.read_csv(output, dtype=str)
    for column in written.columns:
        if column.startswith("probability_"):
            written[column] = [float(text) for text in written[column]]
    return written


@dataclass
class Service:
    process: subprocess.Popen
    url: str
    log: Path

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode


def start_service(workdir: Path, *args: str, timeout: float = 90) -> Service:
    """``teeboost serve ... --port 0`` as a process; returns once its ready file names its URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready, log = workdir / "ready.json", workdir / "serve.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "teeboost.cli", "serve", "--port", "0", "--ready-file",
                                    str(ready), *args], stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"teeboost serve did not start (exit {process.poll()}): {log.read_text()}")
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    assert info["pid"] == process.pid
    return Service(process, info["url"], log)


@contextmanager
def serving(app):
    """The app on uvicorn in a thread of this process, spoken to over HTTP."""
    sock = bind("127.0.0.1", 0)
    server = _Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=url_of(sock), timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def fresh_customer(workdir: Path, n_passive: int = 1) -> tuple[str, pd.DataFrame]:
    """A customer every passive party of a demo federation holds and the label owner never
    trained or validated on (nothing charged it yet), with the active party's first row of
    inputs under its id."""
    active = pd.read_csv(workdir / "active.csv", dtype={"id": str})
    held = set.intersection(*(set(pd.read_csv(workdir / f"passive-{k}.csv", dtype={"id": str})["id"])
                              for k in range(1, n_passive + 1)))
    customer = sorted(held - set(active["id"]))[0]
    row = active.head(1).copy()
    row["id"] = [customer]
    return customer, row


def model_inputs(config, row: pd.DataFrame) -> np.ndarray:
    """A row's active inputs as the trained model reads them."""
    from teeboost.model_files import load_active

    model = load_active(config.model_dir / "active.json")
    return PartyData.from_frame(row[["id", *model.feature_names]], id_column="id", name="active",
                                source="test").conform(model.feature_names, model.vocabularies, "model").features
