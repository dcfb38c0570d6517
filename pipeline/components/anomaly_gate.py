"""AnomalyGate: stops the run when ExampleValidator found anomalies, or DriftValidator drift.

ExampleValidator only records anomalies; a pipeline that goes on trains and ships a model on
bad data. This component sits between ExampleValidator and Transform: any anomaly in any split,
or a split without examples, fails it, so Transform, Trainer and Pusher never run, and its
error lists each anomalous feature with TFDV's short and long descriptions and where the
anomalies artifact is.
"""

import os

import tensorflow as tf
from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts

from pipeline.spans import drift, drift_validator
from trainer_module import keys

ANOMALIES_FILE = "SchemaDiff.pb"  # what ExampleValidator writes in each Split-<name> folder


class DataAnomaliesError(RuntimeError):
    """The data does not match the curated schema."""


class DataDriftError(RuntimeError):
    """A span's values moved past a threshold from the previous span's."""


def drifted(drift_uri: str) -> tuple[dict, list[drift.Distance]]:
    """What DriftValidator wrote, and the columns past their threshold that may stop a run
    (not warn_only)."""
    report = drift_validator.read_drift(drift_uri)
    return report, [drift.Distance(column, v["distance"], v["threshold"], v["method"])
                    for column, v in sorted(report["columns"].items())
                    if v["past"] and not v["warn_only"]]


def describe_anomalies(anomalies_uri: str, split_names: list[str]) -> list[str]:
    """One line per anomalous feature (or dataset-level anomaly), with TFDV's descriptions."""
    lines = []
    for split in split_names:
        path = os.path.join(anomalies_uri, keys.split_dir(split), ANOMALIES_FILE)
        anomalies = anomalies_pb2.Anomalies()
        anomalies.ParseFromString(tf.io.gfile.GFile(path, "rb").read())
        for feature, info in sorted(anomalies.anomaly_info.items()):
            lines.append(f"[{split}] {feature}: {info.short_description} — "
                         f"{info.description}")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            lines.append(f"[{split}] (dataset): {info.short_description} — {info.description}")
    return lines


def empty_splits(statistics_uri: str, split_names: list[str]) -> list[str]:
    """One line per split without examples.

    TFDV validates an empty split without complaint (there are no values to be wrong), so a
    header-only CSV, or data too small to fill the eval split, would otherwise reach the Trainer.
    """
    lines = []
    for split, count in example_counts(statistics_uri, split_names).items():
        if count == 0:
            lines.append(f"[{split}] (dataset): No examples — the split is empty; the CSV "
                         "files hold a header but no data rows, or too few rows to fill it")
    return lines


def example_counts(statistics_uri: str, split_names: list[str]) -> dict[str, int]:
    """Rows per split, as StatisticsGen counted them."""
    counts = {}
    for split in split_names:
        path = os.path.join(statistics_uri, keys.split_dir(split), keys.STATISTICS_FILE)
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        statistics.ParseFromString(tf.io.gfile.GFile(path, "rb").read())
        counts[split] = int(sum(d.num_examples for d in statistics.datasets))
    return counts


def unlabelled_rows(statistics_uri: str, split_names: list[str],
                    label_columns: list[str]) -> dict[str, dict[str, int]]:
    """split → label column → examples without a value there (only the non-zero counts)."""
    counts: dict[str, dict[str, int]] = {}
    for split in split_names:
        path = os.path.join(statistics_uri, keys.split_dir(split), keys.STATISTICS_FILE)
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        statistics.ParseFromString(tf.io.gfile.GFile(path, "rb").read())
        for dataset in statistics.datasets:
            for feature in dataset.features:
                name = feature.path.step[0] if feature.path.step else feature.name
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


@component
def AnomalyGate(
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    drift_report: InputArtifact[standard_artifacts.ExampleAnomalies] = None,
    label_columns: Parameter[str] = "",
    missing_labels: Parameter[str] = "stop",
    code_version: Parameter[str] = "",
) -> None:
    """Fails when the anomalies artifact holds any anomaly, a split has no examples, (unless
    the dataset spec drops them) rows have no label, or a column drifted past its threshold
    from the previous span (`drift_report`, DriftValidator's, when the run has one).

    label_columns: the raw columns the label is made from, comma-separated.
    missing_labels: the spec's [label] missing: 'stop' or 'drop'.
    code_version: the step's code hash (pipeline/cache_keys.py), so an edited gate never runs
      from cache.
    """
    del code_version
    splits = artifact_utils.decode_split_names(anomalies.split_names)
    statistics_splits = artifact_utils.decode_split_names(statistics.split_names)
    problems = (empty_splits(statistics.uri, statistics_splits)
                + describe_anomalies(anomalies.uri, splits))
    if missing_labels != "drop":
        columns = [c for c in label_columns.split(",") if c]
        for split, counts in unlabelled_rows(statistics.uri, statistics_splits, columns).items():
            problems += [f"[{split}] {column}: {count} example(s) have no label value — fill "
                         "them in, or set missing = \"drop\" under [label] in the dataset spec"
                         for column, count in counts.items()]
    if problems:
        raise DataAnomaliesError(
            f"the data does not match the schema: {len(problems)} anomal"
            f"{'y' if len(problems) == 1 else 'ies'} found by ExampleValidator "
            f"(details in {anomalies.uri}):\n  " + "\n  ".join(problems)
            + "\nFix the data, or, if the data is right and the schema is out of date, update "
            "the dataset's schema.pbtxt (`make schema` shows what TFDV infers now)."
        )
    if drift_report is not None:
        report, stopped = drifted(drift_report.uri)
        if stopped:
            raise DataDriftError(
                f"span {report['span']} drifted from span {report['previous_span']} on "
                f"{len(stopped)} column(s):\n  " + "\n  ".join(d.describe() for d in stopped)
                + "\nNothing was trained or pushed. If the data is wrong, fix the span and run "
                "again; if the change is real, raise the column's threshold under [drift] "
                "thresholds in the dataset's spec.toml, or list it under [drift] warn_only.")
