"""The DAG compiled for Kubeflow Pipelines 2 / Vertex AI, and submitted, without Google Cloud.

Compilation is TFX's real KubeflowV2DagRunner; the compiled file is parsed back with the
kfp-pipeline-spec protos. Submission builds the real aiplatform / kfp request objects. Google
Cloud cannot be reached from here, so Vertex stops at the request (dry run, with sockets
blocked to prove nothing is sent), while the KFP client makes a real HTTP call to a small
server on 127.0.0.1 that records it.
"""

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest
from cloud_settings import CLOUD, TPU_IMAGE
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipeline.cloud import kubeflow_v2_runner, settings, submit
from pipeline.pipeline_config import REPO_ROOT, ConfigError

COMMON = {"CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "AnomalyGate",
          "Transform", "Trainer", "Evaluator", "Pusher"}
# Vertex runs TFX's resolver (two resolver tasks); KFP the ServedModel step in its place.
NODES = COMMON | {"baseline_resolver-model-resolver", "baseline_resolver-model-blessing-resolver"}
KFP_NODES = COMMON | {"baseline_resolver"}


def _compile(tmp_path, target: str = "vertex") -> tuple[dict, pipeline_spec_pb2.PipelineSpec]:
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path), target)
    with open(path, encoding="utf-8") as f:
        job = json.load(f)
    return job, json_format.ParseDict(job["pipelineSpec"], pipeline_spec_pb2.PipelineSpec())


def _executor(spec: pipeline_spec_pb2.PipelineSpec, node: str):
    return spec.deployment_spec["executors"][f"{node}_executor"]["container"]


def _parameter(spec: pipeline_spec_pb2.PipelineSpec, node: str, name: str) -> str:
    value = spec.root.dag.tasks[node].inputs.parameters[name].runtime_value
    if value.HasField("constant"):  # pipeline spec 2.1 (the KFP target)
        return value.constant.string_value
    return value.constant_value.string_value


def test_kfp_spec_gives_constants_in_the_only_form_the_kfp_driver_resolves(cloud_env, tmp_path):
    """Kubeflow Pipelines' driver resolves a constant parameter only from
    `runtimeValue.constant` and fails any other form as "not implemented"
    (kubeflow/pipelines backend/src/v2/driver/resolve.go, resolveInputParameter); it hands
    the executor `parameterValues`, which TFX's entrypoint reads only when it is given the
    inputs spec (schema 2.1)."""
    job, spec = _compile(tmp_path, "kfp")
    assert job["pipelineSpec"]["schemaVersion"] == "2.1.0"
    forms = {name: value.runtime_value.WhichOneof("value")
             for task in spec.root.dag.tasks.values()
             for name, value in task.inputs.parameters.items()
             if value.HasField("runtime_value")}
    assert forms and set(forms.values()) == {"constant"}, forms
    for name, executor in spec.deployment_spec["executors"].items():
        assert "--json_serialized_inputs_spec_args" in executor["container"]["args"], name


