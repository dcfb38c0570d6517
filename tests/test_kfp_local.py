"""`make kfp-local`: the adapter that lets kfp.local run container tasks as subprocesses, tested
against the kfp version it plugs into, and the compiled KFP spec run end to end by it.

The unit tests run a small spec shaped as TFX compiles one (components without KFP's 'comp-'
prefix, artifacts typed by instance schemas, constants in the 2.1 form) through kfp.local, with
this test process's venv standing in for the image's: they test the adapter, not the image.
"""

import copy
import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kfp
import numpy as np
import pytest

from pipeline import datasets, names
from pipeline.cloud import kfp_local, kubeflow_v2_runner
from pipeline.pipeline_config import LOCK_FILE, REPO_ROOT
from trainer_module import keys

# A task of the small spec: `make` writes the text parameter into its artifact; `read` checks
# that its input artifact arrives typed as TFX's Examples, copies it, or fails when told to.
TASK_SCRIPT = r"""
import json, os, sys
executor_input = json.loads(sys.argv[sys.argv.index("--json_serialized_invocation_args") + 1])
inputs, outputs = executor_input["inputs"], executor_input["outputs"]
out_key = next(iter(outputs["artifacts"]))
out_uri = outputs["artifacts"][out_key]["artifacts"][0]["uri"]
os.makedirs(out_uri, exist_ok=True)
if sys.argv[1] == "make":
    text = inputs["parameterValues"]["text"]
else:
    [examples] = inputs["artifacts"]["examples"]["artifacts"]
    if "title: tfx.Examples" not in examples["type"].get("instanceSchema", ""):
        print("input typed as", examples["type"]); sys.exit(4)
    if inputs["parameterValues"]["fail"] == "yes":
        print("the read task gives up here"); sys.exit(3)
    text = open(os.path.join(examples["uri"], "text.txt")).read()
open(os.path.join(out_uri, "text.txt"), "w").write(text)
os.makedirs(os.path.dirname(outputs["outputFile"]), exist_ok=True)
json.dump({"artifacts": {out_key: {"artifacts": [{"name": out_key, "uri": out_uri}]}}},
          open(outputs["outputFile"], "w"))
"""
EXAMPLES_TYPE = {"instanceSchema": "title: tfx.Examples\ntype: object\n"}


def _small_spec(fail: str = "no") -> dict:
    def executor(role: str) -> dict:
        return {"container": {"image": "localhost/check:1",
                              "command": ["python", "-c", TASK_SCRIPT, role],
                              "args": [kfp_local.EXECUTOR_INPUT_FLAG, "{{$}}"]}}

    return {"displayName": "adapter-check", "pipelineSpec": {
        "pipelineInfo": {"name": "adapter-check"}, "schemaVersion": "2.1.0",
        "sdkVersion": "tfx-1.16.0",
        "deploymentSpec": {"executors": {"Make_executor": executor("make"),
                                         "ReadExamples_executor": executor("read")}},
        "components": {
            "Make": {"executorLabel": "Make_executor",
                     "inputDefinitions": {"parameters": {"text": {"parameterType": "STRING"}}},
                     "outputDefinitions": {"artifacts": {
                         "examples": {"artifactType": EXAMPLES_TYPE}}}},
            "ReadExamples": {
                "executorLabel": "ReadExamples_executor",
                "inputDefinitions": {"artifacts": {"examples": {"artifactType": EXAMPLES_TYPE}},
                                     "parameters": {"fail": {"parameterType": "STRING"}}},
                "outputDefinitions": {"artifacts": {"copy": {"artifactType": EXAMPLES_TYPE}}}},
        },
        "root": {"dag": {"tasks": {
            "Make": {"componentRef": {"name": "Make"}, "taskInfo": {"name": "Make"},
                     "inputs": {"parameters": {"text": {"runtimeValue": {"constant": "hi"}}}}},
            "ReadExamples": {
                "componentRef": {"name": "ReadExamples"}, "taskInfo": {"name": "ReadExamples"},
                "dependentTasks": ["Make"],
                "inputs": {"artifacts": {"examples": {"taskOutputArtifact": {
                    "producerTask": "Make", "outputArtifactKey": "examples"}}},
                    "parameters": {"fail": {"runtimeValue": {"constant": fail}}}}},
        }}},
    }}


