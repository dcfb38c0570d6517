"""What the last run did, read back from its MLMD store: states, durations, blessing, push.

Runners print this after a run, and tests assert on the same records, so what a user is told
and what is checked come from one source: the metadata TFX itself wrote.
"""

import dataclasses
import os

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2

from pipeline import names

_STATE_NAMES = {v: k for k, v in metadata_store_pb2.Execution.State.items()}
OK_STATES = ("COMPLETE", "CACHED")


@dataclasses.dataclass
class NodeRun:
    node_id: str
    state: str
    seconds: float
    outputs: dict[str, list[metadata_store_pb2.Artifact]]


@dataclasses.dataclass
class RunSummary:
    run_id: str
    nodes: dict[str, NodeRun]

    @property
    def succeeded(self) -> bool:
        return bool(self.nodes) and all(n.state in OK_STATES for n in self.nodes.values())

    @property
    def failed_nodes(self) -> list[str]:
        return [n.node_id for n in self.nodes.values() if n.state not in OK_STATES]

    @property
    def component_seconds(self) -> float:
        return sum(n.seconds for n in self.nodes.values())

    def output(self, node_id: str, key: str) -> metadata_store_pb2.Artifact | None:
        node = self.nodes.get(node_id)
        artifacts = node.outputs.get(key, []) if node else []
        return artifacts[0] if artifacts else None

    @property
    def blessed(self) -> bool | None:
        blessing = self.output(names.EVALUATOR, names.BLESSING)
        if blessing is None:
            return None
        return blessing.custom_properties[names.BLESSED].int_value == 1

    @property
    def evaluation_uri(self) -> str | None:
        evaluation = self.output(names.EVALUATOR, names.EVALUATION)
        return evaluation.uri if evaluation else None

    @property
    def anomalies_uri(self) -> str | None:
        anomalies = self.output(names.EXAMPLE_VALIDATOR, names.ANOMALIES)
        return anomalies.uri if anomalies else None

    @property
    def pushed_destination(self) -> str | None:
        pushed = self.output(names.PUSHER, names.PUSHED_MODEL)
        if pushed is None or pushed.custom_properties[names.PUSHED].int_value != 1:
            return None
        return pushed.custom_properties[names.PUSHED_DESTINATION].string_value


def open_store(metadata_path: str, create: bool = False) -> mlmd.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = (
        metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        if create else metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    )
    return mlmd.MetadataStore(config)


def node_id_of(store: mlmd.MetadataStore, execution: metadata_store_pb2.Execution) -> str:
    """The pipeline node an execution belongs to (its `node` context is '<pipeline>.<node>')."""
    for context in store.get_contexts_by_execution(execution.id):
        if context.type == "node":
            return context.name.split(".", 1)[-1]
    return f"execution {execution.id}"


