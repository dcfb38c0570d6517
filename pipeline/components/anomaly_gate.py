"""AnomalyGate: stops the run when ExampleValidator found anomalies, or DriftValidator drift.

ExampleValidator only records anomalies; a pipeline that goes on trains and ships a model on
bad data. This component sits between ExampleValidator and Transform: a column past its drift
threshold, any anomaly in any split, or a split without examples fails it, so Transform,
Trainer and Pusher never run. Its one error lists every reason, drift first (a drifted column
often shows as anomalies too, and fixing those first would only meet the drift next), each with
what to do; too many new category values are given as their share against the schema's
tolerance (pipeline/spans/changes.py).
"""

import os

import tensorflow as tf
from absl import logging
from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils

from pipeline.spans import changes, drift, drift_validator
from trainer_module import keys

ANOMALIES_FILE = "SchemaDiff.pb"  # what ExampleValidator writes in each Split-<name> folder


class DataGateError(RuntimeError):
    """The data does not match the curated schema, or drifted past a threshold."""


# What to do about an anomaly, by TFDV's reason (anomalies.proto's AnomalyInfo.Type).
_SCHEMA_FIX = ("if the data is wrong, fix it; if the data is right and the schema is out of "
               "date, update the dataset's schema.pbtxt (`make schema` shows what TFDV infers "
               "now)")
_FIXES = {
    "ENUM_TYPE_UNEXPECTED_STRING_VALUES":
        "if the column's codes were renamed or re-encoded, fix the export; if the values are "
        "real, add them to the column's domain in schema.pbtxt, or tolerate more of them "
        "(a lower distribution_constraints.min_domain_mass there)",
    "UNEXPECTED_DATA_TYPE":
        "if the export is wrong, fix it; if the column changed type for good, update its type "
        "in schema.pbtxt (`make schema`); if no model needs it, give it role = \"ignore\" in "
        "spec.toml",
}
_DRIFT_FIX = ("if the data is wrong, fix the span and run again; if the change is real, raise "
              "the column's threshold under [drift] thresholds in the dataset's spec.toml, or "
              "list it under [drift] warn_only")


def drifted(drift_uri: str) -> tuple[dict, list[drift.Distance]]:
    """What DriftValidator wrote, and the columns past their threshold that may stop a run
    (not warn_only)."""
    report = drift_validator.read_drift(drift_uri)
    return report, [drift.Distance(column, v["distance"], v["threshold"], v["method"])
                    for column, v in sorted(report["columns"].items())
                    if v["past"] and not v["warn_only"]]


def split_statistics(statistics_uri: str, split_names: list[str]
                     ) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
    """StatisticsGen's statistics of each split."""
    found = {}
    for split in split_names:
        path = os.path.join(statistics_uri, keys.split_dir(split), keys.STATISTICS_FILE)
        found[split] = statistics_pb2.DatasetFeatureStatisticsList()
        found[split].ParseFromString(tf.io.gfile.GFile(path, "rb").read())
    return found


def describe_anomalies(anomalies_uri: str, split_names: list[str],
                       new: dict[tuple[str, str], changes.NewValues] | None = None
                       ) -> list[str]:
    """One line per anomalous feature (or dataset-level anomaly): TFDV's descriptions, or for
    too many new category values (`new`, by column and split) their share against the
    tolerance, and what to do."""
    lines, new = [], new or {}
    for split in split_names:
        path = os.path.join(anomalies_uri, keys.split_dir(split), ANOMALIES_FILE)
        anomalies = anomalies_pb2.Anomalies()
        anomalies.ParseFromString(tf.io.gfile.GFile(path, "rb").read())
        for feature, info in sorted(anomalies.anomaly_info.items()):
            reasons = [anomalies_pb2.AnomalyInfo.Type.Name(r.type) for r in info.reason]
            fix = next((_FIXES[r] for r in reasons if r in _FIXES), _SCHEMA_FIX)
            if reasons == ["ENUM_TYPE_UNEXPECTED_STRING_VALUES"] and (feature, split) in new:
                lines.append(f"[{split}] {new[feature, split].describe(split=False)} — {fix}")
            else:
                lines.append(f"[{split}] {feature}: {info.short_description} — "
                             f"{info.description} — {fix}")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            lines.append(f"[{split}] (dataset): {info.short_description} — {info.description}"
                         f" — {_SCHEMA_FIX}")
    return lines