def _run_small(tmp_path, fail: str = "no") -> list[kfp_local.TaskRun]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_small_spec(fail)))
    paths = kfp_local.LocalPaths(str(tmp_path / "local"))
    # This test's own venv stands in for the image's: the adapter is under test here.
    environment = kfp_local.ImageEnvironment(paths, venv=sys.prefix)
    return kfp_local.execute_spec(str(spec), str(tmp_path / "root"), environment)


def test_the_adapter_targets_the_kfp_version_the_lock_pins():
    with open(LOCK_FILE, encoding="utf-8") as f:
        [pinned] = re.findall(r"^kfp==(\S+)$", f.read(), re.M)
    assert kfp_local.KFP_VERSION == pinned == kfp.__version__


def test_kfp_local_runs_container_tasks_through_the_adapter_and_passes_typed_artifacts(
        tmp_path):
    runs = _run_small(tmp_path)
    assert [(r.name, r.exit_code) for r in runs] == [("Make", 0), ("ReadExamples", 0)]
    copied = kfp_local._artifact_uri(runs[1], "copy")
    assert Path(copied, "text.txt").read_text() == "hi"
    assert Path(runs[1].log_path).is_file()


def test_a_failing_task_stops_the_run_with_its_name_exit_code_and_log(tmp_path):
    with pytest.raises(kfp_local.TaskFailed) as failed:
        _run_small(tmp_path, fail="yes")
    message = str(failed.value)
    assert "task ReadExamples failed with exit code 3" in message
    assert "the read task gives up here" in message


def test_cloud_and_image_locations_map_to_local_folders_in_one_place(tmp_path):
    paths = kfp_local.LocalPaths(str(tmp_path))
    local = paths.local
    assert local("gs://bucket/a/b.csv") == f"{tmp_path}/gcs/bucket/a/b.csv"
    image_dir = kubeflow_v2_runner.IMAGE_PROJECT_DIR
    assert local(json.dumps({"schema": f"{image_dir}/schemas/taxi/schema.pbtxt"})) == (
        json.dumps({"schema": f"{REPO_ROOT}/schemas/taxi/schema.pbtxt"}))
    assert local(image_dir) == REPO_ROOT
    # Only a path that starts there: never a folder of that name inside another path.
    for untouched in (f"/work{image_dir}/x", f"{image_dir}_root/x", "/lib/libtpu.so.1"):
        assert local(untouched) == untouched
    assert local(kfp_local.TPU_LIBRARY) == paths.no_tpu_runtime
    # The image's ENV lines come from its Dockerfile, and its project folder maps here.
    env = kfp_local.image_env()
    assert env["PYTHONPATH"] == image_dir and local(env["PYTHONPATH"]) == REPO_ROOT
    assert local(kfp_local.image_workdir()) == REPO_ROOT


