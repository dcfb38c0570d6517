"""DriftValidator: how far a span's values moved from the previous span's.

ExampleValidator checks a span against the schema: types, domains, presence. A partner who
starts sending fares in cents passes all of that. This validator compares the new span's
training statistics with the previous span's (TFDV's comparators, drift.py) and writes each
column's distance, threshold and whether it is past it (`drift.json`). Like
ExampleValidator it only records: the AnomalyGate stops the run on a column past its threshold
(pipeline/components/anomaly_gate.py), so the figures of a stopped span stay in the store for
the report, as TFX keeps no output of a failed step.

Where the previous span's statistics cannot be resolved from ML Metadata (a compiled Kubeflow or
Vertex spec, whose backends run no span resolver), the validator keeps its own index of each
span's training statistics under `statistics_store` (the span store, store.py): it files this
span's there and compares with the newest earlier span filed. The first span of such a store
has nothing to compare with, which drift.json and the log say.
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

from pipeline.spans import changes, drift
from pipeline.spans import store as span_store
from pipeline.spans.span_resolver import span_of
from trainer_module import keys

DRIFT_FILE = "drift.json"


def _train_statistics_file(artifact: standard_artifacts.ExampleStatistics) -> str:
    return os.path.join(artifact.uri, keys.split_dir(keys.TRAIN_SPLIT), keys.STATISTICS_FILE)


def _file_and_find_previous(store: str, span: int,
                            statistics: standard_artifacts.ExampleStatistics
                            ) -> tuple[int | None, str | None]:
    """Files this span's training statistics in `store`; returns the newest earlier span filed
    there and its statistics file, or (None, None)."""
    span_store.file_statistics(store, span, _train_statistics_file(statistics))
    earlier = {s: path for s, path in span_store.statistics_files(store).items() if s < span}
    if not earlier:
        return None, None
    previous = max(earlier)
    return previous, earlier[previous]


def read_drift(uri: str) -> dict:
    """What a DriftValidator wrote: span, previous_span, per column distance, threshold,
    method, past and warn_only, and (when measured) the ignored columns that changed from the
    previous span (`changes.IgnoredChange.as_dict`)."""
    with tf.io.gfile.GFile(os.path.join(uri, DRIFT_FILE)) as f:
        return json.load(f)


@component
def DriftValidator(
    examples: InputArtifact[standard_artifacts.Examples],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift_report: OutputArtifact[standard_artifacts.ExampleAnomalies],
    previous_examples: InputArtifact[standard_artifacts.Examples] = None,
    previous_statistics: InputArtifact[standard_artifacts.ExampleStatistics] = None,
    thresholds: Parameter[str] = "{}",
    warn_only: Parameter[str] = "",
    statistics_store: Parameter[str] = "",
    code_version: Parameter[str] = "",
) -> None:
    """Writes each thresholded column's distance from the previous span. `examples` and
    `previous_examples` are the two spans' Examples, which carry their span numbers; without
    them, the previous span's statistics come from `statistics_store`.

    thresholds: the spec's [drift] thresholds as JSON, column → distance.
    warn_only: the columns whose drift only warns, comma-separated.
    statistics_store: the folder of each span's training statistics, when no resolver gives
      the previous span's.
    code_version: the step's code hash (pipeline/cache_keys.py).
    """
    del code_version
    limits = json.loads(thresholds)
    relaxed = {c for c in warn_only.split(",") if c}
    span = span_of(examples)
    if statistics_store:
        previous, previous_file = _file_and_find_previous(statistics_store, span, statistics)
    else:
        previous, previous_file = span_of(previous_examples), _train_statistics_file(
            previous_statistics)
    drift_report.split_names = '["train"]'
    report: dict = {"span": span, "previous_span": previous, "columns": {}}
    if previous_file is None:
        report["note"] = (f"no earlier span's statistics in {statistics_store}: drift is "
                          "measured from the next span on")
        logging.warning("Drift of span %d not measured: %s", span, report["note"])
    else:
        # ImportSchemaGen's one file.
        schema_proto = tfdv.load_schema_text(io_utils.get_only_uri_in_dir(schema.uri))
        current = tfdv.load_stats_binary(_train_statistics_file(statistics))
        before = tfdv.load_stats_binary(previous_file)
        found = drift.distances(current, before, schema_proto, limits, drift.DRIFT)
        # The ignored columns are no contract, but a change in one is worth a look.
        report["ignored"] = {c.column: c.as_dict() for c in changes.ignored_changes(
            {keys.TRAIN_SPLIT: current}, schema_proto, {keys.TRAIN_SPLIT: before})}
        report["columns"] = {d.column: {"distance": d.distance, "threshold": d.threshold,
                                        "method": d.method, "past": d.past,
                                        "warn_only": d.column in relaxed} for d in found}
        for d in found:
            logging.info("Drift from span %d to span %d: %s%s", previous, span, d.describe(),
                         " (warn only)" if d.column in relaxed else "")
        warned = [d for d in found if d.past and d.column in relaxed]
        if warned:
            logging.warning("Drift past its threshold, warn only: %s",
                            "; ".join(d.describe() for d in warned))
    # An orchestrator may leave the output folder to the step (kfp.local does).
    tf.io.gfile.makedirs(drift_report.uri)
    with tf.io.gfile.GFile(os.path.join(drift_report.uri, DRIFT_FILE), "w") as f:
        json.dump(report, f, indent=1)
