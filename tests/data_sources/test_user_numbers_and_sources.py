"""Numbers as users write them and data where it lives (issue #35), through the real CLI,
pyarrow and a real PostgreSQL server (``conftest.postgres_url``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy

from teeboost.cli import main
from teeboost.data_sources import DataSource, read_source
from teeboost.deploy.config import load_config
from teeboost.errors import ConfigError
from teeboost.metrics import evaluate
from teeboost.number_format import NumberFormat

from .credit import LABEL, PASSIVE, credit, split, with_decimal_commas

from ..helpers import SMALL_FLAGS


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _train(argv, capsys):
    code, out, err = _run(["train", *SMALL_FLAGS, "--json", *argv], capsys)
    assert code == 0, err
    return json.loads(out)


def _auc(predictions_csv, labels: pd.Series) -> tuple[float, np.ndarray]:
    scored = pd.read_csv(predictions_csv, dtype={"id": str})
    truth = labels.set_axis(labels.index.astype(str))
    probability = scored["probability_1"].to_numpy()
    return evaluate("auc", truth.loc[scored["id"]].to_numpy(dtype=float), probability), probability


def test_parquet_and_postgres_with_decimal_commas_score_as_clean_csv(tmp_path, capsys, postgres_url):
    """The issue's file, trained from Parquet (active) and a PostgreSQL table (passive) with
    decimal commas, new customers scored from per-party ';' files: the same AUC as clean CSV."""
    frame = credit(6000)
    frame["id"] = frame["id"].astype(str)
    train, new = frame.iloc[:5000], frame.iloc[5000:]
    labels = new.set_index("id")[LABEL]
    common = ["--label", LABEL, "--model-dir"]

    # clean CSV: the reference
    active, passive = split(train)
    active.to_csv(tmp_path / "active.csv", index=False)
    passive.to_csv(tmp_path / "passive.csv", index=False)
    new_active, new_passive = split(new.drop(columns=[LABEL]))
    new_active.to_csv(tmp_path / "new-active.csv", index=False)
    new_passive.to_csv(tmp_path / "new-passive.csv", index=False)
    clean = _train(["--active-data", str(tmp_path / "active.csv"), "--passive-data", str(tmp_path / "passive.csv"),
                    "--id", "id", *common, str(tmp_path / "clean")], capsys)
    code, _, err = _run(["predict", "--model-dir", str(tmp_path / "clean"), "--active-data",
                         str(tmp_path / "new-active.csv"), "--passive-data", str(tmp_path / "new-passive.csv"),
                         "--output", str(tmp_path / "clean.csv")], capsys)
    assert code == 0, err
    clean_auc, clean_p = _auc(tmp_path / "clean.csv", labels)

    # as users keep it: decimal commas as text, Parquet at the active party, PostgreSQL at the passive
    active, passive = split(with_decimal_commas(train))
    active.to_parquet(tmp_path / "active.parquet", index=False)
    engine = sqlalchemy.create_engine(postgres_url)
    passive.rename(columns={"id": "customer_no"}).to_sql("passive_train", engine, index=False, if_exists="replace")
    engine.dispose()
    table = f"{postgres_url}#table=passive_train"
    refused_code, _, refused = _run(["train", *SMALL_FLAGS, "--active-data", str(tmp_path / "active.parquet"), "--passive-data",
                                     table, "--active-id", "id", "--passive-id", "customer_no", *common,
                                     str(tmp_path / "refused")], capsys)
    assert refused_code == 2 and "decimal comma" in refused and "--decimal ," in refused
    assert str(tmp_path / "active.parquet") in refused and "(e.g. '" in refused
    messy = _train(["--active-data", str(tmp_path / "active.parquet"), "--passive-data", table,
                    "--active-id", "id", "--passive-id", "customer_no", "--decimal", ",",
                    *common, str(tmp_path / "messy")], capsys)
    new_active, new_passive = split(with_decimal_commas(new.drop(columns=[LABEL])))
    new_active.to_csv(tmp_path / "new-active-eu.csv", index=False, sep=";")
    new_passive.rename(columns={"id": "customer_no"}).to_csv(tmp_path / "new-passive-eu.csv", index=False, sep=";")
    code, _, err = _run(["predict", "--model-dir", str(tmp_path / "messy"), "--active-data",
                         str(tmp_path / "new-active-eu.csv"), "--passive-data", str(tmp_path / "new-passive-eu.csv"),
                         "--passive-id", "customer_no", "--decimal", ",", "--output", str(tmp_path / "messy.csv")],
                        capsys)
    assert code == 0, err
    messy_auc, messy_p = _auc(tmp_path / "messy.csv", labels)

    print(f"held-out AUC (train split): clean CSV {clean['value']:.6f}, Parquet+PostgreSQL {messy['value']:.6f}; "
          f"new customers: clean {clean_auc:.6f}, per-party ';' files {messy_auc:.6f}")
    assert messy["parties"] == clean["parties"]
    assert messy["value"] == clean["value"]
    assert messy_auc == clean_auc > 0.75
    np.testing.assert_array_equal(messy_p, clean_p)


def test_decimal_commas_in_a_csv_are_refused_naming_file_column_value_and_option(tmp_path, capsys):
    frame = with_decimal_commas(credit(300))
    path = tmp_path / "eu.csv"
    frame.to_csv(path, index=False, sep=";")
    code, _, err = _run(["train", *SMALL_FLAGS, "--data", str(path), "--label", LABEL, "--id", "id",
                         "--passive-columns", ",".join(PASSIVE), "--model-dir", str(tmp_path / "m")], capsys)
    assert code == 2
    assert str(path) in err and "'RevolvingUtilizationOfUnsecuredLines'" in err
    assert "(e.g. '0,766126609'" in err and "--decimal ," in err and 'decimal = ","' in err
    report = _train(["--data", str(path), "--label", LABEL, "--id", "id", "--decimal", ",",
                     "--passive-columns", ",".join(PASSIVE), "--model-dir", str(tmp_path / "m")], capsys)
    clean = credit(300)
    clean.to_csv(tmp_path / "clean.csv", index=False)
    reference = _train(["--data", str(tmp_path / "clean.csv"), "--label", LABEL, "--id", "id",
                        "--passive-columns", ",".join(PASSIVE), "--model-dir", str(tmp_path / "c")], capsys)
    assert report["value"] == reference["value"] and report["parties"] == reference["parties"]


def test_thousands_separators_are_read_exactly_or_refused():
    eu = NumberFormat(",", ".")
    values = eu.parse(pd.Series(["1.234.567,5", "12", None, "-0,25", "3.000"]))
    assert values.tolist()[:2] == [1234567.5, 12.0] and np.isnan(values[2]) and values.tolist()[3:] == [-0.25, 3000.0]
    assert eu.parse(pd.Series(["1.5", "2.000"])) is None  # "1.5" is no thousands group: never 15
    with pytest.raises(ConfigError, match="both"):
        NumberFormat(",", ",")
    from teeboost.data import PartyData
    from teeboost.errors import DataError

    frame = pd.DataFrame({"y": [0, 1, 0], "income": ["1.234,5", "12.000,0", "7,0"]})
    with pytest.raises(DataError, match=r"'income'.*thousands separated by '\.'.*--decimal , --thousands \."):
        PartyData.from_frame(frame, label="y", source="bank.csv")


def test_sql_query_and_parquet_sources(tmp_path, postgres_url):
    engine = sqlalchemy.create_engine(postgres_url)
    pd.DataFrame({"id": ["007", "8"], "income": [1.5, 2.5], "kind": ["a", "b"]}).to_sql(
        "customers", engine, index=False, if_exists="replace")
    engine.dispose()
    frame = read_source(f"{postgres_url}#query=SELECT id, income FROM customers WHERE income > 2", id_column="id")
    assert frame.to_dict("list") == {"id": ["8"], "income": [2.5]}
    pd.DataFrame({"id": [7, 8], "x": [1.0, 2.0]}).to_parquet(tmp_path / "p.parquet")
    assert read_source(tmp_path / "p.parquet", id_column="id")["id"].tolist() == ["7", "8"]
    assert "secret" not in str(DataSource.parse("postgresql+psycopg://bank:secret@db:5432/x#table=t"))
    from teeboost.errors import DataError

    with pytest.raises(DataError, match="#table=NAME"):
        DataSource.parse("postgresql+psycopg://bank@db/x")
    with pytest.raises(DataError, match="no such table"):
        read_source(f"{postgres_url}#table=nowhere")


def test_predict_names_the_party_whose_columns_are_missing(tmp_path, capsys):
    _train(["--model-dir", str(tmp_path / "m"), "--n-trees", "2"], capsys)
    frame = credit(50).drop(columns=["region", "age", "MonthlyIncome"])
    frame.to_csv(tmp_path / "new.csv", index=False)
    code, _, err = _run(["predict", "--model-dir", str(tmp_path / "m"), "--data", str(tmp_path / "new.csv"),
                         "--output", str(tmp_path / "o.csv")], capsys)
    assert code == 2 and "passive party 1 (passive-1) needs column(s) 'age', 'MonthlyIncome'" in err, err
    assert "no feature columns" not in err


def test_positive_class_chooses_class_one(tmp_path, capsys):
    base = _train(["--model-dir", str(tmp_path / "one")], capsys)
    flipped = _train(["--model-dir", str(tmp_path / "zero"), "--positive-class", "0"], capsys)
    assert flipped["value"] == pytest.approx(base["value"], abs=1e-9)
    credit(400).drop(columns=["region"]).to_csv(tmp_path / "new.csv", index=False)
    assert main(["predict", "--model-dir", str(tmp_path / "zero"), "--data", str(tmp_path / "new.csv"),
                 "--output", str(tmp_path / "o.csv")]) == 0
    scored = pd.read_csv(tmp_path / "o.csv")
    assert "probability_0" in scored.columns and "probability_1" not in scored.columns
    code, _, err = _run(["train", *SMALL_FLAGS, "--model-dir", str(tmp_path / "bad"), "--positive-class", "yes"], capsys)
    assert code == 2 and "'yes' is not a value of label column 'SeriousDlqin2yrs'" in err and "0, 1" in err


def test_party_config_reads_number_format_and_sql_data(tmp_path):
    path = tmp_path / "party.toml"
    path.write_text('[party]\nname = "bank"\nrole = "passive"\nindex = 1\nlisten = "127.0.0.1:0"\n'
                    'data = "postgresql+psycopg://bank@db/x#table=customers"\nid_column = "id"\n'
                    'decimal = ","\nthousands = "."\n[tls]\ninsecure = true\n')
    config = load_config(path)
    assert config.number_format == NumberFormat(",", ".") and config.data.table == "customers"
    path.write_text(path.read_text().replace('thousands = "."', 'thousands = ","'))
    with pytest.raises(ConfigError, match=r"party.toml: \[party\] the thousands separator and the decimal mark"):
        load_config(path)


def test_the_kaggle_file_as_parquet_trains_with_the_default_split(tmp_path, capsys):
    """``teeboost train --data cs-training.parquet`` (no --label): the Give Me Some Credit
    default split, read as Parquet, not as CSV; the same held-out AUC as the CSV."""
    from teeboost.datasets import bundled_path

    frame = pd.read_csv(bundled_path()).head(3000)
    frame.to_parquet(tmp_path / "gmsc.parquet")
    frame.to_csv(tmp_path / "gmsc.csv", index=False)
    reports = []
    for name in ("gmsc.parquet", "gmsc.csv"):
        assert main(["train", *SMALL_FLAGS, "--data", str(tmp_path / name), "--n-trees", "3", "--json",
                     "--model-dir", str(tmp_path / name.replace(".", "-"))]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    assert reports[0]["value"] == reports[1]["value"] > 0.7