def test_compiled_spec_holds_every_component_with_its_dependencies(cloud_env, tmp_path):
    job, spec = _compile(tmp_path)
    tasks = spec.root.dag.tasks
    assert set(tasks) == NODES
    depends = {name: set(task.dependent_tasks) for name, task in tasks.items()}
    assert depends["StatisticsGen"] == {"CsvExampleGen"}
    assert depends["ExampleValidator"] == {"StatisticsGen", "ImportSchemaGen"}
    assert depends["AnomalyGate"] == {"ExampleValidator", "StatisticsGen", "ImportSchemaGen"}
    assert depends["Transform"] == {"AnomalyGate", "CsvExampleGen", "ImportSchemaGen"}
    # The raw examples feed the export parity gate; the statistics ship inside the model.
    assert depends["Trainer"] == {"Transform", "ImportSchemaGen", "CsvExampleGen",
                                  "StatisticsGen"}
    assert {"Trainer", "CsvExampleGen", "baseline_resolver-model-resolver"} <= depends[
        "Evaluator"]
    assert depends["Pusher"] == {"Evaluator", "Trainer"}

    assert spec.pipeline_info.name == "taxi-tpu"
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://my-ml-bucket/taxi-tpu/pipeline_root"
    for node in ("CsvExampleGen", "Transform", "Trainer", "AnomalyGate", "Pusher"):
        assert _executor(spec, node)["image"] == CLOUD["PIPELINE_IMAGE"]
    # Files are read inside the image, data from GCS; Beam runs in the container by default.
    assert (_parameter(spec, "ImportSchemaGen", "schema_file")
            == "/pipeline/schemas/taxi/schema.pbtxt")
    assert _parameter(spec, "CsvExampleGen", "input_base") == CLOUD["DATA_URI"]
    transform_args = _executor(spec, "Transform")["args"]
    assert {"--direct_running_mode=multi_processing", "--direct_num_workers=0"} <= set(
        transform_args), transform_args
    # gs:// has no atomic rename: TFX's own Pusher (saved_model.pb copied last).
    assert "tfx.components.pusher.executor.Executor" in _executor(spec, "Pusher")["args"]
    push = json.loads(_parameter(spec, "Pusher", "push_destination"))
    assert (push["filesystem"]["base_directory"]
            == "gs://my-ml-bucket/taxi-tpu/serving_model/taxi-tpu")
    # No TPU configured: the Trainer runs run_fn in the pipeline's own container, through the
    # executor that hands run_fn the raw eval examples for its export parity gate.
    assert "trainer_module.executor.Executor" in _executor(spec, "Trainer")["args"]
    raw = spec.root.dag.tasks["Trainer"].inputs.artifacts["raw_examples"]
    assert raw.task_output_artifact.producer_task == "CsvExampleGen"
    assert "warm_start_resolver" not in spec.root.dag.tasks  # warm start is off by default


@pytest.mark.parametrize("target", ["vertex", "kfp"])
def test_tune_adds_the_tuner_whose_best_values_feed_the_trainer(cloud_env, tmp_path,
                                                                monkeypatch, target):
    monkeypatch.setenv("TUNE", "true")
    monkeypatch.setenv("TUNE_TRIALS", "3")
    _, spec = _compile(tmp_path, target)
    tasks = spec.root.dag.tasks
    assert tasks["Tuner"].dependent_tasks == ["Transform"]
    hyperparameters = tasks["Trainer"].inputs.artifacts["hyperparameters"]
    assert hyperparameters.task_output_artifact.producer_task == "Tuner"
    assert hyperparameters.task_output_artifact.output_artifact_key == "best_hyperparameters"
    assert _parameter(spec, "Tuner", "tuner_fn") == "trainer_module.tuning.tuner_fn"
    assert json.loads(_parameter(spec, "Tuner", "custom_config"))["tuner_trials"] == 3
    assert _executor(spec, "Tuner")["image"] == CLOUD["PIPELINE_IMAGE"]


