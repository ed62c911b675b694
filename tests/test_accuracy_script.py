"""benchmarks/accuracy.py (docs/accuracy.md) stays runnable: its command line on one dataset with
one seed and 5 trees, and its three tables load from installed packages as the doc describes them."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy.py"


@pytest.fixture(scope="module")
def accuracy():
    spec = importlib.util.spec_from_file_location("accuracy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy"] = module
    spec.loader.exec_module(module)
    return module


def test_the_command_writes_one_result_per_library_and_a_table(tmp_path):
    out = tmp_path / "results.jsonl"
    done = subprocess.run([sys.executable, str(SCRIPT), "--datasets", "credit_data", "--seeds", "1", "--trees", "5",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["library"] for r in results] == ["teeboost", "xgboost", "lightgbm"]
    for r in results:
        assert r["dataset"] == "credit_data" and r["seed"] == 0 and r["metric"] == "auc" and r["trees"] == 5
        assert r["rows"] == 4454 and r["features"] == 13 and r["seconds"] > 0
        assert 0.7 < r["value"] < 0.9  # 5 trees already score a real credit table
    assert "| credit_data | " in done.stdout and "min–max" in done.stdout


@pytest.mark.parametrize("name, rows, features, categorical, missing", [
    ("credit_data", 4454, 13, 4, 455), ("give_me_some_credit", 19999, 10, 0, 4569),
    ("health_insurance", 8802, 10, 8, 0)])
def test_each_table_loads_offline_with_its_types_and_missing_cells(accuracy, name, rows, features, categorical,
                                                                    missing):
    table = accuracy.DATASETS[name]()
    assert table.features.shape == (rows, features) and table.labels.shape == (rows,)
    assert set(table.labels) == {0, 1}
    assert sum(isinstance(t, pd.CategoricalDtype) for t in table.features.dtypes) == categorical
    assert int(table.features.isna().to_numpy().sum()) == missing
    assert set(table.passive) < set(table.features.columns)


def test_the_summary_compares_teeboost_with_xgboosts_spread(accuracy):
    results = [{"dataset": "d", "library": lib, "seed": s, "value": v}
               for lib, values in {"teeboost": [0.80, 0.82], "xgboost": [0.79, 0.83], "lightgbm": [0.9, 0.9]}.items()
               for s, v in enumerate(values)]
    tee = next(r for r in accuracy.summarise(results) if r["library"] == "teeboost")
    assert tee["mean"] == pytest.approx(0.81) and tee["min"] == 0.80 and tee["max"] == 0.82
    assert tee["minus_xgboost_mean"] == pytest.approx(0.0) and tee["within_xgboost_spread"]
