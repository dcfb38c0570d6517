"""The whole DAG on CPU, as a user runs it: `python pipeline/local_runner.py` and the tfx CLI.

Asserts on what TFX itself recorded (MLMD execution states in the SQLite store) and on the
pushed SavedModel answering raw tf.Examples.
"""

import csv
import glob
import gzip
import itertools
import json
import math
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2

import mlmd_records
import report_page
from conftest import tree_hashes
from dataset_rows import PENGUINS, TAXI, DatasetRows, write_csv
from pipeline.pipeline_config import REPO_ROOT
from pipeline.runs import eval_results
from pipeline.tools import predict
from trainer_module import keys
from trainer_module.missing import folded, is_missing

pytestmark = pytest.mark.e2e

NODES = {"CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "AnomalyGate",
         "Transform", "Trainer", "baseline_resolver", "Evaluator", "Pusher"}
DATA_DEPENDENT = ("CsvExampleGen", "StatisticsGen", "ExampleValidator", "AnomalyGate",
                  "Transform")
UPSTREAM_OF_TRAINER = ("ImportSchemaGen",) + DATA_DEPENDENT
TRAINER_ON = ("Trainer", "baseline_resolver", "Evaluator", "Pusher")
# What a run records when only the Trainer's inputs or settings changed.
FROM_TRAINER_ON = {**dict.fromkeys(UPSTREAM_OF_TRAINER, "CACHED"),
                   **dict.fromkeys(TRAINER_ON, "COMPLETE")}
BIN = os.path.dirname(sys.executable)
RUNNER = os.path.join(REPO_ROOT, "pipeline", "local_runner.py")


def _env(output_dir, **extra) -> dict[str, str]:
    env = {**os.environ, "OUTPUT_DIR": str(output_dir), "TRAIN_STEPS": "300",
           "MIN_EVAL_ACCURACY": "0.5", "TF_CPP_MIN_LOG_LEVEL": "2", **extra}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    return env


def _serve_outputs(model_dir, rows: list[dict[str, str]], dataset: DatasetRows = TAXI) -> dict:
    model = tf.saved_model.load(str(model_dir))
    examples = tf.constant(dataset.serialized(rows, serving=True))
    served = model.signatures[keys.SERVING_SIGNATURE](examples=examples)
    return {k: v.numpy() for k, v in served.items()}


def _serve(model_dir, rows: list[dict[str, str]]) -> np.ndarray:
    return _serve_outputs(model_dir, rows)["probabilities"]


def _runner(data_dir, output) -> list[str]:
    return [sys.executable, RUNNER, "--data-dir", str(data_dir), "--output-dir", str(output)]


def _run_pipeline(data_dir, output, **env) -> subprocess.CompletedProcess:
    return subprocess.run(_runner(data_dir, output), env=_env(output, **env),
                          capture_output=True, text=True, timeout=900)


def _everything(result: subprocess.CompletedProcess) -> str:
    """What the run printed and what its log holds (the run prints where the log is)."""
    [log] = re.findall(r"^Log: (\S+)", result.stdout, re.M)
    with open(log, encoding="utf-8") as f:
        return result.stdout + result.stderr + f.read()