@pytest.mark.parametrize("tpu,machine,accelerator,count", [
    ("v5e-4", "ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4),
    ("v3-8", "cloud-tpu", "TPU_V3", 8),
])
def test_tpu_training_runs_the_trainer_as_a_vertex_tpu_job(cloud_env, tmp_path, tpu, machine,
                                                            accelerator, count):
    from google.cloud.aiplatform_v1.types import custom_job

    cloud_env.setenv("TPU_TYPE", tpu)
    cloud_env.setenv("TPU_TRAINER_IMAGE", TPU_IMAGE)
    cloud_env.setenv("SERVICE_ACCOUNT", "trainer@my-ml-project.iam.gserviceaccount.com")
    _, spec = _compile(tmp_path)
    args = _executor(spec, "Trainer")["args"]
    # TFX's Vertex executor submits the job; the job runs this project's Trainer executor.
    assert "pipeline.components.vertex_trainer.VertexExecutor" in args
    from pipeline.components.vertex_trainer import VertexExecutor
    from trainer_module.executor import Executor

    assert VertexExecutor()._GetExecutorClass() is Executor
    custom = json.loads(_parameter(spec, "Trainer", "custom_config"))
    assert custom["ai_platform_enable_vertex"] is True
    assert custom["ai_platform_vertex_region"] == "us-central1"
    training = custom["ai_platform_training_args"]
    assert training["project"] == "my-ml-project"
    [pool] = training["job_spec"]["worker_pool_specs"]
    assert pool["machine_spec"]["machine_type"] == machine
    assert pool["machine_spec"]["accelerator_type"] == accelerator
    assert pool["machine_spec"]["accelerator_count"] == count
    assert pool["container_spec"]["image_uri"] == TPU_IMAGE
    # v5e reaches TensorFlow only through PJRT; v2/v3 keep the stream executor.
    env = {e["name"]: e["value"] for e in pool["container_spec"].get("env", [])}
    assert env == ({"NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
                    "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so"}
                   if tpu.startswith("v5e") else {})
    # run_fn is told a TPU is required: no silent CPU training on a TPU job.
    trainer = custom["trainer_config"]
    assert trainer["runtime"]["strategy"] == "tpu"
    assert trainer["runtime"]["tpu_address"] == "local"
    # The Vertex SDK accepts the job spec as it stands (accelerator enum, fields).
    job_spec = custom_job.CustomJobSpec(**training["job_spec"])
    assert job_spec.worker_pool_specs[0].machine_spec.accelerator_count == count
    assert job_spec.service_account == "trainer@my-ml-project.iam.gserviceaccount.com"
    # TFX's Vertex client (the one the Trainer step uses) sets the command and keeps the env.
    from tfx.extensions.google_cloud_ai_platform import training_clients
    from tfx.types import standard_artifacts

    client = training_clients.VertexJobClient.__new__(training_clients.VertexJobClient)
    model = standard_artifacts.Model()
    model.uri = "gs://my-ml-bucket/model"
    args = dict(training)
    args.pop("project")
    custom = client.create_training_job({}, {"model": [model]}, {}, "x.Executor", args, None,
                                        None)
    [pool] = custom["job_spec"]["worker_pool_specs"]
    assert pool["container_spec"]["command"][:3] == ["python", "-m", "tfx.scripts.run_executor"]
    assert {e["name"]: e["value"] for e in pool["container_spec"].get("env", [])} == env


def test_dataflow_runner_from_the_same_config(cloud_env, tmp_path):
    """What Dataflow workers running the pipeline image need (pipeline/cloud/preflight.py cites the
    rules): Runner v2 for a custom container, the SDK from the container, a disk for the
    >10 GB image, the subnetwork of a custom network, internal IPs only when asked."""
    cloud_env.setenv("BEAM_RUNNER", "dataflow")
    cloud_env.setenv("DATAFLOW_MAX_WORKERS", "8")
    _, spec = _compile(tmp_path)
    for node in ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator"):
        args = _executor(spec, node)["args"]
        assert {"--runner=DataflowRunner", "--project=my-ml-project", "--region=us-central1",
                "--temp_location=gs://my-ml-bucket/taxi-tpu/tmp",
                "--machine_type=n1-standard-4", "--max_num_workers=8", "--disk_size_gb=100",
                f"--sdk_container_image={CLOUD['PIPELINE_IMAGE']}",
                "--experiments=use_runner_v2", "--sdk_location=container"} <= set(args), args
        assert not [a for a in args if a.startswith(("--subnetwork", "--no_use_public_ips"))]

    cloud_env.setenv("VPC_NETWORK", "projects/123456/global/networks/ml")
    cloud_env.setenv("DATAFLOW_SUBNETWORK", "regions/us-central1/subnetworks/ml-central")
    cloud_env.setenv("DATAFLOW_PUBLIC_IPS", "false")
    cloud_env.setenv("DATAFLOW_DISK_SIZE_GB", "200")
    args = settings.load().beam_pipeline_args()
    assert {"--subnetwork=regions/us-central1/subnetworks/ml-central", "--no_use_public_ips",
            "--disk_size_gb=200"} <= set(args)
    # Beam's own option parser accepts every flag as given.
    from apache_beam.options.pipeline_options import (
        GoogleCloudOptions,
        PipelineOptions,
        WorkerOptions,
    )

    options = PipelineOptions(list(args))
    assert options.view_as(WorkerOptions).disk_size_gb == 200
    assert options.view_as(WorkerOptions).use_public_ips is False
    assert options.view_as(WorkerOptions).subnetwork.endswith("subnetworks/ml-central")
    assert options.view_as(GoogleCloudOptions).region == "us-central1"


@pytest.mark.parametrize("env,message", [
    ({"DATAFLOW_DISK_SIZE_GB": "25"}, "dataflow_disk_size_gb=25 (DATAFLOW_DISK_SIZE_GB"),
    ({"VPC_NETWORK": "projects/123456/global/networks/ml"},
     "dataflow_subnetwork='' (DATAFLOW_SUBNETWORK or `dataflow_subnetwork` in the cloud config): "
     "required when network"),
    ({"DATAFLOW_SUBNETWORK": "regions/europe-west4/subnetworks/ml"}, "its region is "
     "'europe-west4', the pipeline's is 'us-central1'"),
    ({"DATAFLOW_PUBLIC_IPS": "false"}, "required when dataflow_public_ips is false"),
])
def test_dataflow_settings_workers_cannot_start_with_are_refused(cloud_env, env, message):
    cloud_env.setenv("BEAM_RUNNER", "dataflow")
    for var, value in env.items():
        cloud_env.setenv(var, value)
    with pytest.raises(ConfigError) as error:
        settings.load()
    assert message in str(error.value)


def _executor_kinds(job: dict) -> dict[str, set[str]]:
    return {name: set(executor)
            for name, executor in job["pipelineSpec"]["deploymentSpec"]["executors"].items()}


def test_kfp_spec_has_only_executors_the_kfp_backend_runs(cloud_env, tmp_path):
    """Kubeflow Pipelines' Argo compiler (kubeflow/pipelines
    backend/src/v2/compiler/argocompiler/dag.go) compiles container and importer executors
    and refuses resolver ("resolver executors not implemented") and customJob ones. TFX
    compiles a Resolver into resolver executors, which Vertex runs."""
    cloud_env.setenv("WARM_START", "true")
    cloud_env.setenv("TPU_TYPE", "v5e-4")
    cloud_env.setenv("TPU_TRAINER_IMAGE", TPU_IMAGE)
    kfp_job, kfp_spec = _compile(tmp_path / "kfp", "kfp")
    assert {kind for kinds in _executor_kinds(kfp_job).values() for kind in kinds} == {
        "container"}
    assert set(kfp_spec.root.dag.tasks) == KFP_NODES | {"warm_start_resolver"}
    vertex_job, _ = _compile(tmp_path / "vertex", "vertex")
    resolvers = sorted(n for n, k in _executor_kinds(vertex_job).items() if "resolver" in k)
    assert resolvers == ["baseline_resolver-model-blessing-resolver_executor",
                         "baseline_resolver-model-resolver_executor",
                         "warm_start_resolver-model-blessing-resolver_executor",
                         "warm_start_resolver-model-resolver_executor"]

    # On KFP both models come from the serving dir the Pusher writes to.
    tasks = kfp_spec.root.dag.tasks
    serving_dir = "gs://my-ml-bucket/taxi-tpu/serving_model/taxi-tpu"
    for node in ("baseline_resolver", "warm_start_resolver"):
        assert "pipeline.components.served_model" in " ".join(_executor(kfp_spec, node)["args"])
        assert _parameter(kfp_spec, node, "serving_dir") == serving_dir
    # The baseline is read again for each new candidate; the warm-start model on every run.
    baseline = tasks["baseline_resolver"].inputs.artifacts["candidate"]
    assert baseline.task_output_artifact.producer_task == "Trainer"
    assert tasks["baseline_resolver"].caching_options.enable_cache
    assert not tasks["warm_start_resolver"].caching_options.enable_cache
    base = tasks["Trainer"].inputs.artifacts["base_model"].task_output_artifact
    assert base.producer_task == "warm_start_resolver"
    evaluator = tasks["Evaluator"].inputs.artifacts["baseline_model"].task_output_artifact
    assert evaluator.producer_task == "baseline_resolver"
    assert ("pipeline.components.evaluator.EvaluatorExecutor"
            in _executor(kfp_spec, "Evaluator")["args"])


def test_kfp_run_uses_the_kubernetes_service_account(cloud_env, tmp_path, capsys, no_network):
    """kfp.Client.create_run_from_pipeline_package(service_account=...) takes a Kubernetes
    service account name; Vertex's PipelineJob a Google Cloud email: two settings."""
    cloud_env.setenv("SERVICE_ACCOUNT", "pipelines@my-ml-project.iam.gserviceaccount.com")
    cloud_env.setenv("KFP_SERVICE_ACCOUNT", "pipeline-runner")
    cloud_env.setenv("ENABLE_CACHE", "false")
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path), "kfp")
    capsys.readouterr()
    assert submit.main(["--target", "kfp", "--host", "http://127.0.0.1:9", "--dry-run",
                        "--pipeline-file", path]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["service_account"] == "pipeline-runner"
    # Caching follows the setting: the kfp client writes it into every task.
    tasks = run["pipeline_spec"]["root"]["dag"]["tasks"]
    assert {t.get("cachingOptions", {}).get("enableCache", False)
            for t in tasks.values()} == {False}

    cloud_env.setenv("KFP_SERVICE_ACCOUNT", "pipelines@my-ml-project.iam.gserviceaccount.com")
    with pytest.raises(ConfigError, match="kfp_service_account='pipelines@.*expected a "
                       "Kubernetes service account name"):
        settings.load()


@pytest.mark.parametrize("var", ["PIPELINE_IMAGE", "TPU_TRAINER_IMAGE"])
def test_latest_images_are_refused_for_both_images(cloud_env, var):
    """Vertex AI caches a step by its inputs, image and command: a rebuilt ':latest' keeps the
    same name and would be served from cache."""
    cloud_env.setenv("TPU_TYPE", "v5e-4")
    cloud_env.setenv("TPU_TRAINER_IMAGE", TPU_IMAGE)
    cloud_env.setenv(var, "us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:latest")
    with pytest.raises(ConfigError, match=rf"\({var} .*':latest' moves on every build"):
        settings.load()
    digest = "us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu@sha256:" + "a" * 64
    cloud_env.setenv(var, digest)
    assert settings.load()


def test_vertex_caching_follows_the_config(cloud_env, tmp_path, capsys, no_network):
    cloud_env.setenv("ENABLE_CACHE", "false")
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path))
    capsys.readouterr()
    assert submit.main(["--target", "vertex", "--dry-run", "--pipeline-file", path]) == 0
    tasks = json.loads(capsys.readouterr().out)["pipeline_job"]["pipelineSpec"]["root"]["dag"][
        "tasks"]
    assert {t.get("cachingOptions", {}).get("enableCache", False)
            for t in tasks.values()} == {False}