def test_local_settings_fill_only_what_the_user_left_unset(tmp_path, monkeypatch):
    from pipeline import pipeline_config

    cloud = kfp_local.cloud_settings(None, {"DATASET": "penguins",
                                            "GCS_BUCKET": "gs://my-bucket"})
    assert cloud.bucket == "gs://my-bucket" and cloud.project == "kfp-local-run"
    assert cloud.pipeline_name == "penguins-tpu"
    assert cloud.data_uri == "gs://my-bucket/penguins-tpu/data"
    # The shipped penguins are small: each Beam step runs in its task's own process.
    assert cloud.beam_direct_workers == 1
    assert "--direct_running_mode=in_memory" in cloud.beam_pipeline_args()

    # A config file's values are the user's too: the environment wins over them, and the
    # local stand-ins fill in only what neither gives.
    config = tmp_path / "cloud.toml"
    config.write_text('project = "my-ml-project"\nbucket = "gs://from-file"\n'
                      'beam_direct_workers = 3\n')
    cloud = kfp_local.cloud_settings(str(config), {"GCS_BUCKET": "gs://from-env"})
    assert (cloud.project, cloud.bucket, cloud.region) == (
        "my-ml-project", "gs://from-env", kfp_local.LOCAL_SETTINGS["GCP_REGION"])
    assert cloud.beam_direct_workers == 3

    # Unset, the workers follow the data of the newest span, as `make run` takes them.
    monkeypatch.setattr(pipeline_config, "MULTI_PROCESSING_MIN_BYTES", 1000)
    for span, size in ((1, 5000), (2, 600)):
        (tmp_path / "data" / f"span-{span}").mkdir(parents=True)
        (tmp_path / "data" / f"span-{span}" / "rows.csv").write_bytes(b"x" * size)
    assert kfp_local.cloud_settings(None, {}, str(tmp_path / "data")).beam_direct_workers == 1
    (tmp_path / "data" / "span-3").mkdir()
    (tmp_path / "data" / "span-3" / "rows.csv").write_bytes(b"x" * 5000)
    assert (kfp_local.cloud_settings(None, {}, str(tmp_path / "data")).beam_direct_workers
            == (os.cpu_count() or 1))
    assert kfp_local.cloud_settings(None, {"BEAM_DIRECT_WORKERS": "1"},
                                    str(tmp_path / "data")).beam_direct_workers == 1


# ---- end to end ----


def _make_kfp_local(output: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "kfp-local", f"OUTPUT_DIR={output}"],
                          cwd=REPO_ROOT, env={**os.environ, "DATASET": DAILY, **env},
                          capture_output=True, text=True, timeout=1800)


def _output_uri(summary: dict, task: str, key: str) -> str:
    [uri] = next(t for t in summary["tasks"] if t["task"] == task)["outputs"][key]
    return uri


def _window(summary: dict) -> str:
    """The spans SpanWindow gave Transform."""
    [window] = _task_output(summary, names.SPAN_WINDOW)["artifacts"]["window"]["artifacts"]
    return window["metadata"]["window"]


def _span(summary: dict) -> int:
    """The span CsvExampleGen recorded on its Examples (a custom property; TFX's Kubeflow V2
    entrypoint writes it as "custom:span", Examples having a `span` property too)."""
    [examples] = _task_output(summary, names.CSV_EXAMPLE_GEN)["artifacts"][names.EXAMPLES][
        "artifacts"]
    return int(examples["metadata"]["custom:span"])


def _task_output(summary: dict, task: str) -> dict:
    [run] = [t for t in summary["tasks"] if t["task"] == task]
    with open(os.path.join(os.path.dirname(run["log"]), "executor_output.json"),
              encoding="utf-8") as f:
        return json.load(f)


# The shipped penguins as two spans (data/penguins-daily/README.md).
DAILY = "penguins-daily"


