"""A real daily export through the time axis: `make dataset` writes the spec from the first
two spans, and the ordinary days after them neither stop nor warn; only a real change does.

The export is the shipped taxi rows in 900-row spans. The third span is the next rows as they
come: cab companies spans 1-2 did not have (about 2% of the rows), and `pickup_census_tract`,
empty in spans 1-2 (so `make dataset` ignores it), now holding an integer (the one shipped
row that fills it). The fourth span is the rows after those with their fares tripled."""

import glob
import json
import os
import subprocess
import sys

import pytest

import mlmd_records
from conftest import tree_hashes
from dataset_rows import TAXI, write_csv
from pipeline import REPO_ROOT
from pipeline.runs import report
from pipeline.tools import bootstrap

SPAN_ROWS = 900


def _span(data, number: int, rows: list[dict[str, str]]) -> None:
    os.makedirs(data / f"span-{number}")
    write_csv(data / f"span-{number}" / "trips.csv", rows)


def _predict(env: dict, rows_dir, *extra: str) -> dict:
    """`make predict` on `rows_dir` (with `extra` flags); its summary.json."""
    predictions = os.path.join(env["OUTPUT_DIR"], "predictions")
    before = set(glob.glob(os.path.join(predictions, "*", "summary.json")))
    result = subprocess.run([sys.executable, "-m", "pipeline.tools.predict", "--data-dir",
                             str(rows_dir), *extra],
                            env=env, capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [new] = set(glob.glob(os.path.join(predictions, "*", "summary.json"))) - before
    with open(new, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.e2e
def test_a_daily_export_runs_on_ordinary_days_and_stops_on_tripled_fares(tmp_path):
    rows = TAXI.read_rows()
    filled = [r for r in rows if r["pickup_census_tract"]]
    assert len(filled) == 1 and rows.index(filled[0]) > 4 * SPAN_ROWS
    data = tmp_path / "data"
    _span(data, 1, rows[:SPAN_ROWS])
    _span(data, 2, rows[SPAN_ROWS:2 * SPAN_ROWS])
    schemas = tmp_path / "schemas"
    assert bootstrap.main(["--name", "trips", "--data-dir", str(data), "--label", "tips",
                           "--task", "regression", "--schemas-dir", str(schemas)]) == 0
    spec_file = schemas / "trips" / "spec.toml"
    spec_text = spec_file.read_text()
    assert 'pickup_census_tract = { role = "ignore"' in spec_text
    assert "min_domain_mass: 0.95" in (schemas / "trips" / "schema.pbtxt").read_text()
    # The one edit of the review: train on the newest two spans.
    spec_file.write_text(spec_text.replace("[training]\n", "[training]\nwindow_spans = 2\n"))
    output = tmp_path / "out"
    # One member and a few steps: the network's size is not what this test is about.
    env = {**os.environ, "OUTPUT_DIR": str(output), "TRAIN_STEPS": "20", "ENSEMBLE_SIZE": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2", "DATASET": str(schemas / "trips")}
    runner = [sys.executable, os.path.join(REPO_ROOT, "pipeline", "local_runner.py"),
              "--data-dir", str(data)]

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(runner, env=env, capture_output=True, text=True, timeout=900)

    result = run()  # span 2, span 1 read first: the model trains on spans 1-2
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    served = output / "serving_model"
    [first_model] = [p.parent for p in served.glob("*/*/saved_model.pb")]

    # The model's own training rows: no column is past its threshold.
    summary = _predict(env, data / "span-2")
    assert summary["skew"]["compared"], summary["skew"]
    assert not [c for c, v in summary["skew"]["columns"].items() if v["past"]], summary["skew"]
    assert summary["skew"]["columns"]["company"]["distance"] < 0.1

    # An ordinary day: new companies and the ignored column filled run, are named, and push.
    _span(data, 3, rows[2 * SPAN_ROWS:3 * SPAN_ROWS] + filled)
    result = run()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    states = mlmd_records.latest_run(str(output / "metadata" / "metadata.db")).states
    assert states["AnomalyGate"] == "COMPLETE" and states["Pusher"] == "COMPLETE"
    assert "Data: new values: company:" in result.stdout
    assert "Data: ignored column: pickup_census_tract (ignored):" in result.stdout
    changes = json.loads((output / report.REPORT_DIR / report.SUMMARY_FILE).read_text())
    assert changes["succeeded"] and changes["anomalies"] == []
    new = changes["changes"]["new_values"]["company"]
    assert 0 < new["share"] <= new["tolerance"] and not new["stops"]
    ignored = changes["changes"]["ignored_columns"]["pickup_census_tract"]
    assert ignored["type"] == "integers" and ignored["filled"] > 0
    page = (output / report.REPORT_DIR / "index.html").read_text()
    assert "Data changes that do not stop a run" in page
    assert "pickup_census_tract (ignored)" in page and "company: " in page
    assert len(list(served.glob("*/*/saved_model.pb"))) == 2
    before = tree_hashes(served)

    # Fares tripled: the drift gate stops the span before Transform, naming the column.
    tripled = [dict(r, fare=f"{float(r['fare']) * 3:.2f}")
               for r in rows[3 * SPAN_ROWS:4 * SPAN_ROWS]]
    _span(data, 4, tripled)
    result = run()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "span 4 drifted from span 3 on 1 column(s):" in result.stderr
    assert "  fare: Jensen-Shannon divergence" in result.stderr
    states = mlmd_records.latest_run(str(output / "metadata" / "metadata.db")).states
    assert states["AnomalyGate"] == "FAILED" and "Transform" not in states
    assert tree_hashes(served) == before
    stopped = json.loads((output / report.REPORT_DIR / report.SUMMARY_FILE).read_text())
    assert [line.split(":")[0] for line in stopped["drifted"]] == ["fare"]
    assert 'id="drifted"' in (output / report.REPORT_DIR / "index.html").read_text()

    # The tripled rows scored by the model of spans 1-2: fare is past its threshold.
    summary = _predict(env, data / "span-4", "--model-dir", str(first_model))
    past = [c for c, v in summary["skew"]["columns"].items() if v["past"]]
    assert past == ["fare"], summary["skew"]