def test_content_hashes_are_in_the_compiled_parameters(cloud_env, tmp_path):
    """The schema and the custom components' code reach the cache key by content: an edit
    behind the same path and image tag changes a compiled parameter."""
    from pipeline import cache_keys

    _, spec = _compile(tmp_path / "a")
    schema = os.path.join(REPO_ROOT, "schemas", "taxi", "schema.pbtxt")
    assert _parameter(spec, "ImportSchemaGen", "schema_hash") == cache_keys.file_hash(schema)
    keyed = set()
    for component in kubeflow_v2_runner.create_pipeline(settings.load(), "vertex").components:
        compiled = {k: v for k in ("code_version", "custom_config")
                    if (v := _parameter(spec, component.id, k))}
        version = cache_keys.step_code_version(component)
        assert cache_keys.recorded_code_version(compiled) == (version or None), component.id
        keyed |= {component.id} if version else set()
    assert keyed == {"CsvExampleGen", "ImportSchemaGen", "AnomalyGate", "Transform", "Trainer",
                     "Evaluator"}

    edited = tmp_path / "schema.pbtxt"
    with open(schema, encoding="utf-8") as f:
        edited.write_text(f.read().replace("name: \"fare\"", "name: \"fare\"  # edited"))
    assert cache_keys.file_hash(str(edited)) != cache_keys.file_hash(schema)


