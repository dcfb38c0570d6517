"""DriftValidator: how far a span's values moved from the previous span's.

ExampleValidator checks a span against the schema: types, domains, presence. A partner who
starts sending fares in cents passes all of that. This validator compares the new span's
training statistics with the previous span's (TFDV's comparators, pipeline/drift.py) and writes
each column's distance, threshold and whether it is past it (`drift.json`). Like
ExampleValidator it only records: the AnomalyGate stops the run on a column past its threshold
(pipeline/components/anomaly_gate.py), so the figures of a stopped span stay in the store for
the report, as TFX keeps no output of a failed step.
"""

import json
import os

import tensorflow as tf
import tensorflow_data_validation as tfdv
from absl import logging
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from pipeline import drift
from pipeline.components.span_resolver import span_of
from trainer_module import keys

DRIFT_FILE = "drift.json"


def _train_statistics(artifact: standard_artifacts.ExampleStatistics):
    return tfdv.load_stats_binary(
        os.path.join(artifact.uri, keys.split_dir(keys.TRAIN_SPLIT), keys.STATISTICS_FILE))


def read_drift(uri: str) -> dict:
    """What a DriftValidator wrote: span, previous_span and per column distance, threshold,
    method, past and warn_only."""
    with tf.io.gfile.GFile(os.path.join(uri, DRIFT_FILE)) as f:
        return json.load(f)


@component
def DriftValidator(
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
    """Writes each thresholded column's distance from the previous span. `examples` and
    `previous_examples` are the two spans' Examples, which carry their span numbers.

    thresholds: the spec's [drift] thresholds as JSON, column → distance.
    warn_only: the columns whose drift only warns, comma-separated.
    code_version: the step's code hash (pipeline/cache_keys.py).
    """
    del code_version
    limits = json.loads(thresholds)
    relaxed = {c for c in warn_only.split(",") if c}
    # ImportSchemaGen's one file.
    schema_proto = tfdv.load_schema_text(io_utils.get_only_uri_in_dir(schema.uri))
    found = drift.distances(_train_statistics(statistics), _train_statistics(previous_statistics),
                            schema_proto, limits, drift.DRIFT)
    span, previous = span_of(examples), span_of(previous_examples)
    drift_report.split_names = '["train"]'
    with tf.io.gfile.GFile(os.path.join(drift_report.uri, DRIFT_FILE), "w") as f:
        json.dump({"span": span, "previous_span": previous,
                   "columns": {d.column: {"distance": d.distance, "threshold": d.threshold,
                                          "method": d.method, "past": d.past,
                                          "warn_only": d.column in relaxed}
                               for d in found}}, f, indent=1)
    for d in found:
        logging.info("Drift from span %d to span %d: %s%s", previous, span, d.describe(),
                     " (warn only)" if d.column in relaxed else "")
    warned = [d for d in found if d.past and d.column in relaxed]
    if warned:
        logging.warning("Drift past its threshold, warn only: %s",
                        "; ".join(d.describe() for d in warned))
