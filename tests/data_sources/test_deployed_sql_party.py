"""A deployed passive party whose data lives in a PostgreSQL table (issue #35): real processes.

The telco keeps its customers in a database, not a file: its config says
``data = "postgresql+psycopg://...#table=telco_customers"``. The federation trains and predicts
exactly as with the same rows in its CSV file.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import sqlalchemy

from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation

from ..helpers import stop_passive_parties


def cli(*args):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def federation(workdir, data_line: str | None):
    configs = write_federation(workdir, n_passive=1, training={"n_trees": 4, "max_depth": 3}, rows=3000)
    if data_line is not None:
        text = configs["passive-1"].read_text()
        configs["passive-1"].write_text(text.replace('data = "passive-1.csv"', data_line))
    process, address = start_passive(configs["passive-1"], workdir / "passive-1.address", workdir / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    return configs, process


def train_and_predict(workdir, configs):
    trained = cli("party", "--config", configs["active"], "--protocol", "strict", "--json")
    assert trained.returncode == 0, trained.stderr
    new = workdir / "new.csv"
    pd.read_csv(workdir / "active.csv", dtype={"id": str}).head(100).drop(columns=["SeriousDlqin2yrs"]) \
        .to_csv(new, index=False)
    predicted = cli("predict", "--config", configs["active"], "--data", new, "--output", workdir / "p.csv")
    assert predicted.returncode == 0, predicted.stderr
    return json.loads(trained.stdout)["value"], pd.read_csv(workdir / "p.csv", dtype={"id": str})


def test_a_passive_party_reading_a_postgres_table_trains_and_predicts_as_from_its_file(tmp_path, postgres_url):
    results = []
    for name in ("csv", "sql"):
        workdir = tmp_path / name
        workdir.mkdir()
        line = None
        if name == "sql":
            rows = pd.read_csv(tmp_path / "csv" / "passive-1.csv", dtype={"id": str})
            engine = sqlalchemy.create_engine(postgres_url)
            rows.to_sql("telco_customers", engine, index=False, if_exists="replace")
            engine.dispose()
            line = f'data = "{postgres_url}#table=telco_customers"'
        configs, process = federation(workdir, line)
        try:
            results.append(train_and_predict(workdir, configs))
        finally:
            stop_passive_parties(configs["active"], [process])
    (auc_csv, p_csv), (auc_sql, p_sql) = results
    assert auc_sql == auc_csv
    # the same scores; the model versions differ (strict mode's enclaves draw random record ids)
    assert p_sql["scored_by"].isna().equals(p_csv["scored_by"].isna())  # the same rows scored
    pd.testing.assert_frame_equal(p_sql.drop(columns=["scored_by"]), p_csv.drop(columns=["scored_by"]))