def test_bigquery_source_builds_bigquery_example_gen(cloud_env, tmp_path):
    cloud_env.delenv("DATA_URI")
    cloud_env.setenv("DATA_SOURCE", "bigquery")
    cloud_env.setenv("BIGQUERY_TABLE", "my-ml-project.taxi.trips")
    job, spec = _compile(tmp_path, "kfp")
    tasks = spec.root.dag.tasks
    assert "CsvExampleGen" not in tasks and "BigQueryExampleGen" in tasks
    assert (_parameter(spec, "BigQueryExampleGen", "input_config").find(
        "SELECT * FROM `my-ml-project.taxi.trips`") >= 0)
    args = _executor(spec, "BigQueryExampleGen")["args"]
    assert "tfx.extensions.google_cloud_big_query.example_gen.executor.Executor" in args
    # BigQuery's export needs a project and a gs:// temp location even on the DirectRunner.
    assert {"--project=my-ml-project", "--temp_location=gs://my-ml-bucket/taxi-tpu/tmp"} <= set(
        args)
    raw = tasks["Trainer"].inputs.artifacts["raw_examples"]
    assert raw.task_output_artifact.producer_task == "BigQueryExampleGen"

    cloud_env.delenv("BIGQUERY_TABLE")
    with pytest.raises(ConfigError, match="set exactly one of bigquery_query"):
        settings.load()
    cloud_env.setenv("BIGQUERY_QUERY", "DROP TABLE taxi.trips")
    with pytest.raises(ConfigError, match="bigquery_query='DROP TABLE"):
        settings.load()