def test_reruns_kills_and_bad_data_never_touch_the_served_model(tmp_path):
    """One output dir through a pipeline's life: first run, unchanged rerun, a worse model,
    new data killed mid-Trainer, the rerun after the kill, and bad data."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_csv(data_dir / "trips.csv", TAXI.read_rows(4000))
    output = tmp_path / "out"
    metadata = str(output / "metadata" / "metadata.db")
    serving = output / "serving_model" / "taxi-tpu"
    rows = TAXI.read_rows(20)

    # 1. First run: every component executes; the model is blessed and pushed.
    result = _run_pipeline(data_dir, output)
    assert result.returncode == 0, result.stderr[-4000:]
    first = mlmd_records.latest_run(metadata)
    assert first.states == dict.fromkeys(NODES, "COMPLETE")
    [version] = os.listdir(serving)
    assert f"Pushed model: {serving / version}" in result.stdout
    assert "→ Trainer started" in result.stdout
    assert re.search(r"✓ Trainer finished in \d+\.\d s", result.stdout)
    # No Beam component built a package of TFX for remote workers (and left it in /tmp).
    everything = _everything(result)
    assert "Attempting to infer TFX Python dependency" not in everything
    # The runner set TensorFlow's threads before it started; the Trainer found them in effect.
    assert "intra_op_threads: TensorFlow ops use 1 host thread(s) each" in everything
    assert "intra_op_threads: TensorFlow already started" not in everything
    probabilities = _serve(serving / version, rows)
    assert probabilities.shape == (20, 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    assert len(np.unique(probabilities.round(6))) > 1  # a trained model, not a constant
    served = tree_hashes(serving)
    artifacts = len(mlmd_records.store(metadata).get_artifacts())
    _check_report_of_a_pushed_run(output, first, serving / version)
    # `make predict` on new rows finds that pushed version and answers as it serves.
    new_rows = tmp_path / "new_rows"
    new_rows.mkdir()
    write_csv(new_rows / "rows.csv", rows)
    assert predict.main(["--data-dir", str(new_rows), "--output-dir", str(output)]) == 0
    [scored] = glob.glob(str(output / "predictions" / "*" / "rows.csv"))
    with open(scored, newline="", encoding="utf-8") as f:
        answers = [float(r["probabilities"]) for r in csv.DictReader(f)]
    np.testing.assert_allclose(answers, probabilities[:, 0], rtol=1e-5)

    # 2. Unchanged rerun: every component is served from the cache, nothing new is written.
    result = _run_pipeline(data_dir, output)
    assert result.returncode == 0, result.stderr[-4000:]
    rerun = mlmd_records.latest_run(metadata)
    assert rerun.states == {**dict.fromkeys(NODES, "CACHED"), "baseline_resolver": "COMPLETE"}
    assert len(mlmd_records.store(metadata).get_artifacts()) == artifacts
    assert tree_hashes(serving) == served

    # 3. Only a training setting changes, to a model worse than the served one: the DAG
    #    re-executes from the Trainer on; the model is not blessed, not pushed, and the run
    #    says why.
    result = _run_pipeline(data_dir, output, TRAIN_STEPS="1")
    assert result.returncode == 0, result.stderr[-4000:]
    assert mlmd_records.latest_run(metadata).states == FROM_TRAINER_ON
    assert "Blessed: no" in result.stdout
    assert "overall: binary_accuracy changed by -" in result.stdout
    assert "Pushed model: none" in result.stdout
    assert tree_hashes(serving) == served
    page = report_page.render(output / "report" / "index.html")
    assert page.elements["blessing"].startswith("Blessed: no")
    assert "overall: binary_accuracy changed by -" in page.elements["why-not-blessed"]
    assert {"metric": "binary_accuracy", "slice": "overall", "result": "FAIL"}.items() <= \
        page.tables["thresholds"][-1].items()
    assert page.elements["pushed"].startswith(
        "Pushed: nothing in this run (the model was not blessed)")

    # 4. New data, and the run is killed with SIGKILL while the Trainer runs: the DAG had
    #    re-executed from CsvExampleGen (the schema file, unchanged, stays cached).
    write_csv(data_dir / "more.csv", TAXI.read_rows(6000)[4000:])
    log_path = tmp_path / "killed.log"
    with open(log_path, "w") as log:
        # VERBOSE streams the Trainer's own log: it is killed once it says it trains.
        process = subprocess.Popen(_runner(data_dir, output), env=_env(output, VERBOSE="1"),
                                   stdout=log, stderr=subprocess.STDOUT)
        _wait_for_line(log_path, "Training taxi (binary)", process)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    killed = mlmd_records.latest_run(metadata)
    assert killed.states == {**dict.fromkeys(DATA_DEPENDENT, "COMPLETE"),
                             "ImportSchemaGen": "CACHED", "Trainer": "RUNNING"}
    assert tree_hashes(serving) == served

    # 5. The rerun after the kill reuses what the killed run finished, retrains, and pushes
    #    a complete new version next to the old one. (Any accuracy change is allowed here:
    #    this step is about recovery, not about the gate.)
    result = _run_pipeline(data_dir, output, MAX_ACCURACY_REGRESSION="1")
    assert result.returncode == 0, result.stderr[-4000:]
    assert re.search(r"Marked Trainer \(execution \d+\) CANCELED", result.stdout)
    assert mlmd_records.latest_run(metadata).states == FROM_TRAINER_ON
    new_versions = sorted(set(os.listdir(serving)) - {version})
    assert len(new_versions) == 1, os.listdir(serving)
    assert {k: v for k, v in tree_hashes(serving).items() if k.startswith(version)} == served
    assert _serve(serving / new_versions[0], rows).shape == (20, 1)
    assert not os.path.exists(str(serving) + ".staging")
    _assert_store_consistent(metadata)

    # 6. Bad data: the AnomalyGate fails the run and the serving dir keeps exactly its files.
    served = tree_hashes(serving)
    bad = TAXI.read_rows(2000)
    for row in bad[:100]:
        row["tips"] = "-1.5"
    write_csv(data_dir / "more.csv", bad)
    result = _run_pipeline(data_dir, output)
    assert result.returncode == 1
    assert "[train] tips: Out-of-range values" in result.stderr
    # The failed component, its error, and the end of the run's log, with the log's path.
    assert "error: the pipeline run failed at AnomalyGate: " in result.stderr
    assert re.search(rf"Last lines of {re.escape(str(output))}/logs/run-\S+\.log:",
                     result.stderr)
    states = mlmd_records.latest_run(metadata).states
    assert states["CsvExampleGen"] == "COMPLETE" and states["AnomalyGate"] == "FAILED", states
    assert not {"Transform", "Trainer", "Evaluator", "Pusher"} & set(states), states
    assert tree_hashes(serving) == served
    page = report_page.render(output / "report" / "index.html")
    assert "FAILED at AnomalyGate" in page.elements["status"]
    assert "[train] tips: Out-of-range values" in page.elements["anomalies"]
    assert page.elements["blessing"].startswith("Not evaluated")
    assert page.images == {"durations.png": page.images["durations.png"]}
    _assert_store_consistent(metadata)


def _newest_artifact_uri(metadata: str, type_name: str) -> str:
    return max(mlmd_records.store(metadata).get_artifacts_by_type(type_name),
               key=lambda a: a.id).uri


def _check_report_of_a_pushed_run(output, run: mlmd_records.RunRecord, pushed) -> None:
    """The page the run wrote, as Chromium shows it, against MLMD, TFMA and TensorBoard records
    read here independently."""
    import tensorflow_model_analysis as tfma

    page = report_page.render(output / "report" / "index.html")
    assert set(page.images) == {"training.png", "slices.png", "durations.png"}
    assert all(width > 0 for width in page.images.values()), page.images
    durations = {row["component"]: row for row in page.tables["durations"]}
    for node, seconds in run.seconds.items():
        assert durations[node]["state"] == run.states[node]
        assert durations[node]["seconds"] == f"{seconds:.1f}", (node, durations[node])
    assert durations["component time"]["seconds"] == f"{run.component_seconds:.1f}"

    assert page.elements["blessing"].startswith("Blessed: yes")
    assert page.elements["pushed"] == f"Pushed: {pushed}"
    signature = page.tables["signature-serving_default"]
    assert {"tensor": "input", "name": "examples", "dtype [shape]": "string [?]"} in signature
    assert {"tensor": "output", "name": "probabilities",
            "dtype [shape]": "float32 [?, 1]"} in signature
    assert page.elements["anomalies"].startswith("None")

    metadata = str(output / "metadata" / "metadata.db")
    evaluation = tfma.load_eval_result(_newest_artifact_uri(metadata, "ModelEvaluation"))
    [overall] = [m[""][""] for key, m in evaluation.slicing_metrics if key == ()]
    shown = {row["slice"]: row for row in page.tables["metrics"]}["overall"]
    assert shown["binary_accuracy"] == f"{overall['binary_accuracy']['doubleValue']:.4f}"
    assert shown["example_count"] == f"{overall['example_count']['doubleValue']:.0f}"
    assert len(page.tables["metrics"]) > 1  # per-slice rows besides the overall one
    # A metric undefined on a slice (AUC where the slice holds one class) reads "n/a".
    for key, metrics in evaluation.slicing_metrics:
        row = {r["slice"]: r for r in page.tables["metrics"]}[eval_results.slice_label(key)]
        auc = float(metrics[""][""]["auc"]["doubleValue"])
        assert row["auc"] == ("n/a" if math.isnan(auc) else f"{auc:.4f}"), (key, row)
    # The model card: the pushed model's inputs (its serving_features signature's), outputs,
    # training data (StatisticsGen's row counts) and metrics.
    signature = tf.saved_model.load(str(pushed)).signatures["serving_features"]
    assert {r["input"] for r in page.tables["card-inputs"]} == set(
        signature.structured_input_signature[1])
    assert {"feature": "fare", "input": "fare", "type": "FLOAT", "JSON value": "float32",
            "required": "yes", "missing value": "never (required)"} in page.tables["card-inputs"]
    assert {"feature": "company", "input": "company", "type": "STRING", "JSON value": "string",
            "required": "no", "missing value": '""'} in page.tables["card-inputs"]
    [output_row] = page.tables["card-outputs"]
    assert output_row["output"] == "probabilities"
    assert "big_tipper (tips > 0.2 × fare)" in output_row["meaning"]
    [data_row] = page.tables["card-data"]
    assert int(data_row["train rows"]) + int(data_row["eval rows"]) == 4000, data_row
    assert data_row["span"] == "0"
    assert page.elements["card-fingerprint"].startswith("Input files: split:csv,num_files:1,")
    card_overall = {r["slice"]: r for r in page.tables["card-metrics"]}["overall"]
    assert card_overall["binary_accuracy"] == shown["binary_accuracy"]
    assert page.tables["card-thresholds"] == page.tables["thresholds"]

    logs = os.path.join(_newest_artifact_uri(metadata, "ModelRun"), "logs", "train")
    losses = {}
    for path in glob.glob(os.path.join(logs, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "epoch_loss":
                    losses[event.step] = float(tf.make_ndarray(value.tensor))
    train = {row["split"]: row for row in page.tables["training"]}["train"]
    assert train["epochs"] == str(len(losses))
    assert train["final loss"] == f"{losses[max(losses)]:.4f}"


def test_parallel_runs_in_separate_output_dirs_and_one_at_a_time_in_the_same(tmp_path):
    """Two runs with their own output dirs both succeed side by side; a third run on an output
    dir that is in use stops at once, before any component, naming the run holding it."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_csv(data_dir / "trips.csv", TAXI.read_rows(3000))
    outputs = [tmp_path / "a", tmp_path / "b"]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    processes = [subprocess.Popen(_runner(data_dir, out), env=_env(out), stdout=log.open("w"),
                                  stderr=subprocess.STDOUT)
                 for out, log in zip(outputs, logs, strict=True)]
    lock = outputs[0] / ".run.lock"
    deadline = time.monotonic() + 120
    while not (lock.exists() and f"pid {processes[0].pid}" in lock.read_text()):
        assert time.monotonic() < deadline and processes[0].poll() is None
        time.sleep(0.2)

    # -X importtime lists every module the refused run imported.
    busy = subprocess.run([sys.executable, "-X", "importtime", *_runner(data_dir, outputs[0])[1:]],
                          env=_env(outputs[0]), capture_output=True, text=True, timeout=900)
    assert busy.returncode == 3, busy.stderr[-3000:]
    imported = re.findall(r"^import time:.*\|\s*(\S+)$", busy.stderr, re.M)
    assert imported and "tensorflow" not in imported  # refused before TensorFlow loads
    assert f"another run is using output_dir='{outputs[0]}' (pid {processes[0].pid}" in (
        busy.stderr)

    for process, out, log in zip(processes, outputs, logs, strict=True):
        assert process.wait(timeout=900) == 0, log.read_text()[-3000:]
        metadata = str(out / "metadata" / "metadata.db")
        assert mlmd_records.latest_run(metadata).states == dict.fromkeys(NODES, "COMPLETE")
        assert len(mlmd_records.store(metadata).get_contexts_by_type("pipeline_run")) == 1
        _assert_store_consistent(metadata)