def empty_splits(statistics: dict[str, statistics_pb2.DatasetFeatureStatisticsList]
                 ) -> list[str]:
    """One line per split without examples.

    TFDV validates an empty split without complaint (there are no values to be wrong), so a
    header-only CSV, or data too small to fill the eval split, would otherwise reach the Trainer.
    """
    return [f"[{split}] (dataset): No examples — the split is empty; the CSV files hold a "
            "header but no data rows, or too few rows to fill it"
            for split, count in example_counts(statistics).items() if count == 0]


def example_counts(statistics: dict[str, statistics_pb2.DatasetFeatureStatisticsList]
                   ) -> dict[str, int]:
    """Rows per split, as StatisticsGen counted them."""
    return {split: int(sum(d.num_examples for d in stats.datasets))
            for split, stats in statistics.items()}


def unlabelled_rows(statistics: dict[str, statistics_pb2.DatasetFeatureStatisticsList],
                    label_columns: list[str]) -> dict[str, dict[str, int]]:
    """split → label column → examples without a value there (only the non-zero counts)."""
    counts: dict[str, dict[str, int]] = {}
    for split, split_stats in statistics.items():
        for name, feature in changes.features_by_name(split_stats).items():
            if name not in label_columns:
                continue
            common = getattr(feature, feature.WhichOneof("stats") or "num_stats").common_stats
            # CsvExampleGen writes an empty cell as the feature with no value, which TFDV
            # counts as present: a label has one value, so the rest had none.
            missing = int(common.num_missing
                          + max(0, common.num_non_missing - common.tot_num_values))
            if missing:
                counts.setdefault(split, {})[name] = missing
    return counts


def gate_message(drift_report: dict | None, stopped: list[drift.Distance], problems: list[str],
                 anomalies_uri: str) -> str:
    """Every reason the gate stops, drift first, each with what to do."""
    parts = []
    if stopped:
        parts.append(f"span {drift_report['span']} drifted from span "
                     f"{drift_report['previous_span']} on {len(stopped)} column(s):\n  "
                     + "\n  ".join(f"{d.describe()} ({_DRIFT_FIX})" for d in stopped))
    if problems:
        parts.append(f"the data does not match the schema: {len(problems)} anomal"
                     f"{'y' if len(problems) == 1 else 'ies'} found by ExampleValidator "
                     f"(details in {anomalies_uri}):\n  " + "\n  ".join(problems))
    return "\n".join(parts) + "\nNothing was trained or pushed."


@component
def AnomalyGate(
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift_report: InputArtifact[standard_artifacts.ExampleAnomalies] = None,
    label_columns: Parameter[str] = "",
    missing_labels: Parameter[str] = "stop",
    code_version: Parameter[str] = "",
) -> None:
    """Fails when a column drifted past its threshold from the previous span (`drift_report`,
    DriftValidator's, when the run has one), the anomalies artifact holds any anomaly, a split
    has no examples, or (unless the dataset spec drops them) rows have no label; its error
    names every reason, drift first. New category values within the schema's tolerance are no
    anomaly: the log names them.

    label_columns: the raw columns the label is made from, comma-separated.
    missing_labels: the spec's [label] missing: 'stop' or 'drop'.
    code_version: the step's code hash (pipeline/cache_keys.py), so an edited gate never runs
      from cache.
    """
    del code_version
    splits = artifact_utils.decode_split_names(anomalies.split_names)
    by_split = split_statistics(statistics.uri,
                                artifact_utils.decode_split_names(statistics.split_names))
    schema_proto = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema.uri))
    new = {(n.column, n.split): n for n in changes.new_values(by_split, schema_proto)}
    for found in new.values():
        if not found.stops:
            logging.info("New values, within the schema's tolerance: %s", found.describe())
    problems = empty_splits(by_split) + describe_anomalies(anomalies.uri, splits, new)
    if missing_labels != "drop":
        columns = [c for c in label_columns.split(",") if c]
        for split, counts in unlabelled_rows(by_split, columns).items():
            problems += [f"[{split}] {column}: {count} example(s) have no label value — fill "
                         "them in, or set missing = \"drop\" under [label] in the dataset spec"
                         for column, count in counts.items()]
    report, stopped = drifted(drift_report.uri) if drift_report is not None else (None, [])
    if problems or stopped:
        raise DataGateError(gate_message(report, stopped, problems, anomalies.uri))