@pytest.mark.parametrize("env,message", [
    ({"GCP_PROJECT": ""}, "missing cloud setting(s): project (GCP_PROJECT)"),
    ({"GCS_BUCKET": "my-ml-bucket"}, "bucket='my-ml-bucket' (GCS_BUCKET"),
    ({"GCS_BUCKET": "gs://YOUR-BUCKET"}, "replace the placeholder"),
    ({"TPU_TYPE": "v9-8"}, "tpu='v9-8' (TPU_TYPE"),
    ({"TPU_TYPE": "v3-8"}, "tpu_trainer_image='' (TPU_TRAINER_IMAGE"),
    ({"PIPELINE_IMAGE": "taxi-tpu"}, "pipeline_image='taxi-tpu'"),
    ({"PIPELINE_NAME": "Taxi_TPU"}, "pipeline_name='Taxi_TPU'"),
    ({"DATAFLOW_MAX_WORKERS": "many"}, "dataflow_max_workers='many'"),
    ({"BEAM_RUNNER": "spark"}, "beam_runner='spark'"),
    ({"BEAM_DIRECT_WORKERS": "0"}, "beam_direct_workers=0 (BEAM_DIRECT_WORKERS"),
    ({"BEAM_RUNNER": "dataflow", "BEAM_DIRECT_WORKERS": "1"},
     "beam_direct_workers=1 (BEAM_DIRECT_WORKERS or `beam_direct_workers` in the cloud config):"
     " it sets DirectRunner's workers, and beam_runner is 'dataflow'"),
])
def test_cloud_settings_are_checked(cloud_env, env, message):
    for var, value in env.items():
        cloud_env.setenv(var, value)
    with pytest.raises(ConfigError) as error:
        settings.load()
    assert message in str(error.value)


@pytest.mark.parametrize("workers,expected", [
    ("1", ("--direct_running_mode=in_memory", "--direct_num_workers=1")),
    ("3", ("--direct_running_mode=multi_processing", "--direct_num_workers=3")),
])
def test_beam_direct_workers_reach_every_beam_step_of_the_compiled_spec(
        cloud_env, tmp_path, workers, expected):
    cloud_env.setenv("BEAM_DIRECT_WORKERS", workers)
    _, spec = _compile(tmp_path)
    for node in ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator"):
        args = _executor(spec, node)["args"]
        assert set(expected) <= set(args) and sum(
            a.startswith("--direct_") for a in args) == 2, args
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

    options = PipelineOptions(list(expected)).view_as(DirectOptions)
    assert (options.direct_running_mode, options.direct_num_workers) == (
        expected[0].split("=")[1], int(workers))


def test_example_config_file_refuses_its_placeholders(cloud_env):
    for var in CLOUD:
        cloud_env.delenv(var)
    with pytest.raises(ConfigError, match="replace the placeholder"):
        settings.load(os.path.join(REPO_ROOT, "pipeline", "cloud", "cloud.example.toml"))