def _wait_for_line(log_path, text: str, process: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            if text in f.read():
                return
        assert process.poll() is None, f"the run ended before {text!r}: see {log_path}"
        time.sleep(0.5)
    raise AssertionError(f"no {text!r} in {log_path} after {timeout} s")


def _assert_store_consistent(metadata_path: str) -> None:
    """SQLite intact, nothing claims to be running, every live artifact exists on disk."""
    with sqlite3.connect(metadata_path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = mlmd_records.store(metadata_path)
    unfinished = [e.id for e in store.get_executions() if e.last_known_state in (
        metadata_store_pb2.Execution.NEW, metadata_store_pb2.Execution.RUNNING)]
    assert not unfinished, f"executions left NEW/RUNNING: {unfinished}"
    missing = [a.uri for a in store.get_artifacts()
               if a.state == metadata_store_pb2.Artifact.LIVE and not os.path.exists(a.uri)]
    assert not missing, f"live artifacts missing on disk: {missing}"


def test_tfx_cli_creates_and_runs_the_pipeline_on_another_data_dir(tmp_path):
    data_dir = tmp_path / "my_data"
    data_dir.mkdir()
    # An export as it often comes: gzip-compressed.
    with open(TAXI.csv_path, encoding="utf-8") as f, gzip.open(data_dir / "trips.csv.gz",
                                                               "wt") as out:
        out.write("".join(f.readlines()[:3001]))
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
    states = mlmd_records.execution_states(str(output / "metadata" / "metadata.db"))
    assert set(states) == NODES and set(states.values()) == {"COMPLETE"}, states
    [version] = os.listdir(output / "serving_model" / "taxi-tpu")
    assert _serve(output / "serving_model" / "taxi-tpu" / version,
                  TAXI.read_rows(3)).shape == (3, 1)



def test_shipped_penguins_run_end_to_end_as_a_multiclass_task(tmp_path):
    """`make run DATASET=penguins`: the second shipped dataset, with no code of its own."""
    output = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, RUNNER, "--dataset", "penguins", "--output-dir", str(output)],
        env=_env(output, TRAIN_STEPS=""), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    metadata = str(output / "metadata" / "metadata.db")
    assert mlmd_records.store(metadata).get_context_by_type_and_name("pipeline", "penguins-tpu")
    assert mlmd_records.latest_run(metadata).states == dict.fromkeys(NODES, "COMPLETE")
    assert "Blessed: yes" in result.stdout, result.stdout[-3000:]
    [version] = os.listdir(output / "serving_model" / "penguins-tpu")
    rows = PENGUINS.read_rows()[::7]
    outputs = _serve_outputs(output / "serving_model" / "penguins-tpu" / version, rows, PENGUINS)
    assert outputs["scores"].shape == (len(rows), 3)
    assert [c.decode() for c in outputs["classes"][0]] == ["Adelie", "Chinstrap", "Gentoo"]
    assert PENGUINS.quality(outputs, rows) > 0.9
    page = report_page.render(output / "report" / "index.html")
    assert page.elements["blessing"].startswith("Blessed: yes")
    assert {"metric": "sparse_categorical_accuracy", "slice": "overall",
            "result": "pass"}.items() <= page.tables["thresholds"][0].items()
    slices = {row["slice"] for row in page.tables["metrics"]}
    assert {"overall", "island=Biscoe", "island=Dream", "island=Torgersen"} <= slices
    assert "slices.png" in page.images
    # Even 30% of ~230 training rows is too few to score epochs on: all of them fit instead.
    assert "kept the last epoch (no validation slice)" in page.text, page.text
    assert re.search(r"\d+ training rows are too few for a validation slice of 100 rows .*: no "
                     r"validation slice, no early stopping and no refit", _everything(result))

    # Warm start: the next run's Trainer begins from the model just blessed (TFX hands it the
    # resolver's Model as base_model), so it re-executes although nothing else changed.
    blessed = _newest_artifact_uri(metadata, "Model")
    result = subprocess.run(
        [sys.executable, RUNNER, "--dataset", "penguins", "--output-dir", str(output)],
        env=_env(output, TRAIN_STEPS="20", WARM_START="true"), capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    states = mlmd_records.latest_run(metadata).states
    assert states["warm_start_resolver"] == "COMPLETE" and states["Trainer"] == "COMPLETE"
    assert states["Transform"] == "CACHED"
    assert re.search(rf"Warm start: \d+ variables from {re.escape(blessed)}/Format-Serving",
                     _everything(result))
    assert "Export parity: max |served - trained|" in _everything(result)

    # TUNE=1: TFX's Tuner searches first (two trials here), and the Trainer trains and exports
    # the network the best trial had.
    result = subprocess.run(
        [sys.executable, RUNNER, "--dataset", "penguins", "--output-dir", str(output)],
        env=_env(output, TRAIN_STEPS="40", TUNE="1", TUNE_TRIALS="2"), capture_output=True,
        text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    states = mlmd_records.latest_run(metadata).states
    assert states["Tuner"] == "COMPLETE" and states["Trainer"] == "COMPLETE"
    assert states["Transform"] == "CACHED"
    [best] = glob.glob(str(output / "pipeline_root" / "Tuner" / "best_hyperparameters" / "*" /
                           "best_hyperparameters.txt"))
    with open(best, encoding="utf-8") as f:
        values = json.load(f)["values"]
    log = _everything(result)
    assert (f"Tuned hyperparameters: depth={values['depth']}, dropout={values['dropout']}, "
            f"learning_rate={values['learning_rate']}, width={values['width']}") in log
    # The exported network's layers, as Keras recorded them beside the SavedModel.
    from tf_keras.protobuf import saved_metadata_pb2

    trained = _newest_artifact_uri(metadata, "Model")
    recorded = saved_metadata_pb2.SavedMetadata.FromString(
        (Path(trained) / "Format-Serving" / "keras_metadata.pb").read_bytes())
    layers = [json.loads(node.metadata) for node in recorded.nodes]
    widths = [layer["config"]["units"] for layer in layers
              if re.fullmatch(r"hidden_\d+", layer.get("name", ""))]
    assert widths == [values["width"]] * values["depth"], widths


# The penguins' columns as a spreadsheet might name them, plus a timestamp and free text.
BIRD_COLUMNS = ("class", "Île / Island", "Bill Length (mm)", "bill.depth-mm", "Flipper %",
                "Body Mass (g)", "Sex", "2nd year", "Seen On", "Field Notes")
BIRD_WORDS = ("calm", "nesting", "shy", "loud", "feeding", "pair", "alone", "wet", "molting")


def test_make_dataset_then_run_on_a_csv_never_seen_as_a_regression(tmp_path):
    """A newcomer's path: `make dataset` on new data (the penguins' body mass as a regression
    label) exported as Excel's "CSV UTF-8" does (a byte-order mark, CRLF line ends) with the
    headers a spreadsheet has (spaces, punctuation, mixed case, a leading digit, non-ASCII
    letters, a Python keyword), semicolons for commas, number gaps written NA, " ", N/A, null
    and the dataset's own "?", an ISO-8601 timestamp column (one value unparseable) and a
    free-text column (some values quoted, holding the delimiter and a line break), then
    `make run DATASET=…` with no Python edits, serving, and `make predict` on the same file:
    every step under the user's own column names, every marker a gap, the timestamp a
    datetime and the notes text."""
    schemas = tmp_path / "schemas"
    data_dir = tmp_path / "birds"
    data_dir.mkdir()
    with open(PENGUINS.csv_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[0] = ";".join(BIRD_COLUMNS)
    # The number columns' gaps as exports write them: NA, spaces, N/A, null, and "?".
    markers = itertools.cycle(["NA", " ", "N/A", "null", "?"])
    for i, line in enumerate(lines[1:], start=1):
        cells = line.split(",")
        day = f"20{7 + i % 3:02d}-{1 + i % 12:02d}-{1 + i % 28:02d}"
        seen = "not recorded" if i == 7 else f"{day}T{i % 24:02d}:{i % 60:02d}:00Z"
        notes = " ".join(BIRD_WORDS[(i * k) % len(BIRD_WORDS)] for k in (1, 2, 5)) + f" no {i}"
        if i % 50 == 1:  # free text with the delimiter and a line break, quoted
            notes = f'"calm; shy\nwet no {i}"'
        lines[i] = ";".join([*(next(markers) if j in (2, 3, 4, 5) and cell == "" else cell
                               for j, cell in enumerate(cells)), seen, notes])
    (data_dir / "birds.csv").write_bytes("\ufeff".encode() + "\r\n".join(lines).encode()
                                         + b"\r\n")
    made = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.bootstrap", "--name", "bird-mass", "--data-dir",
         str(data_dir), "--label", "Body Mass (g)", "--task", "regression", "--schemas-dir",
         str(schemas), "--missing-values", "?"], env=_env(tmp_path), capture_output=True,
        text=True, timeout=600, cwd=REPO_ROOT)
    assert made.returncode == 0, made.stderr[-3000:]
    # What make dataset decided, on the terminal; TensorFlow's and TFDV's lines in its log.
    assert made.stdout.startswith(f"Log: {tmp_path}/logs/dataset-"), made.stdout[:500]
    assert "INFO" not in made.stdout + made.stderr and len(made.stdout.splitlines()) < 30
    assert "label 'Body Mass (g)': 2 of 344 rows have no value" in made.stdout
    assert re.search(r"Île / Island +vocabulary +3 distinct strings", made.stdout), made.stdout
    assert re.search(r"Seen On +datetime +dates: 99% or more of \d+ distinct values parse as "
                     r"ISO-8601", made.stdout), made.stdout
    assert re.search(r"Field Notes +text +free text: 5.0 words on average", made.stdout), \
        made.stdout
    folder = schemas / "bird-mass"
    spec_text = (folder / "spec.toml").read_text()
    assert 'task = "regression"' in spec_text and 'missing = "drop"' in spec_text
    assert 'delimiter = ";"' in spec_text and 'missing_values = ["?"]' in spec_text
    again = subprocess.run(made.args, env=_env(tmp_path), capture_output=True, text=True,
                           timeout=600, cwd=REPO_ROOT)
    assert again.returncode == 2 and "already holds a spec" in again.stderr

    output = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, RUNNER, "--dataset", str(folder), "--data-dir", str(data_dir),
         "--output-dir", str(output)],
        env=_env(output, TRAIN_STEPS="", MIN_EVAL_ACCURACY=""), capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    metadata = str(output / "metadata" / "metadata.db")
    assert mlmd_records.store(metadata).get_context_by_type_and_name("pipeline", "bird-mass-tpu")
    assert mlmd_records.latest_run(metadata).states == dict.fromkeys(NODES, "COMPLETE")
    assert "root_mean_squared_error=" in result.stdout
    assert "Blessed: yes" in result.stdout, result.stdout[-3000:]
    birds = DatasetRows(str(folder), str(data_dir / "birds.csv"))
    rows = [r for r in birds.read_rows() if not is_missing(r["Body Mass (g)"], folded("?"))]
    [version] = os.listdir(output / "serving_model" / "bird-mass-tpu")
    outputs = _serve_outputs(output / "serving_model" / "bird-mass-tpu" / version, rows, birds)
    assert outputs["predictions"].shape == (len(rows), 1)
    spread = float(np.std([float(r["Body Mass (g)"]) for r in rows]))
    assert birds.quality(outputs, rows) < 0.6 * spread  # grams, far better than the mean
    page = report_page.render(output / "report" / "index.html")
    dropped = re.findall(r"Split (\w+): (\d+) row\(s\) without a value in Body Mass \(g\)",
                         page.text)
    assert sum(int(n) for _, n in dropped) == 2, page.text  # the two unlabelled rows
    unparsed = re.findall(r"Split \w+: (\d+) value\(s\) of Seen On are no date", page.text)
    assert sum(int(n) for n in unparsed) == 1, page.text  # "not recorded"
    # The spec's budget is in epochs: the report says how many ran and which one was kept
    # (~230 training rows: too few to hold a validation slice out of, so all of them fit).
    assert re.search(r"Budget: (\d+) epochs of \d+ steps; trained \1 of \1 epochs \(ran its "
                     r"whole budget\), kept the last epoch \(no validation slice\)",
                     page.text), page.text
    assert predict.main(["--data-dir", str(data_dir), "--dataset", str(folder),
                         "--output-dir", str(output)]) == 0
    [scored] = glob.glob(str(output / "predictions" / "*" / "birds.csv"))
    with open(scored, newline="", encoding="utf-8") as f:
        scored_rows = list(csv.DictReader(f, delimiter=";"))
    assert len(scored_rows) == 344 and list(scored_rows[0]) == [*BIRD_COLUMNS, "predictions"]
    assert all(float(r["predictions"]) > 0 for r in scored_rows)


def test_two_datasets_share_an_output_dir_without_cross_talk(tmp_path):
    """taxi, then penguins, then taxi again into one OUTPUT_DIR: each pipeline keeps its own
    serving dir and history; then taxi with another feature set skips the incomparable
    baseline, visibly, and the value thresholds alone decide."""
    data_dir = tmp_path / "trips"
    data_dir.mkdir()
    write_csv(data_dir / "trips.csv", TAXI.read_rows(4000))
    output = tmp_path / "out"
    metadata = str(output / "metadata" / "metadata.db")
    taxi_dir, penguins_dir = output / "serving_model" / "taxi-tpu", output / "serving_model" / (
        "penguins-tpu")

    def run(*args: str, **env) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, RUNNER, "--output-dir", str(output), *args],
                                env=_env(output, **env), capture_output=True, text=True,
                                timeout=900)
        assert result.returncode == 0, result.stderr[-4000:]
        return result

    run("--data-dir", str(data_dir))
    taxi_served = tree_hashes(taxi_dir)
    assert len(os.listdir(taxi_dir)) == 1

    penguins = run("--dataset", "penguins", TRAIN_STEPS="")
    assert mlmd_records.latest_run(metadata).states == dict.fromkeys(NODES, "COMPLETE")
    assert len(os.listdir(penguins_dir)) == 1 and tree_hashes(taxi_dir) == taxi_served
    assert "Baseline: skipped" not in penguins.stdout
    # The penguins' Evaluator had no baseline at all: taxi's blessed model is not theirs.
    store = mlmd_records.store(metadata)
    evaluation = max(store.get_artifacts_by_type("ModelEvaluation"), key=lambda a: a.id)
    assert "_diff" not in " ".join(_overall_metric_names(evaluation.uri))

    again = run("--data-dir", str(data_dir))
    assert mlmd_records.latest_run(metadata).states == {
        **dict.fromkeys(NODES, "CACHED"), "baseline_resolver": "COMPLETE"}
    assert tree_hashes(taxi_dir) == taxi_served and len(os.listdir(penguins_dir)) == 1
    assert "Baseline: skipped" not in again.stdout

    # The same pipeline with trip_seconds z-scored instead of logged: another model contract.
    changed = tmp_path / "taxi-v2"
    shutil.copytree(os.path.join(REPO_ROOT, "schemas", "taxi"), changed)
    spec = (changed / "spec.toml").read_text()
    (changed / "spec.toml").write_text(spec.replace('trip_seconds = "log_zscore"',
                                                    'trip_seconds = "zscore"'))
    result = run("--dataset", str(changed), "--data-dir", str(data_dir),
                 PIPELINE_NAME="taxi-tpu")
    skipped = re.search(r"Baseline: skipped — the last blessed model \(artifact (\d+)\) was "
                        r"trained for another dataset spec \(features with other roles: "
                        r"trip_seconds\): the change thresholds were not applied", result.stdout)
    assert skipped, result.stdout
    # The skipped baseline is taxi's first model, the first Model artifact in the store.
    models = sorted(a.id for a in store.get_artifacts_by_type("Model"))
    assert int(skipped.group(1)) == models[0]
    assert "Blessed: yes" in result.stdout
    assert len(os.listdir(taxi_dir)) == 2 and len(os.listdir(penguins_dir)) == 1
    page = report_page.render(output / "report" / "index.html")
    assert page.elements["baseline"].startswith("Baseline: skipped — the last blessed model")


def _overall_metric_names(evaluation_uri: str) -> list[str]:
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(evaluation_uri)
    [overall] = [m[""][""] for key, m in result.slicing_metrics if key == ()]
    return list(overall)
