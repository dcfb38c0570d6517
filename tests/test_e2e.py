"""The whole DAG on CPU, as a user runs it: `python pipeline/local_runner.py` and the tfx CLI.

Asserts on what TFX itself recorded (MLMD execution states in the SQLite store) and on the
pushed SavedModel answering raw tf.Examples.
"""

import os
import shutil
import subprocess
import sys

import ml_metadata as mlmd
import numpy as np
import pytest
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2

import taxi_rows
from pipeline.pipeline_config import REPO_ROOT
from trainer_module import features

pytestmark = pytest.mark.e2e

NODES = {"CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "AnomalyGate",
         "Transform", "Trainer", "baseline_resolver", "Evaluator", "Pusher"}
BIN = os.path.dirname(sys.executable)


def _env(output_dir, **extra) -> dict[str, str]:
    env = dict(os.environ, OUTPUT_DIR=str(output_dir), TRAIN_STEPS="48",
               MIN_EVAL_ACCURACY="0.5", TF_CPP_MIN_LOG_LEVEL="2", **extra)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    return env


def _execution_states(metadata_path: str, pipeline_name: str = "taxi-tpu") -> dict[str, str]:
    """node id → state of its latest execution, straight from the MLMD store."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    store = mlmd.MetadataStore(config)
    states = {}
    for execution in sorted(store.get_executions(), key=lambda e: e.id):
        for context in store.get_contexts_by_execution(execution.id):
            if context.type == "node":
                node = context.name.removeprefix(pipeline_name + ".")
                states[node] = metadata_store_pb2.Execution.State.Name(execution.last_known_state)
    return states


def _serve(serving_model_dir: str, rows: list[dict[str, str]]) -> np.ndarray:
    versions = sorted(os.listdir(serving_model_dir))
    assert len(versions) == 1, versions
    model = tf.saved_model.load(os.path.join(serving_model_dir, versions[0]))
    examples = [taxi_rows.to_example(r, drop=features.LABEL_SOURCE_FEATURES).SerializeToString()
                for r in rows]
    return model.signatures["serving_default"](examples=tf.constant(examples))[
        "probabilities"].numpy()


def test_local_runner_runs_every_component_and_pushes_a_serving_model(tmp_path):
    output = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "pipeline", "local_runner.py")],
        env=_env(output), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Pushed model: " + str(output / "serving_model") in result.stdout

    states = _execution_states(str(output / "metadata" / "metadata.db"))
    assert set(states) == NODES
    assert all(state == "COMPLETE" for state in states.values()), states

    rows = taxi_rows.read_rows(20)
    probabilities = _serve(str(output / "serving_model"), rows)
    assert probabilities.shape == (20, 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    assert len(np.unique(probabilities.round(6))) > 1  # a trained model, not a constant


def test_tfx_cli_creates_and_runs_the_pipeline_on_another_data_dir(tmp_path):
    data_dir = tmp_path / "my_data"
    data_dir.mkdir()
    with open(taxi_rows.SHIPPED_CSV, encoding="utf-8") as f:
        (data_dir / "trips.csv").write_text("".join(f.readlines()[:3001]))
    output = tmp_path / "out"
    env = _env(output, DATA_DIR=str(data_dir), LOCAL_HOME=str(tmp_path / "tfx_home"))
    tfx = shutil.which("tfx", path=env["PATH"])
    assert tfx, "the tfx CLI is not installed in the project's venv"

    create = subprocess.run(
        [tfx, "pipeline", "create", "--engine", "local", "--pipeline_path",
         os.path.join(REPO_ROOT, "pipeline", "local_runner.py")],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert create.returncode == 0, create.stdout[-2000:] + create.stderr[-3000:]

    run = subprocess.run(
        [tfx, "run", "create", "--engine", "local", "--pipeline_name", "taxi-tpu"],
        env=env, capture_output=True, text=True, timeout=900, cwd=str(tmp_path))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    states = _execution_states(str(output / "metadata" / "metadata.db"))
    assert set(states) == NODES and set(states.values()) == {"COMPLETE"}, states
    assert _serve(str(output / "serving_model"), taxi_rows.read_rows(3)).shape == (3, 1)

