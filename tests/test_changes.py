"""What a span brings that does not stop a run (pipeline/spans/changes.py), and the gate's one
message when something does (pipeline/components/anomaly_gate.py): TFDV's own validation on
statistics of made-up rows, read back as the gate and the report read it."""

import os

import pandas as pd
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.types import standard_artifacts

from pipeline.components import anomaly_gate, import_schema_gen
from pipeline.spans import changes, drift
from trainer_module import keys


def _statistics(frame: pd.DataFrame):
    return tfdv.generate_statistics_from_dataframe(frame)


def _schema(frame: pd.DataFrame, tolerance: float | None = None) -> schema_pb2.Schema:
    schema = tfdv.infer_schema(_statistics(frame))
    if tolerance is not None:
        tfdv.get_feature(schema, "company").distribution_constraints.min_domain_mass = (
            1 - tolerance)
    return schema


TRAINED = pd.DataFrame({"company": ["Flash"] * 60 + ["Yellow"] * 40,
                        "tract": pd.Series([None] * 100, dtype=object)})


def _day(new: int) -> pd.DataFrame:
    """100 rows, `new` of them by cab companies the trained rows never held; the ignored
    column filled with integers."""
    return pd.DataFrame({"company": ["Flash"] * (60 - new) + ["Yellow"] * 40
                         + [f"New Cab {i % 3}" for i in range(new)],
                         "tract": list(range(100))})


def test_new_values_within_the_tolerance_are_no_anomaly_and_are_named():
    schema = _schema(TRAINED, tolerance=0.05)
    day = _statistics(_day(new=3))
    assert not tfdv.validate_statistics(day, schema).anomaly_info.get("company")
    [found] = changes.new_values({"train": day}, schema)
    assert (found.column, found.split, found.share, found.tolerance) == ("company", "train",
                                                                         0.03, 0.05)
    assert not found.stops and found.count == 3
    assert found.describe() == ("company: 3.0% of the values in the train split are new to "
                                "the schema ('New Cab 0', 'New Cab 1', 'New Cab 2'); the schema "
                                "tolerates 5.0%")


def test_a_renamed_columns_codes_stop_with_their_share_and_what_to_do(tmp_path):
    schema = _schema(TRAINED[["company"]], tolerance=0.05)
    day = _statistics(_day(new=30)[["company"]])
    anomalies = tfdv.validate_statistics(day, schema)
    assert "company" in anomalies.anomaly_info  # TFDV's own verdict past the tolerance
    os.makedirs(tmp_path / keys.split_dir("train"))
    (tmp_path / keys.split_dir("train") / anomaly_gate.ANOMALIES_FILE).write_bytes(
        anomalies.SerializeToString())
    new = {(n.column, n.split): n for n in changes.new_values({"train": day}, schema)}
    [line] = anomaly_gate.describe_anomalies(str(tmp_path), ["train"], new)
    assert line.startswith("[train] company: 30.0% of the values are new to the schema ("
                           "'New Cab 0', 'New Cab 1', 'New Cab 2'); the schema tolerates 5.0% "
                           "— if the column's codes were renamed or re-encoded, fix the export")


def test_the_gates_message_names_drift_first_then_the_anomalies_each_with_its_fix():
    fare = drift.Distance("fare", 0.62, 0.14, "Jensen-Shannon divergence")
    message = anomaly_gate.gate_message(
        {"span": 4, "previous_span": 3}, [fare],
        ["[train] company: Unexpected string values — … — fix it"], "/anomalies")
    drift_at, anomaly_at = message.index("fare:"), message.index("[train] company")
    assert drift_at < anomaly_at
    assert message.startswith("span 4 drifted from span 3 on 1 column(s):\n  fare: "
                              "Jensen-Shannon divergence 0.6200 > threshold 0.14 (if the data "
                              "is wrong, fix the span")
    assert "1 anomaly found by ExampleValidator (details in /anomalies)" in message
    assert message.endswith("Nothing was trained or pushed.")


def test_an_ignored_column_is_disabled_and_its_changes_are_noted(tmp_path):
    """ImportSchemaGen marks the spec's ignored columns DISABLED: TFDV validates them no more,
    so integers in a column the schema types as text stop nothing; the change is noted, with
    the previous span's filled share where there is one."""
    source = tmp_path / "schema.pbtxt"
    tfdv.write_schema_text(_schema(TRAINED), str(source))
    imported = standard_artifacts.Schema()
    imported.uri = str(tmp_path / "imported")
    os.makedirs(imported.uri)
    import_schema_gen.Executor().Do({}, {"schema": [imported]}, {
        "schema_file": str(source), "ignored_columns": "tract"})
    schema = tfdv.load_schema_text(os.path.join(imported.uri, "schema.pbtxt"))
    assert tfdv.get_feature(schema, "tract").lifecycle_stage == schema_pb2.DISABLED
    day, before = _statistics(_day(new=0)), _statistics(TRAINED)
    assert not tfdv.validate_statistics(day, _schema(TRAINED)).anomaly_info.keys() - {"tract"}
    assert "tract" in tfdv.validate_statistics(day, _schema(TRAINED)).anomaly_info
    assert not tfdv.validate_statistics(day, schema).anomaly_info

    [noted] = changes.ignored_changes({"train": day}, schema, {"train": before})
    assert (noted.column, noted.filled, noted.kind, noted.previous_filled) == (
        "tract", 1.0, "integers", 0.0)
    assert noted.describe().startswith("tract (ignored): 100.0% of the rows hold integers, "
                                       "against 0.0% in the previous span (the schema says "
                                       "text)")
    assert changes.IgnoredChange.from_dict("tract", noted.as_dict()) == noted
    assert changes.ignored_changes({"train": before}, schema, {"train": before}) == []