def test_vertex_dry_run_builds_the_pipeline_job_request(cloud_env, tmp_path, capsys, no_network):
    cloud_env.setenv("SERVICE_ACCOUNT", "pipelines@my-ml-project.iam.gserviceaccount.com")
    cloud_env.setenv("VPC_NETWORK", "projects/123456/global/networks/ml")
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path))
    capsys.readouterr()
    code = submit.main(["--target", "vertex", "--dry-run", "--pipeline-file", path])
    assert code == 0
    request = json.loads(capsys.readouterr().out)
    assert request["parent"] == "projects/my-ml-project/locations/us-central1"
    assert request["pipeline_job_id"].startswith("taxi-tpu-")
    job = request["pipeline_job"]
    assert job["serviceAccount"] == "pipelines@my-ml-project.iam.gserviceaccount.com"
    assert job["network"] == "projects/123456/global/networks/ml"
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://my-ml-bucket/taxi-tpu/pipeline_root"
    assert set(job["pipelineSpec"]["root"]["dag"]["tasks"]) == NODES


class _KfpApi(http.server.BaseHTTPRequestHandler):
    """Answers the KFP v2beta1 calls the client makes and records each request."""

    requests: list[tuple[str, str, dict]] = []

    def _reply(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        self.requests.append(("GET", self.path, {}))
        self._reply({"experiments": []} if "/experiments" in self.path else {})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.requests.append(("POST", self.path, body))
        if self.path.startswith("/apis/v2beta1/experiments"):
            self._reply({"experiment_id": "exp-1", "display_name": body.get("display_name")})
        else:
            self._reply({"run_id": "run-1", "display_name": body.get("display_name"),
                         "experiment_id": body.get("experiment_id")})

    def log_message(self, *args):
        pass


def test_kfp_submit_makes_a_real_call_to_the_endpoint(cloud_env, tmp_path, capsys):
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path))
    _KfpApi.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KfpApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"http://127.0.0.1:{server.server_address[1]}"
        code = submit.main(["--target", "kfp", "--host", host, "--pipeline-file", path,
                            "--experiment", "taxi"])
    finally:
        server.shutdown()
    assert code == 0
    assert '"run_id": "run-1"' in capsys.readouterr().out
    posts = {p: body for method, p, body in _KfpApi.requests if method == "POST"}
    assert posts["/apis/v2beta1/experiments"]["display_name"] == "taxi"
    run = posts["/apis/v2beta1/runs"]
    assert run["display_name"] == "taxi-tpu" and run["experiment_id"] == "exp-1"
    assert run["runtime_config"]["pipeline_root"] == "gs://my-ml-bucket/taxi-tpu/pipeline_root"
    assert set(run["pipeline_spec"]["root"]["dag"]["tasks"]) == NODES


def test_kfp_dry_run_sends_nothing(cloud_env, tmp_path, capsys, no_network):
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path))
    capsys.readouterr()
    code = submit.main(["--target", "kfp", "--host", "http://127.0.0.1:9", "--dry-run",
                        "--pipeline-file", path])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["display_name"] == "taxi-tpu"
    assert set(report["run"]["pipeline_spec"]["root"]["dag"]["tasks"]) == NODES


