"""`make predict`'s skew report (pipeline/spans/skew.py): scored rows against the
statistics the model carries of its training rows, and the values it never saw, counted per
column; nothing here refuses a row."""

import dataclasses
import os

import pandas as pd
import tensorflow_data_validation as tfdv

from dataset_rows import TAXI
from pipeline import datasets
from pipeline.spans import skew
from trainer_module.feature_signature import TRAINING_STATISTICS_FILE


def _model_dir(tmp_path, rows: list[dict[str, str]]) -> str:
    """A model folder holding only what the check reads: the training rows' statistics, as
    StatisticsGen computes them from typed columns."""
    spec, schema = datasets.load_spec("taxi")
    typed = pd.DataFrame(rows).replace("", None)
    for feature in schema.feature:
        if feature.type != 1:  # 1: BYTES
            typed[feature.name] = pd.to_numeric(typed[feature.name])
    path = tmp_path / "model" / TRAINING_STATISTICS_FILE
    os.makedirs(path.parent)
    path.write_bytes(tfdv.generate_statistics_from_dataframe(typed).SerializeToString())
    return str(tmp_path / "model")


def test_unseen_values_are_counted_and_skew_is_measured(tmp_path):
    spec, schema = datasets.load_spec("taxi")
    spec = dataclasses.replace(spec, drift_thresholds=(("fare", 0.5), ("company", 0.3)))
    rows = TAXI.read_rows(600)
    check = skew.SkewCheck(_model_dir(tmp_path, rows[:400]), spec, schema)
    scored = [dict(r) for r in rows[400:600]]
    scored[0]["company"] = "A cab company never seen"
    scored[1]["trip_start_hour"] = "99"  # outside the trained 0..23
    for row in scored:
        row["fare"] = f"{float(row['fare']) * 100:.2f}"
    check.add(pd.DataFrame(scored))
    summary = check.summary()
    assert summary["unseen"]["company"] >= 1
    assert summary["unseen"]["trip_start_hour"] == 1
    columns = summary["skew"]["columns"]
    assert columns["fare"]["past"] and columns["fare"]["distance"] > 0.9
    assert not columns["company"]["past"]
    lines = skew.warnings(summary)
    assert any(line.startswith("fare: Jensen-Shannon divergence") for line in lines)
    assert "trip_start_hour: 1 value(s) the model never saw in training (scored anyway)" in lines


def test_too_few_rows_are_not_compared_but_unseen_values_still_count(tmp_path):
    spec, schema = datasets.load_spec("taxi")
    spec = dataclasses.replace(spec, drift_thresholds=(("fare", 0.5),))
    rows = TAXI.read_rows(450)
    check = skew.SkewCheck(_model_dir(tmp_path, rows[:400]), spec, schema)
    few = [dict(r) for r in rows[400:450]]
    few[0]["trip_start_hour"] = "-1"
    check.add(pd.DataFrame(few))
    summary = check.summary()
    assert summary["skew"] == {"compared": False, "why": "50 rows: fewer than 100 are too few "
                               "to compare distributions"}
    assert summary["unseen"] == {"trip_start_hour": 1}


def test_dates_that_do_not_parse_are_counted_with_the_columns_format(tmp_path):
    from trainer_module.dataset_spec import Feature

    spec, schema = datasets.load_spec("taxi")
    spec = dataclasses.replace(spec, features=(
        *spec.features, Feature("picked_up", "datetime", {"format": "%d/%m/%Y"})))
    check = skew.SkewCheck(str(tmp_path), spec, schema)  # a model without statistics
    check.add(pd.DataFrame({"picked_up": ["01/11/2026", "2026-11-01", "", "31/02/2026x"]}))
    summary = check.summary()
    assert summary["unseen"] == {"picked_up": 2}
    assert summary["skew"]["compared"] is False
    assert "carries no training statistics" in summary["skew"]["why"]


def test_a_models_own_training_rows_are_not_skewed_from_themselves(tmp_path):
    """About a third of taxi's `company` cells are empty. The training statistics count them
    as missing (CsvExampleGen writes no value), so the scored rows must too: the same rows
    measure no distance, where an empty cell counted as a category of its own would move
    `company` by about 0.33."""
    spec, schema = datasets.load_spec("taxi")
    rows = TAXI.read_rows(600)
    assert sum(r["company"] == "" for r in rows) > 150
    check = skew.SkewCheck(_model_dir(tmp_path, rows), spec, schema)
    check.add(pd.DataFrame(rows))
    columns = check.summary()["skew"]["columns"]
    assert {"company", "fare", "trip_start_hour"} <= set(columns)
    assert columns["company"]["distance"] < 0.01
    assert not [c for c, v in columns.items() if v["past"]], columns


def test_numbers_read_as_numbers_may_leave_the_trained_range_unremarked(tmp_path):
    """An integer category id outside the trained range is a value the model never saw; a
    number the model reads as a number (trip_seconds) only extrapolates, as any eval row may."""
    spec, schema = datasets.load_spec("taxi")
    rows = TAXI.read_rows(400)
    check = skew.SkewCheck(_model_dir(tmp_path, rows), spec, schema)
    longest = max(int(r["trip_seconds"]) for r in rows)
    check.add(pd.DataFrame([dict(rows[0], trip_seconds=str(longest + 60),
                                 trip_start_hour="25")]))
    assert check.summary()["unseen"] == {"trip_start_hour": 1}
