"""Test helpers: what TFX recorded in a run's SQLite ML Metadata store, read directly.

Tests read the store themselves rather than through pipeline/runs/run_summary.py, so they check
TFX's own records, not the project's reading of them.
"""

import dataclasses

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2


def store(metadata_path: str) -> mlmd.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    return mlmd.MetadataStore(config)


def node_of(store: mlmd.MetadataStore, execution: metadata_store_pb2.Execution) -> str:
    [node] = [c.name.split(".", 1)[1] for c in store.get_contexts_by_execution(execution.id)
              if c.type == "node"]
    return node


def state(execution: metadata_store_pb2.Execution) -> str:
    return metadata_store_pb2.Execution.State.Name(execution.last_known_state)


def execution_states(metadata_path: str) -> dict[str, str]:
    """node id → state of its latest execution."""
    db = store(metadata_path)
    return {node_of(db, e): state(e) for e in sorted(db.get_executions(), key=lambda e: e.id)}


@dataclasses.dataclass
class RunRecord:
    """One pipeline run as TFX recorded it."""

    states: dict[str, str]
    component_seconds: float  # summed over the run's executions
    seconds: dict[str, float]  # node id → its execution's registered → last update


def latest_run(metadata_path: str) -> RunRecord:
    db = store(metadata_path)
    run = max(db.get_contexts_by_type("pipeline_run"), key=lambda c: c.id)
    executions = db.get_executions_by_context(run.id)
    milliseconds = {node_of(db, e): e.last_update_time_since_epoch - e.create_time_since_epoch
                    for e in executions}
    # Whole milliseconds summed, then divided once, so the total does not depend on the order.
    return RunRecord({node_of(db, e): state(e) for e in executions},
                     sum(milliseconds.values()) / 1000,
                     {node: ms / 1000 for node, ms in milliseconds.items()})
