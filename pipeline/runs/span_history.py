"""What the store holds across spans: each span's drift from the one before (the drift validator's
reports), and the headline metric of every blessed model with the span it was evaluated on.
The report draws both (pipeline/runs/report.py)."""

import dataclasses
import os

from ml_metadata.proto import metadata_store_pb2

from pipeline import names
from pipeline.runs import eval_results
from pipeline.runs.run_summary import node_id_of, open_store


@dataclasses.dataclass(frozen=True)
class SpanHistory:
    """drift: span → column → (distance, threshold), one entry per span the gate compared;
    blessed: (span, headline metric) of each blessed model, oldest first."""

    drift: dict[int, dict[str, tuple[float, float]]]
    blessed: list[tuple[int, float]]

    @property
    def several_spans(self) -> bool:
        """More than one span was read: a flat folder's runs are all span 0."""
        return len(set(self.drift) | {span for span, _ in self.blessed}) > 1


def read(metadata_path: str, pipeline_name: str, metric: str) -> SpanHistory:
    """The drift reports and blessed models of `pipeline_name`'s runs."""
    # Loads TensorFlow: only once there is a run to read.
    from tfx.components.example_gen.utils import SPAN_PROPERTY_NAME

    from pipeline.spans.drift_validator import DRIFT_FILE, read_drift

    store = open_store(metadata_path)
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        return SpanHistory({}, [])
    drift: dict[int, dict[str, tuple[float, float]]] = {}
    blessed: list[tuple[int, float]] = []
    for execution in sorted(store.get_executions_by_context(pipeline.id), key=lambda e: e.id):
        node = node_id_of(store, execution)
        if node not in (names.DRIFT_VALIDATOR, names.EVALUATOR):
            continue
        events = store.get_events_by_execution_ids([execution.id])
        artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}

        def of(kind: int, key: str, events=events, artifacts=artifacts) -> list:
            return [artifacts[e.artifact_id] for e in events
                    if e.type == kind and e.path.steps and e.path.steps[0].key == key]

        if node == names.DRIFT_VALIDATOR:
            for report in of(metadata_store_pb2.Event.OUTPUT, names.DRIFT_REPORT):
                if os.path.exists(os.path.join(report.uri, DRIFT_FILE)):
                    found = read_drift(report.uri)
                    drift[found["span"]] = {c: (v["distance"], v["threshold"])
                                            for c, v in found["columns"].items()}
            continue
        examples = of(metadata_store_pb2.Event.INPUT, names.EXAMPLES)
        blessings = of(metadata_store_pb2.Event.OUTPUT, names.BLESSING)
        evaluations = of(metadata_store_pb2.Event.OUTPUT, names.EVALUATION)
        if (examples and SPAN_PROPERTY_NAME in examples[0].custom_properties and blessings
                and evaluations
                and blessings[0].custom_properties[names.BLESSED].int_value == 1):
            value = eval_results.overall_metrics(evaluations[0].uri).get(metric)
            if value is not None:
                blessed.append((examples[0].custom_properties[SPAN_PROPERTY_NAME].int_value,
                                value))
    return SpanHistory(drift, blessed)
