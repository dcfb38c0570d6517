"""A user's edits to the project's code, as the local runner sees them: what reruns, what stays
CACHED (in ML Metadata), and what the terminal shows by default.

The runs use a copy of the project (first on PYTHONPATH), so the edits never touch the checkout.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

import mlmd_records
from dataset_rows import TAXI, write_csv
from pipeline import cache_keys, names
from pipeline.pipeline_config import REPO_ROOT

pytestmark = pytest.mark.e2e

NODES = (names.CSV_EXAMPLE_GEN, names.SCHEMA_GEN, names.STATISTICS_GEN,
         names.EXAMPLE_VALIDATOR, names.ANOMALY_GATE, names.TRANSFORM, names.TRAINER,
         names.BASELINE_RESOLVER, names.EVALUATOR, names.PUSHER)
# A code change, not a comment.
EDIT = "\n_EDITED_BY_THE_RERUN_TEST = 1\n"


def _copy_project(root) -> str:
    for folder in (*cache_keys.PROJECT_PACKAGES, "schemas"):
        shutil.copytree(os.path.join(REPO_ROOT, folder), os.path.join(root, folder),
                        ignore=shutil.ignore_patterns("__pycache__", "inferred_schema.pbtxt"))
    return str(root)


def _run(project: str, data_dir, output) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": project, "TRAIN_STEPS": "100",
           "MIN_EVAL_ACCURACY": "0.5", "MAX_ACCURACY_REGRESSION": "1"}
    env.pop("VERBOSE", None)
    return subprocess.run(
        [sys.executable, os.path.join(project, "pipeline", "local_runner.py"), "--data-dir",
         str(data_dir), "--output-dir", str(output)],
        env=env, capture_output=True, text=True, timeout=900)


def test_a_default_run_is_short_and_edits_rerun_only_their_steps(tmp_path):
    project = _copy_project(tmp_path / "project")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_csv(data_dir / "trips.csv", TAXI.read_rows(2000))
    output = tmp_path / "out"
    metadata = str(output / "metadata" / "metadata.db")

    first = _run(project, data_dir, output)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert mlmd_records.latest_run(metadata).states == dict.fromkeys(NODES, "COMPLETE")
    # The terminal: what the run does, each component, the summary; the rest in the log.
    lines = first.stdout.splitlines()
    assert len(lines) < 60, first.stdout
    for node in NODES:
        assert f"→ {node} started" in lines and f"✓ {node} finished" in first.stdout, node
    assert "INFO" not in first.stdout + first.stderr
    [log] = re.findall(r"^Log: (\S+)", first.stdout, re.M)
    assert os.path.dirname(log) == str(output / "logs")
    with open(log, encoding="utf-8") as f:
        logged = f.read()
    assert "Epoch 1/" in logged and "Component Trainer is running." in logged

    # The metrics that decide the blessing: the Evaluator re-runs (and the Pusher after it).
    reruns = {"pipeline/components/eval_metrics.py": (names.EVALUATOR, names.PUSHER),
              "pipeline/components/pusher.py": (names.PUSHER,),
              "trainer_module/model.py": (names.TRAINER, names.EVALUATOR, names.PUSHER)}
    for module, rerun in reruns.items():
        with open(os.path.join(project, module), "a", encoding="utf-8") as f:
            f.write(EDIT)
        result = _run(project, data_dir, output)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        states = mlmd_records.latest_run(metadata).states
        expected = {**dict.fromkeys(NODES, "CACHED"), names.BASELINE_RESOLVER: "COMPLETE",
                    **dict.fromkeys(rerun, "COMPLETE")}
        assert states == expected, (module, states)
