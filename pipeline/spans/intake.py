"""The older spans a run reads from the store, and reading those no run has read yet.

A run with a window (`[training] window_spans`) or a drift gate reads older spans' Examples and
statistics from ML Metadata, by span, through TFX's span-range resolution (pipeline/dag.py).
A span that is in the data dir but was never read (the first run over a folder of several
spans, or a window widened in the spec) has nothing there. Before the run, each such span goes
through the DAG's own first two nodes, CsvExampleGen and StatisticsGen, under the same pipeline
and node names, so its outputs are stored exactly as a daily run would have stored them.
"""

import dataclasses
import os

from ml_metadata.proto import metadata_store_pb2

from pipeline import names
from pipeline.pipeline_config import PipelineConfig
from pipeline.runs.run_summary import open_store


def needed(config: PipelineConfig) -> list[int]:
    """The spans other than the chosen one that this run reads from the store."""
    spans = set(config.window)
    if config.spec.drift_thresholds and config.previous_span is not None:
        spans.add(config.previous_span)
    spans.discard(config.span)
    return sorted(spans)


def stored(config: PipelineConfig) -> set[int]:
    """The spans whose Examples this pipeline's store holds (ExampleGen and StatisticsGen run
    together, in a run and in `read_spans`)."""
    if not os.path.exists(config.metadata_path):
        return set()
    # TFX's name for the property; its module loads TensorFlow, which a run loads only later.
    from tfx.components.example_gen.utils import SPAN_PROPERTY_NAME

    store = open_store(config.metadata_path)
    node = store.get_context_by_type_and_name(
        "node", f"{config.pipeline_name}.{names.CSV_EXAMPLE_GEN}")
    if node is None:
        return set()
    return {a.custom_properties[SPAN_PROPERTY_NAME].int_value
            for a in store.get_artifacts_by_context(node.id)
            if a.state == metadata_store_pb2.Artifact.LIVE
            and SPAN_PROPERTY_NAME in a.custom_properties}


def missing(config: PipelineConfig) -> list[int]:
    """The spans this run reads from the store that no run has read yet."""
    have = stored(config)
    return [span for span in needed(config) if span not in have]


def read_spans(config: PipelineConfig, spans: list[int]) -> None:
    """Runs CsvExampleGen and StatisticsGen of the DAG on each of `spans`, oldest first."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import dag

    for span in spans:
        LocalDagRunner().run(dag.create_intake_pipeline(dataclasses.replace(config, span=span)))