def test_tfx_cli_compiles_for_vertex(cloud_env, tmp_path):
    env = dict(os.environ, VERTEX_HOME=str(tmp_path / "vertex_home"), TF_CPP_MIN_LOG_LEVEL="2",
               BUILD_DIR=str(tmp_path / "build"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    tfx = shutil.which("tfx", path=env["PATH"])
    result = subprocess.run(
        [tfx, "pipeline", "compile", "--engine", "vertex", "--pipeline_path",
         os.path.join(REPO_ROOT, "pipeline", "cloud", "kubeflow_v2_runner.py")],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Pipeline taxi-tpu compiled successfully" in result.stdout
    with open(tmp_path / "build" / "vertex" / "taxi-tpu.json", encoding="utf-8") as f:
        json_format.ParseDict(json.load(f)["pipelineSpec"], pipeline_spec_pb2.PipelineSpec())


def test_batch_predictions_add_bulk_inferrer_on_the_new_rows(cloud_env, tmp_path):
    cloud_env.setenv("BATCH_PREDICT_URI", "gs://my-ml-bucket/new_rows")
    job, spec = _compile(tmp_path, "kfp")
    tasks = spec.root.dag.tasks
    assert set(tasks) == KFP_NODES | {"PredictExampleGen", "BulkInferrer"}
    assert set(tasks["BulkInferrer"].dependent_tasks) == {"PredictExampleGen", "Trainer",
                                                          "Evaluator"}
    assert _parameter(spec, "PredictExampleGen", "input_base") == "gs://my-ml-bucket/new_rows"
    assert '"predict"' in _parameter(spec, "PredictExampleGen", "output_config")
    output_spec = json.loads(_parameter(spec, "BulkInferrer", "output_example_spec"))
    assert output_spec["output_columns_spec"][0]["predict_output"]["output_columns"] == [
        {"output_key": "probabilities", "output_column": "probabilities"}]
    # Still only executors the KFP backend runs.
    assert _executor_kinds(job)["BulkInferrer_executor"] == {"container"}
    with pytest.raises(ConfigError, match="batch_predict_uri='new_rows'"):
        cloud_env.setenv("BATCH_PREDICT_URI", "new_rows")
        settings.load()


def test_spans_compile_with_the_window_and_drift_gate_on_their_own_store(cloud_env, tmp_path):
    """No resolver on either backend finds older spans (TFX's step_builder.py compiles only the
    latest-artifact and latest-blessed-model ones; KFP's backend runs none,
    backend/src/v2/compiler/argocompiler/dag.go), so the compiled DriftValidator and SpanWindow
    keep a store in the pipeline root instead; the gate reads the one, Transform the other,
    and neither comes from the cache (they read and write that store). The Trainer ships
    Transform's statistics of the window's rows."""
    from pipeline import names
    from pipeline.spans import folders as spans

    cloud_env.setenv("DATASET", "penguins-daily")  # window_spans = 2, drift thresholds
    store = "gs://my-ml-bucket/penguins-daily-tpu/pipeline_root/span-store"
    for target in settings.TARGETS:
        job, spec = _compile(tmp_path / target, target)
        tasks = spec.root.dag.tasks
        assert {names.DRIFT_VALIDATOR, names.SPAN_WINDOW} <= set(tasks)
        assert not [t for t in tasks if "resolver" in t and "baseline" not in t], list(tasks)
        assert _parameter(spec, names.DRIFT_VALIDATOR, "statistics_store") == (
            f"{store}/statistics")
        assert _parameter(spec, names.SPAN_WINDOW, "store") == f"{store}/examples"
        window = spec.root.dag.tasks[names.SPAN_WINDOW].inputs.parameters["window_spans"]
        assert "2" in str(window.runtime_value), window
        source = tasks[names.TRANSFORM].inputs.artifacts["examples"].task_output_artifact
        assert source.producer_task == names.SPAN_WINDOW
        # The model ships the statistics of the window's training rows: Transform's.
        shipped = tasks[names.TRAINER].inputs.artifacts["statistics"].task_output_artifact
        assert (shipped.producer_task, shipped.output_artifact_key) == (
            names.TRANSFORM, names.PRE_TRANSFORM_STATISTICS)
        assert "previous_statistics" not in tasks[names.DRIFT_VALIDATOR].inputs.artifacts
        gate = tasks[names.ANOMALY_GATE].inputs.artifacts["drift_report"]
        assert gate.task_output_artifact.producer_task == names.DRIFT_VALIDATOR
        caching = {name: task.get("cachingOptions", {}).get("enableCache", False)
                   for name, task in job["pipelineSpec"]["root"]["dag"]["tasks"].items()}
        assert (caching[names.DRIFT_VALIDATOR], caching[names.SPAN_WINDOW],
                caching[names.TRAINER]) == (False, False, True)
        assert spans.FOLDER_PATTERN[spans.NUMBERED] in _parameter(
            spec, names.CSV_EXAMPLE_GEN, "input_config")
