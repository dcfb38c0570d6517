"""What the last run did, read back from its MLMD store: states, durations, blessing, push
(what the Evaluator's files say is read in pipeline/runs/eval_results.py).

Runners print this after a run, and tests assert on the same records, so what a user is told
and what is checked come from one source: the metadata TFX itself wrote.
"""

import dataclasses
import os

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2

from pipeline import names
from pipeline.components import baselines
from pipeline.runs import eval_results

_STATE_NAMES = {v: k for k, v in metadata_store_pb2.Execution.State.items()}
OK_STATES = ("COMPLETE", "CACHED")


@dataclasses.dataclass
class NodeRun:
    node_id: str
    state: str
    outputs: dict[str, list[metadata_store_pb2.Artifact]]
    started: float  # seconds since the epoch: MLMD's execution registered / last updated
    finished: float

    @property
    def milliseconds(self) -> int:
        """MLMD's whole milliseconds between the two, exactly (the difference of the two
        floats is off by a hair, which a 0.05 s boundary turns into another rounding)."""
        return max(0, round((self.finished - self.started) * 1000))

    @property
    def seconds(self) -> float:
        return self.milliseconds / 1000


@dataclasses.dataclass
class RunSummary:
    run_id: str
    nodes: dict[str, NodeRun]
    baseline_skipped: str | None = None  # why the last blessed model was not the baseline

    @property
    def succeeded(self) -> bool:
        return bool(self.nodes) and all(n.state in OK_STATES for n in self.nodes.values())

    @property
    def failed_nodes(self) -> list[str]:
        return [n.node_id for n in self.nodes.values() if n.state not in OK_STATES]

    @property
    def component_seconds(self) -> float:
        # Whole milliseconds summed, then divided once: a sum of the nodes' float seconds
        # depends on their order in its last bit, which a 0.05 s boundary shows.
        return sum(n.milliseconds for n in self.nodes.values()) / 1000

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
        nodes[node_id] = NodeRun(node_id, _STATE_NAMES.get(execution.last_known_state, "UNKNOWN"),
                                 outputs, execution.create_time_since_epoch / 1000,
                                 execution.last_update_time_since_epoch / 1000)
    summary = RunSummary(run.name, nodes)
    candidate = summary.output(names.TRAINER, names.MODEL)
    if candidate is not None and names.EVALUATOR in nodes:
        blessing_type = store.get_artifact_type("ModelBlessing")
        blessings = [a for a in store.get_artifacts_by_context(pipeline_ctx.id)
                     if a.type_id == blessing_type.id]
        _, summary.baseline_skipped = baselines.comparable_baseline(
            store, candidate.id, baselines.blessed_model_ids(blessings))
    return summary


def format_summary(summary: RunSummary) -> str:
    lines = [f"Run {summary.run_id}:"]
    for node in summary.nodes.values():
        lines.append(f"  {node.node_id:<32} {node.state:<9} {node.seconds:7.1f} s")
    lines.append(f"  {'component time':<32} {'':<9} {summary.component_seconds:7.1f} s")
    if summary.evaluation_uri:
        metrics = eval_results.overall_metrics(summary.evaluation_uri)
        shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())
                          if not k.endswith("_diff") and k != "example_count")
        lines.append(f"Eval metrics: {shown}  ({summary.evaluation_uri})")
    if summary.baseline_skipped:
        lines.append(f"Baseline: skipped — {summary.baseline_skipped}")
    if summary.blessed:
        lines.append("Blessed: yes")
    elif summary.blessed is False:
        lines.append("Blessed: no — the model failed the Evaluator's thresholds:")
        lines.extend(f"  {reason}"
                     for reason in eval_results.validation_failures(summary.evaluation_uri))
    if summary.pushed_destination:
        lines.append(f"Pushed model: {summary.pushed_destination}")
    elif names.PUSHER in summary.nodes:
        lines.append("Pushed model: none (the model was not blessed; the serving dir is unchanged)")
    if summary.failed_nodes:
        lines.append(f"FAILED: {', '.join(summary.failed_nodes)}")
    return "\n".join(lines)