def latest_run(metadata_path: str, pipeline_name: str) -> RunSummary | None:
    """The most recent pipeline run of `pipeline_name` in the store, or None if it has none."""
    if not os.path.exists(metadata_path):
        return None
    store = open_store(metadata_path)
    pipeline_ctx = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline_ctx is None:
        return None
    run_ids = {c.id for c in store.get_children_contexts_by_context(pipeline_ctx.id)}
    runs = [c for c in store.get_contexts_by_type("pipeline_run")
            if c.id in run_ids or not run_ids]
    if not runs:
        return None
    run = max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
    executions = sorted(store.get_executions_by_context(run.id), key=lambda e: e.id)
    nodes: dict[str, NodeRun] = {}
    for execution in executions:
        node_id = node_id_of(store, execution)
        outputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
        events = store.get_events_by_execution_ids([execution.id])
        output_events = [e for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
        artifacts = {a.id: a for a in store.get_artifacts_by_id(
            [e.artifact_id for e in output_events])}
        for event in output_events:
            key = event.path.steps[0].key if event.path.steps else ""
            outputs.setdefault(key, []).append(artifacts[event.artifact_id])
        seconds = max(
            0.0,
            (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000,
        )
        nodes[node_id] = NodeRun(node_id, _STATE_NAMES.get(execution.last_known_state, "UNKNOWN"),
                                 seconds, outputs)
    return RunSummary(run.name, nodes)


CANDIDATE = "candidate"  # TFMA's model name for the new model when a baseline is compared


def slice_label(pairs) -> str:
    """'overall' or 'feature=value, ...' for (feature, value) pairs of a TFMA slice."""
    return ", ".join(f"{k}={v.decode('utf-8', 'replace') if isinstance(v, bytes) else v}"
                     for k, v in pairs) or "overall"


def slice_metrics(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """Every slice's metrics of a TFMA evaluation (slice label → name → value), for the
    candidate model when a baseline was compared; 'overall' first."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.writers import eval_config_writer

    eval_config = eval_config_writer.load_eval_run(evaluation_uri)[0]
    names = {spec.name for spec in eval_config.model_specs} if eval_config else set()
    result = tfma.load_eval_result(evaluation_uri,
                                   model_name=CANDIDATE if CANDIDATE in names else None)
    slices = {}
    for slice_key, metrics in result.slicing_metrics:
        values = metrics.get("", {}).get("", {})  # the model's one output, no sub-key
        slices[slice_label(slice_key)] = {
            k: float(v["doubleValue"]) for k, v in values.items() if "doubleValue" in v}
    return dict(sorted(slices.items(), key=lambda kv: (kv[0] != "overall", kv[0])))


def overall_metrics(evaluation_uri: str) -> dict[str, float]:
    """Overall-slice metrics of a TFMA evaluation (name → value)."""
    return slice_metrics(evaluation_uri).get("overall", {})


@dataclasses.dataclass(frozen=True)
class Failure:
    """One threshold TFMA found failed."""

    metric: str
    slice: str
    is_change: bool  # a change threshold against the baseline (else a value threshold)
    text: str


def threshold_failures(evaluation_uri: str) -> list[Failure]:
    """Why the Evaluator did not bless: each failed threshold, from TFMA's validation result."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(evaluation_uri)
    failures = []
    for per_slice in result.metric_validations_per_slice:
        where = slice_label((k.column, _slice_value(k))
                            for k in per_slice.slice_key.single_slice_keys)
        for failure in per_slice.failures:
            failures.append(Failure(failure.metric_key.name, where,
                                    failure.metric_threshold.HasField("change_threshold"),
                                    f"{where}: {_describe_failure(failure)}"))
    if not failures and not result.validation_ok:
        failures.append(Failure("", "", False, "TFMA reports missing slices or thresholds; "
                                               f"see {evaluation_uri}"))
    return failures


def validation_failures(evaluation_uri: str) -> list[str]:
    """Why the Evaluator did not bless: one line per failed threshold and slice."""
    return [f.text for f in threshold_failures(evaluation_uri)]


def _slice_value(key) -> str:
    kind = key.WhichOneof("kind")
    value = getattr(key, kind) if kind else ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def value_rule(bounds) -> str:
    """A GenericValueThreshold in words: '>= 0.8500', '>= 0.1000 and <= 0.9000'."""
    limits = []
    if bounds.HasField("lower_bound"):
        limits.append(f">= {bounds.lower_bound.value:.4f}")
    if bounds.HasField("upper_bound"):
        limits.append(f"<= {bounds.upper_bound.value:.4f}")
    return " and ".join(limits)


def change_rule(change) -> str:
    """A GenericChangeThreshold in words, in its direction: 'no drop', 'a drop of at most …'."""
    from tensorflow_model_analysis.proto import config_pb2

    allowed = change.absolute.value if change.HasField("absolute") else 0.0
    if change.direction == config_pb2.MetricDirection.LOWER_IS_BETTER:
        return f"a rise of at most {allowed:.4f}" if allowed > 1e-6 else "no rise"
    return f"a drop of at most {-allowed:.4f}" if allowed < -1e-6 else "no drop"


def _describe_failure(failure) -> str:
    name = failure.metric_key.name
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    if threshold.HasField("change_threshold"):
        return (f"{name} changed by {value:+.4f} against the last blessed model "
                f"(threshold: {change_rule(threshold.change_threshold)})")
    return f"{name} = {value:.4f} (threshold: {value_rule(threshold.value_threshold)})"


def format_summary(summary: RunSummary) -> str:
    lines = [f"Run {summary.run_id}:"]
    for node in summary.nodes.values():
        lines.append(f"  {node.node_id:<32} {node.state:<9} {node.seconds:7.1f} s")
    lines.append(f"  {'component time':<32} {'':<9} {summary.component_seconds:7.1f} s")
    if summary.evaluation_uri:
        metrics = overall_metrics(summary.evaluation_uri)
        shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())
                          if not k.endswith("_diff") and k != "example_count")
        lines.append(f"Eval metrics: {shown}  ({summary.evaluation_uri})")
    if summary.blessed:
        lines.append("Blessed: yes")
    elif summary.blessed is False:
        lines.append("Blessed: no — the model failed the Evaluator's thresholds:")
        lines.extend(f"  {reason}" for reason in validation_failures(summary.evaluation_uri))
    if summary.pushed_destination:
        lines.append(f"Pushed model: {summary.pushed_destination}")
    elif names.PUSHER in summary.nodes:
        lines.append("Pushed model: none (the model was not blessed; the serving dir is unchanged)")
    if summary.failed_nodes:
        lines.append(f"FAILED: {', '.join(summary.failed_nodes)}")
    return "\n".join(lines)