@pytest.mark.e2e
def test_make_kfp_local_runs_the_compiled_spec_as_kubeflow_would(tmp_path):
    """`make kfp-local` on the penguins' span 1: every task of the compiled spec ends well in
    the image's packages, the Evaluator's accuracy is the pushed model's on the eval rows, the
    pushed model serves raw rows, the Vertex Trainer's CustomJob runs its own command on the
    CPU. Then span 2 lands: the second run reads the newest span, compares it with span 1's
    statistics and trains on both spans (span 1 from the span store, as no resolver runs on
    KFP), ships both spans' statistics in its model, starts from and is compared with the
    model the first one pushed."""
    import shutil

    import tensorflow as tf
    import tensorflow_data_validation as tfdv
    from tfx.utils import path_utils

    from dataset_rows import PENGUINS, write_csv
    from pipeline.spans import drift_validator
    from pipeline.spans import store as span_store
    from trainer_module.feature_signature import TRAINING_STATISTICS_FILE

    shipped = Path(REPO_ROOT, "data", DAILY)
    data = tmp_path / "data"
    shutil.copytree(shipped / "span-1", data / "span-1")

    output = tmp_path / "kfp"
    # New rows for BulkInferrer, put in the bucket (here: its local stand-in) beforehand.
    bucket = output / "gcs" / "kfp-local"
    new_rows = [{k: v for k, v in r.items() if k != PENGUINS.spec.label}
                for r in PENGUINS.read_rows(30)]
    (bucket / "new-rows").mkdir(parents=True)
    write_csv(bucket / "new-rows" / "rows.csv", new_rows)
    first = _make_kfp_local(output, DATA_DIR=str(data),
                            BATCH_PREDICT_URI="gs://kfp-local/new-rows")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    summary = json.loads((output / "kfp-local.json").read_text())
    with open(summary["spec"], encoding="utf-8") as f:
        compiled = json.load(f)
    assert {t["task"] for t in summary["tasks"]} == set(
        compiled["pipelineSpec"]["root"]["dag"]["tasks"])
    assert {t["exit_code"] for t in summary["tasks"]} == {0}
    assert kfp_local.sha256(summary["spec"]) == summary["sha256"]
    assert summary["sha256"] in first.stdout
    assert _span(summary) == 1
    first_drift = drift_validator.read_drift(_output_uri(summary, names.DRIFT_VALIDATOR,
                                                         names.DRIFT_REPORT))
    assert first_drift["previous_span"] is None and first_drift["columns"] == {}, first_drift
    assert "drift is measured from the next span on" in first_drift["note"]
    assert _window(summary) == "1"  # window_spans = 2, but no earlier span is filed yet

    # Nothing was served before: no baseline, and the first blessing compares with none.
    [empty] = _task_output(summary, "baseline_resolver")["artifacts"]["model"]["artifacts"]
    assert empty["metadata"]["has_model"] == 0, empty
    [blessing] = _task_output(summary, "Evaluator")["artifacts"]["blessing"]["artifacts"]
    assert blessing["metadata"]["blessed"] == 1 and "baseline_model_id" not in blessing[
        "metadata"], blessing

    serving = bucket / f"{DAILY}-tpu" / "serving_model" / f"{DAILY}-tpu"
    [version] = os.listdir(serving)
    model = tf.saved_model.load(str(serving / version))

    def served(examples: list[bytes]):
        return model.signatures[keys.SERVING_SIGNATURE](
            examples=tf.constant(examples))["scores"].numpy()

    def scores(rows):
        return served(PENGUINS.serialized(rows, serving=True))

    # The Evaluator scored the model it blessed on CsvExampleGen's eval split: the pushed model
    # answers those rows with the accuracy it reported.
    split = os.path.join(_output_uri(summary, names.CSV_EXAMPLE_GEN, names.EXAMPLES),
                         keys.split_dir("eval"))
    records = [record.numpy() for path in glob.glob(os.path.join(split, "*"))
               for record in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    label = PENGUINS.spec.label
    labels = [PENGUINS.label({label: tf.train.Example.FromString(r).features.feature[label]
                              .bytes_list.value[0].decode()}) for r in records]
    accuracy = float(np.mean(np.argmax(served(records), axis=1) == labels))
    reported = summary["metrics"]["sparse_categorical_accuracy"]
    assert len(records) > 50 and abs(reported - accuracy) < 1e-6, (reported, accuracy)

    rows = PENGUINS.read_rows()[::9]
    assert scores(rows).shape == (len(rows), 3)
    assert PENGUINS.quality({"scores": scores(rows)}, rows) > 0.9
    # BulkInferrer scored the new rows as the pushed model answers them (in Beam's order).
    scored = _output_uri(summary, "BulkInferrer", "output_examples")
    got = [list(tf.train.Example.FromString(record.numpy()).features.feature["scores"]
                .float_list.value)
           for path in glob.glob(os.path.join(scored, "Split-predict", "*"))
           for record in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    np.testing.assert_allclose(sorted(map(list, np.float32(got))),
                               sorted(map(list, scores(new_rows))), rtol=1e-5)

    job = summary["vertex_trainer_job"]
    assert job["exit_code"] == 0
    pool = job["worker_pool"]
    assert pool["container_spec"]["command"][:3] == ["python", "-m", "tfx.scripts.run_executor"]
    assert {e["name"] for e in pool["container_spec"]["env"]} == {
        "NEXT_PLUGGABLE_DEVICE_USE_C_API", "TF_PLUGGABLE_DEVICE_LIBRARY_PATH"}
    job_log = Path(job["log"]).read_text()
    assert "Distribution strategy: MirroredStrategy" in job_log
    assert (output / "vertex_trainer_job" / "model" / "Format-Serving" / "saved_model.pb"
            ).is_file()

    shutil.copytree(shipped / "span-2", data / "span-2")
    second = _make_kfp_local(output, DATA_DIR=str(data), WARM_START="true")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    summary = json.loads((output / "kfp-local.json").read_text())
    assert _span(summary) == 2
    found = drift_validator.read_drift(_output_uri(summary, names.DRIFT_VALIDATOR,
                                                   names.DRIFT_REPORT))
    assert (found["span"], found["previous_span"]) == (2, 1), found
    thresholds = datasets.load_spec(DAILY)[0].drift_thresholds
    assert set(found["columns"]) == {column for column, _ in thresholds}
    # The two spans share one mix of birds: nothing drifted past its threshold.
    assert not [c for c, v in found["columns"].items() if v["past"]], found
    store = bucket / f"{DAILY}-tpu" / "pipeline_root" / "span-store"
    assert sorted(span_store.statistics_files(str(store / "statistics"))) == [1, 2]
    # Transform read both spans: span 1's Examples, filed by the first run, and span 2's.
    assert _window(summary) == "1,2"
    window = _output_uri(summary, names.SPAN_WINDOW, "window")
    assert sorted({name.split("-")[1] for name in os.listdir(Path(window, "Split-train"))}) == [
        "1", "2"]
    # The model ships the statistics of the rows it trained on: the window's training rows.
    train_files = glob.glob(os.path.join(window, keys.split_dir(keys.TRAIN_SPLIT), "*"))
    trained_rows = sum(1 for path in train_files
                       for _ in tf.data.TFRecordDataset(path, compression_type="GZIP"))
    shipped = os.path.join(path_utils.serving_model_dir(
        _output_uri(summary, names.TRAINER, names.MODEL)), TRAINING_STATISTICS_FILE)
    assert tfdv.load_stats_binary(shipped).datasets[0].num_examples == trained_rows
    assert sum(1 for t in summary["tasks"] if t["task"] == names.CSV_EXAMPLE_GEN) == 1
    served = str(serving / version)
    models = {}
    for task in ("baseline_resolver", "warm_start_resolver"):
        [models[task]] = _task_output(summary, task)["artifacts"]["model"]["artifacts"]
        assert models[task]["metadata"]["served_from"] == served, (task, models[task])
    # The warm-start step hands the Trainer its copy of the served version.
    trainer_log = Path(next(t["log"] for t in summary["tasks"] if t["task"] == "Trainer"))
    warm = re.escape(models["warm_start_resolver"]["uri"])
    assert re.search(rf"Warm start: \d+ variables from {warm}/Format-Serving",
                     trainer_log.read_text())
    [blessing] = _task_output(summary, "Evaluator")["artifacts"]["blessing"]["artifacts"]
    assert "baseline_model_id" in blessing["metadata"], blessing


@pytest.mark.e2e
def test_a_broken_task_in_the_compiled_spec_stops_make_kfp_local_and_names_it(tmp_path):
    cloud = kfp_local.cloud_settings(None, {"DATASET": "penguins"})
    path = kubeflow_v2_runner.compile_pipeline(cloud, str(tmp_path / "build"), "kfp")
    with open(path, encoding="utf-8") as f:
        job = json.load(f)
    broken = copy.deepcopy(job)
    args = broken["pipelineSpec"]["deploymentSpec"]["executors"]["StatisticsGen_executor"][
        "container"]["args"]
    class_path = "tfx.components.statistics_gen.executor.Executor"
    args[args.index(class_path)] = class_path + "ThatIsNotThere"
    spec = tmp_path / "broken.json"
    spec.write_text(json.dumps(broken))
    result = _make_kfp_local(tmp_path / "out", SPEC=str(spec), DATASET="penguins")
    assert result.returncode != 0
    assert "task StatisticsGen failed with exit code 1" in result.stderr, result.stderr[-3000:]
    assert "ExecutorThatIsNotThere" in result.stderr
