"""DriftGate: stops a span whose values moved too far from the previous span's.

The anomaly gate checks a span against the schema: types, domains, presence. A partner who
starts sending fares in cents passes all of that. This gate compares the new span's training
statistics with the previous span's (TFDV's comparators, pipeline/drift.py) and fails when a
column moved past its threshold, naming each such column with its distance and threshold, so
Transform, the Trainer and the Pusher never run on it and the served model stays as it was. A
column under `[drift] warn_only` is reported and does not stop the run.

Its output holds each column's distance (`drift.json`), for the report's drift picture.
"""

import json
import os

import tensorflow as tf
import tensorflow_data_validation as tfdv
from absl import logging
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from pipeline import drift
from pipeline.components.span_resolver import span_of
from trainer_module import keys

DRIFT_FILE = "drift.json"


class DataDriftError(RuntimeError):
    """A span's values moved past a threshold from the previous span's."""


def _train_statistics(artifact: standard_artifacts.ExampleStatistics):
    return tfdv.load_stats_binary(
        os.path.join(artifact.uri, keys.split_dir(keys.TRAIN_SPLIT), keys.STATISTICS_FILE))


def read_drift(uri: str) -> dict:
    """What a DriftGate wrote: span, previous_span and per column distance, threshold,
    method, warn_only."""
    with tf.io.gfile.GFile(os.path.join(uri, DRIFT_FILE)) as f:
        return json.load(f)


@component
def DriftGate(
    examples: InputArtifact[standard_artifacts.Examples],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    previous_examples: InputArtifact[standard_artifacts.Examples],
    previous_statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift_report: OutputArtifact[standard_artifacts.ExampleAnomalies],
    thresholds: Parameter[str] = "{}",
    warn_only: Parameter[str] = "",
    code_version: Parameter[str] = "",
) -> None:
    """Fails when a column without warn_only moved past its threshold. `examples` and
    `previous_examples` are the two spans' Examples, which carry their span numbers.

    thresholds: the spec's [drift] thresholds as JSON, column → distance.
    warn_only: the columns whose drift only warns, comma-separated.
    code_version: the step's code hash (pipeline/cache_keys.py).
    """
    del code_version
    limits = json.loads(thresholds)
    relaxed = {c for c in warn_only.split(",") if c}
    schema_proto = tfdv.load_schema_text(os.path.join(schema.uri, "schema.pbtxt"))
    found = drift.distances(_train_statistics(statistics), _train_statistics(previous_statistics),
                            schema_proto, limits, drift.DRIFT)
    span, previous = span_of(examples), span_of(previous_examples)
    drift_report.split_names = '["train"]'
    with tf.io.gfile.GFile(os.path.join(drift_report.uri, DRIFT_FILE), "w") as f:
        json.dump({"span": span, "previous_span": previous,
                   "columns": {d.column: {"distance": d.distance, "threshold": d.threshold,
                                          "method": d.method, "warn_only": d.column in relaxed}
                               for d in found}}, f, indent=1)
    for d in found:
        logging.info("Drift from span %d to span %d: %s%s", previous, span, d.describe(),
                     " (warn only)" if d.column in relaxed else "")
    warned = [d for d in found if d.past and d.column in relaxed]
    if warned:
        logging.warning("Drift past its threshold, warn only: %s",
                        "; ".join(d.describe() for d in warned))
    stopped = [d for d in found if d.past and d.column not in relaxed]
    if stopped:
        raise DataDriftError(
            f"span {span} drifted from span {previous} on {len(stopped)} column(s):\n  "
            + "\n  ".join(d.describe() for d in stopped)
            + "\nNothing was trained or pushed. If the data is wrong, fix the span and run "
            "again; if the change is real, raise the column's threshold under [drift] "
            "thresholds in the dataset's spec.toml, or list it under [drift] warn_only.")
