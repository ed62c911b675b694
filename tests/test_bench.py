"""The benchmark harness: points in subprocesses, resumable sweeps, CSV/plots/report."""

import json

from teeboost.bench.report import write_csv, write_plots, write_report
from teeboost.bench.sweep import Point, load_results, plan, run_sweep


def test_sweep_runs_points_once_and_resumes(tmp_path):
    points = plan([1500], ["plain", "ntee"])
    seen = []
    results = run_sweep(points, tmp_path, on_point=lambda p, e, cached: seen.append((p.protocol, cached)))
    assert seen == [("plain", False), ("ntee", False)]
    entry = results[Point("ntee", 1500).key()]
    assert entry["rows"] == 1500 and entry["bytes"]["active_to_passive"] > 0 and entry["peak_rss_mb"] > 10
    assert 0.5 < entry["auc"] < 1 and "simulated" in entry["enclaves"]
    # identical trees: identical held-out AUC
    assert entry["auc"] == results[Point("plain", 1500).key()]["auc"]
    seen.clear()
    again = run_sweep(points + plan([1500], ["xgboost"]), tmp_path,
                      on_point=lambda p, e, cached: seen.append((p.protocol, cached)))
    assert seen == [("plain", True), ("ntee", True), ("xgboost", False)]  # finished points not recomputed
    assert len(load_results(tmp_path)) == 3 == len(again)


def test_outputs(tmp_path):
    results = run_sweep(plan([1200, 2400], ["xgboost", "plain", "onetee"]), tmp_path)
    csv_path = write_csv(results, tmp_path / "results.csv")
    assert len(csv_path.read_text().splitlines()) == 1 + 6
    figures = write_plots(results, tmp_path)
    assert [f.name for f in figures] == ["bench-time.png", "bench-communication.png"]
    report = write_report(results, tmp_path / "report.md", "teeboost bench --rows 1200 2400", figures)
    text = report.read_text()
    assert "simulated" in text and "| 2,400 | onetee |" in text and "Machine:" in text
    json.dumps(results)  # results are plain JSON
