"""Each kind of bad input: one clear error naming file, column or party; nothing written."""

import pytest

from teeboost.cli import main

from .helpers import SMALL_FLAGS


@pytest.fixture
def table(tmp_path, credit_frame):
    frame = credit_frame.iloc[:300].copy()
    path = tmp_path / "joined.csv"
    frame.to_csv(path, index=False)
    return frame, path


def run(tmp_path, capsys, *argv):
    model_dir, transcript = tmp_path / "model", tmp_path / "run.tbt"
    code = main(["train", *SMALL_FLAGS, *argv, "--model-dir", str(model_dir), "--transcript", str(transcript)])
    err = capsys.readouterr().err
    assert code == 2
    assert not model_dir.exists(), "a failed run must not write a model"
    assert not transcript.exists() and not transcript.with_name("run.tbt.partial").exists()
    return err


def joined_args(path, label="SeriousDlqin2yrs"):
    return ["--data", str(path), "--label", label, "--id", "id", "--passive-columns", "age,MonthlyIncome"]


def test_missing_label_column(tmp_path, capsys, table):
    _, path = table
    err = run(tmp_path, capsys, *joined_args(path, label="Defaulted"))
    assert str(path) in err and "label column 'Defaulted' not found" in err


def test_non_numeric_value(tmp_path, capsys, table):
    frame, path = table
    frame = frame.astype({"age": object})
    frame.loc[17, "age"] = "forty"
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert str(path) in err and "'age'" in err and "'forty'" in err and "row 18" in err


def test_ids_that_do_not_match_across_parties(tmp_path, capsys, table):
    frame, _ = table
    active, passive = tmp_path / "bank.csv", tmp_path / "telco.csv"
    frame.drop(columns=["age", "MonthlyIncome"]).to_csv(active, index=False)
    other = frame[["id", "age", "MonthlyIncome"]].copy()
    other.loc[:4, "id"] = ["x1", "x2", "x3", "x4", "x5"]
    other.to_csv(passive, index=False)
    err = run(tmp_path, capsys, "--active-data", str(active), "--passive-data", str(passive),
              "--label", "SeriousDlqin2yrs", "--id", "id", "--align", "id")
    assert str(passive) in err and "ids do not match" in err and "5 active id(s) missing here" in err


def test_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.csv"
    path.write_text("")
    err = run(tmp_path, capsys, *joined_args(path))
    assert f"{path}: the file is empty" in err


def test_header_only_file(tmp_path, capsys, table):
    frame, path = table
    frame.iloc[:0].to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert str(path) in err and "no data rows" in err


def test_every_column_of_a_party_constant(tmp_path, capsys, table):
    frame, path = table
    frame["MonthlyIncome"] = 5000
    frame["age"] = 40
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert str(path) in err and "passive party 1" in err and "every feature column is constant or empty" in err
    assert "'MonthlyIncome': constant 5000" in err


def test_nan_labels(tmp_path, capsys, table):
    frame, path = table
    frame.loc[[3, 9], "SeriousDlqin2yrs"] = None
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert "label column 'SeriousDlqin2yrs' is missing in 2 row(s), first in data row 4" in err


def test_single_class_label(tmp_path, capsys, table):
    frame, path = table
    frame["SeriousDlqin2yrs"] = 0
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert "single value" in err and "'SeriousDlqin2yrs'" in err


def test_missing_file(tmp_path, capsys):
    err = run(tmp_path, capsys, *joined_args(tmp_path / "nope.csv"))
    assert "nope.csv: file not found" in err


def test_unknown_passive_column(tmp_path, capsys, table):
    _, path = table
    err = run(tmp_path, capsys, "--data", str(path), "--label", "SeriousDlqin2yrs", "--passive-columns", "age,Salary")
    assert "passive party 1 column 'Salary' not found" in err


def test_duplicate_ids(tmp_path, capsys, table):
    frame, path = table
    frame.loc[5, "id"] = frame.loc[6, "id"]
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert "duplicate id" in err


def test_bad_parameter_names_field_and_value(tmp_path, capsys, table):
    _, path = table
    err = run(tmp_path, capsys, *joined_args(path), "--max-depth", "0")
    assert "max_depth=0 must be >= 1" in err


def per_party_files(tmp_path, frame, edit_passive=None):
    active, passive = tmp_path / "bank.csv", tmp_path / "telco.csv"
    frame.drop(columns=["age", "MonthlyIncome"]).to_csv(active, index=False)
    other = frame[["id", "age", "MonthlyIncome"]].copy()
    if edit_passive is not None:
        other = edit_passive(other)
    other.to_csv(passive, index=False)
    return ["--active-data", str(active), "--passive-data", str(passive), "--label", "SeriousDlqin2yrs",
            "--id", "id"], passive


def test_ids_written_as_different_types(tmp_path, capsys, table):
    frame, _ = table

    def zero_padded(other):
        other["id"] = [f"{int(i):06d}" for i in other["id"]]
        return other

    args, passive = per_party_files(tmp_path, frame, zero_padded)
    err = run(tmp_path, capsys, *args)
    assert str(passive) in err and "compared as text" in err and "'000001'" in err and "'1'" in err


def test_infinite_value(tmp_path, capsys, table):
    frame, path = table
    frame.loc[9, "MonthlyIncome"] = float("inf")
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert "'MonthlyIncome'" in err and "infinite value inf" in err and "row 10" in err


def test_more_bins_than_the_bin_type_holds(tmp_path, capsys, table):
    _, path = table
    err = run(tmp_path, capsys, *joined_args(path), "--max-bin", "65536")
    assert "max_bin=65536 must be <= 65535" in err


def test_empty_id_cell(tmp_path, capsys, table):
    frame, path = table
    frame["id"] = frame["id"].astype(object)
    frame.loc[3, "id"] = None
    frame.to_csv(path, index=False)
    err = run(tmp_path, capsys, *joined_args(path))
    assert "id column 'id' is empty in data row 4" in err


def test_negative_learning_rate(tmp_path, capsys, table):
    _, path = table
    err = run(tmp_path, capsys, *joined_args(path), "--learning-rate", "-0.1")
    assert "learning_rate" in err and "-0.1" in err


def test_resume_without_a_checkpoint(tmp_path, capsys, table):
    _, path = table
    err = run(tmp_path, capsys, *joined_args(path), "--resume")
    assert "no checkpoint to resume from" in err


def test_huge_finite_values_are_binned_by_rank(tmp_path, capsys, table):
    """Documented behaviour: any finite magnitude trains (bins are ranks, thresholds are data values)."""
    frame, path = table
    frame.loc[:20, "MonthlyIncome"] = 1e308
    frame.loc[21:40, "MonthlyIncome"] = -1e308
    frame.to_csv(path, index=False)
    code = main(["train", *SMALL_FLAGS, *joined_args(path), "--model-dir", str(tmp_path / "model"), "--n-trees", "3", "--json"])
    assert code == 0, capsys.readouterr().err
    import json

    report = json.loads(capsys.readouterr().out)
    assert 0.0 <= report["value"] <= 1.0
