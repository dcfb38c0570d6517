"""`make kfp-local`: the compiled Kubeflow Pipelines spec, executed on this machine by KFP's own
local orchestrator before a cluster ever sees it.

    python -m pipeline.cloud.kfp_local [--config cloud.toml] [--output-dir output/kfp-local]

What runs is the file `make compile TARGET=kfp` writes, with the same settings (its sha256 is
printed). kfp.local walks its DAG, resolves its placeholders, builds each task's executor
input, passes artifacts between tasks and runs importers. kfp.local runs a container task only
with `docker run` (DockerRunner); this machine has no Docker engine, so ImageTaskHandler stands
in for that one call: it runs the task's command and args as a subprocess in `.venv-image`, the
pipeline image's Python packages (`make image-venv`), with the image's working directory and
`ENV` lines. Everything else is kfp.local's own, but for one gap: kfp.local hands a task its
input artifacts typed by their schema title only ('system.Artifact' for TFX's types, which
are instance schemas), where KFP's backend passes the type the producer wrote; the handler
gives each input artifact the type the consuming component declares for it.

The Vertex spec's Trainer step submits a CustomJob instead of training. `run_vertex_trainer`
runs that step's executor with a job client that, in place of Vertex AI, runs the job's
worker-pool container command and environment (the PJRT variables included) as a subprocess in
the same environment, on the CPU.

Locations that exist only in the cloud or in an image are mapped to local folders by
LocalPaths, the one place that does so.
"""

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pipeline import datasets, names, pipeline_config
from pipeline.cloud import compiled_spec, kubeflow_v2_runner, settings
from pipeline.pipeline_config import REPO_ROOT, ConfigError
from pipeline.spans import folders as spans

# kfp.local's internals the adapter plugs into (the task handler interface and the dispatcher's
# handler lookup) are those of this version; tests/test_kfp_local.py runs against it.
KFP_VERSION = "2.13.0"
IMAGE_VENV = os.path.join(REPO_ROOT, ".venv-image")
DOCKERFILE = os.path.join(REPO_ROOT, "Dockerfile")
DEFAULT_OUTPUT_DIR = os.path.join(REPO_ROOT, "output", "kfp-local")
# The settings a local run compiles with where neither the cloud config nor the environment
# gives one: the spec is then what `make compile TARGET=kfp` writes with these same values.
LOCAL_SETTINGS = {
    "GCP_PROJECT": "kfp-local-run",
    "GCP_REGION": "us-central1",
    "GCS_BUCKET": "gs://kfp-local",
    "PIPELINE_IMAGE": "localhost/tfx-pipeline:local",
    "TPU_TRAINER_IMAGE": "localhost/tfx-tpu-trainer:local",
}
# The TPU type the Vertex Trainer's job is compiled with when the settings name none: v5e, whose
# PJRT runtime puts the most into the job's environment.
LOCAL_TPU = "v5e-4"
# Where the TPU image keeps the TPU runtime (Dockerfile.tpu); TensorFlow loads it at import
# when the job's PJRT variables point there.
TPU_LIBRARY = "/lib/libtpu.so"
LOG_TAIL_LINES = 40
# The argument of TFX's container entrypoint that carries the task's executor input.
EXECUTOR_INPUT_FLAG = "--json_serialized_invocation_args"


class TaskFailed(RuntimeError):
    """A task of the local run exited non-zero."""


@dataclasses.dataclass(frozen=True)
class LocalPaths:
    """Cloud and image locations, and the local folders that stand for them here.

    - `gs://<bucket>/...` → <root>/gcs/<bucket>/...: the pipeline's bucket (its data, serving
      dir and temp files).
    - the image's project folder (/pipeline) → this checkout, which the image copies.
    - the TPU runtime library → an empty folder: TensorFlow loads every library in a folder,
      so with none there it starts without a TPU plugin and runs on the CPU.
    """

    root: str

    @property
    def gcs_root(self) -> str:
        return os.path.join(self.root, "gcs")

    @property
    def no_tpu_runtime(self) -> str:
        return os.path.join(self.root, "no-tpu-runtime")

    def _rules(self) -> list[tuple[re.Pattern, str]]:
        # A path starts a string (or follows a quote, '=' or ':'), never inside another path.
        start = r"(?<![\w./-])"
        image_dir = kubeflow_v2_runner.IMAGE_PROJECT_DIR
        return [
            (re.compile("gs://"), self.gcs_root + "/"),
            (re.compile(start + re.escape(TPU_LIBRARY) + r"(?![\w./-])"), self.no_tpu_runtime),
            (re.compile(start + re.escape(image_dir) + r"(?=/|$|[\"\\:])"), REPO_ROOT),
        ]

    def local(self, text: str) -> str:
        """`text` with every cloud or image location replaced by its local folder."""
        for pattern, local in self._rules():
            text = pattern.sub(lambda _, local=local: local, text)
        return text

    def gcs(self, uri: str) -> str:
        """The local folder of a gs:// URI."""
        if not uri.startswith("gs://"):
            raise ValueError(f"{uri!r} is not a gs:// URI")
        return self.local(uri)

    def prepare(self) -> None:
        os.makedirs(self.gcs_root, exist_ok=True)
        os.makedirs(self.no_tpu_runtime, exist_ok=True)


def image_env() -> dict[str, str]:
    """The `ENV` lines of the pipeline image's Dockerfile, as it sets them."""
    env = {}
    with open(DOCKERFILE, encoding="utf-8") as f:
        for line in f:
            match = re.match(r"^ENV\s+([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*$", line)
            if match:
                env[match.group(1)] = match.group(2)
    return env


def image_workdir() -> str:
    """The pipeline image's last WORKDIR."""
    with open(DOCKERFILE, encoding="utf-8") as f:
        dirs = [line.split()[1] for line in f if line.startswith("WORKDIR ")]
    return dirs[-1]


@dataclasses.dataclass
class TaskRun:
    """One task's subprocess: what it ran, how it ended and where its log is."""

    name: str
    exit_code: int
    seconds: float
    log_path: str
    executor_input: dict[str, Any] | None

    def outputs(self) -> dict[str, list[str]]:
        """Each output artifact's URIs, by output key."""
        artifacts = (self.executor_input or {}).get("outputs", {}).get("artifacts", {})
        return {key: [a["uri"] for a in listed.get("artifacts", [])]
                for key, listed in artifacts.items()}

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def _executor_input(command: Sequence[str]) -> dict[str, Any] | None:
    """The executor input TFX's container entrypoint receives (None for other commands)."""
    if EXECUTOR_INPUT_FLAG in command:
        index = list(command).index(EXECUTOR_INPUT_FLAG) + 1
        if index < len(command):
            return json.loads(command[index])
    return None


class ImageEnvironment:
    """Runs container commands as subprocesses in the pipeline image's environment."""

    def __init__(self, paths: LocalPaths, venv: str = IMAGE_VENV) -> None:
        python = os.path.join(venv, "bin", "python")
        if not os.access(python, os.X_OK):
            raise ConfigError(f"{venv} has no Python: build the pipeline image's environment "
                              "with `make image-venv`")
        self.paths = paths
        self.venv = venv
        self.runs: list[TaskRun] = []
        self.image_env = image_env()
        self.workdir = paths.local(image_workdir())

    def environment(self, extra: Mapping[str, str] = ()) -> dict[str, str]:
        """This process's environment without the dev venv, then the image's ENV lines and
        `extra` (a container spec's env), with locations mapped."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
        path = [p for p in env.get("PATH", "").split(os.pathsep)
                if p and not p.startswith(os.path.join(REPO_ROOT, ".venv") + os.sep)]
        env["PATH"] = os.pathsep.join([os.path.join(self.venv, "bin"), *path])
        env["VIRTUAL_ENV"] = self.venv
        for key, value in {**self.image_env, **dict(extra)}.items():
            env[key] = self.paths.local(value)
        return env

    def run(self, name: str, command: Sequence[str], log_path: str,
            extra_env: Mapping[str, str] = ()) -> TaskRun:
        """Runs `command` (locations mapped) in the image's working directory, streaming its
        output to stdout and to `log_path`."""
        local_command = [self.paths.local(part) for part in command]
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        start = time.monotonic()
        with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
                local_command, cwd=self.workdir,
                env=self.environment(extra_env), stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, errors="replace") as process:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                sys.stdout.write(line)
            exit_code = process.wait()
        run = TaskRun(name, exit_code, time.monotonic() - start, log_path,
                      _executor_input(local_command))
        self.runs.append(run)
        return run


def _task_names(pipeline_spec: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """kfp.local's folder name of each task → (task name, component name).

    kfp.local names a task's folder after its component, less the 'comp-' prefix that KFP's
    own compiler gives every component name (kfp.local.executor_input_utils.
    get_local_task_resource_name); TFX's names have no such prefix.
    """
    from kfp.local import executor_input_utils

    folders: dict[str, tuple[str, str]] = {}
    for name, task in pipeline_spec["root"]["dag"]["tasks"].items():
        component = task["componentRef"]["name"]
        folder = executor_input_utils.get_local_task_resource_name(component)
        if folder in folders:
            raise ConfigError(f"tasks {folders[folder][0]} and {name} would share kfp.local's "
                              f"task folder {folder!r}; rename one of their components")
        folders[folder] = (name, component)
    return folders


def _type_inputs(executor_input: dict[str, Any], declared: Mapping[str, Any]) -> None:
    """Types each input artifact of `executor_input` as its component declares it."""
    for key, artifacts in executor_input.get("inputs", {}).get("artifacts", {}).items():
        for artifact in artifacts.get("artifacts", []):
            artifact["type"] = declared[key]["artifactType"]


def _task_handler(environment: ImageEnvironment, pipeline_spec: dict[str, Any]):
    """kfp.local's task handler interface, implemented by a subprocess in `environment`."""
    from kfp.local import status, task_handler_interface

    tasks = _task_names(pipeline_spec)

    class ImageTaskHandler(task_handler_interface.ITaskHandler):
        """Runs a container task's resolved command where DockerTaskHandler would start it in
        the image; its log goes beside its executor output."""

        def __init__(self, image: str, full_command: list[str], pipeline_root: str,
                     runner: Any) -> None:
            self.full_command = list(full_command)
            self.pipeline_root = pipeline_root

        def run(self) -> status.Status:
            command = self.full_command
            executor_input = _executor_input(command)
            if executor_input is None:
                raise ConfigError(f"a container task runs {command[:3]}: the local run "
                                  "knows only TFX's container entrypoint")
            task_dir = os.path.dirname(executor_input["outputs"]["outputFile"])
            # <pipeline root>/<pipeline run>/<task folder>, the last empty for a short name.
            run_and_task = os.path.relpath(task_dir, self.pipeline_root).split(os.sep, 1)
            name, component = tasks[run_and_task[1] if len(run_and_task) > 1 else ""]
            declared = (pipeline_spec["components"][component].get("inputDefinitions", {})
                        .get("artifacts", {}))
            index = command.index(EXECUTOR_INPUT_FLAG) + 1
            _type_inputs(executor_input, declared)
            command[index] = json.dumps(executor_input)
            run = environment.run(name, command, os.path.join(task_dir, "task.log"))
            return status.Status.SUCCESS if run.exit_code == 0 else status.Status.FAILURE

    return ImageTaskHandler


@contextmanager
def _image_tasks(environment: ImageEnvironment,
                 pipeline_spec: dict[str, Any]) -> Iterator[None]:
    """kfp.local, with container tasks run in `environment` instead of `docker run`."""
    import kfp
    from kfp.local import docker_task_handler

    if kfp.__version__ != KFP_VERSION:
        raise ConfigError(f"kfp {kfp.__version__} is installed; the local run plugs into "
                          f"kfp.local as kfp {KFP_VERSION} defines it (requirements.lock)")
    docker_handler = docker_task_handler.DockerTaskHandler
    docker_task_handler.DockerTaskHandler = _task_handler(environment, pipeline_spec)
    try:
        yield
    finally:
        docker_task_handler.DockerTaskHandler = docker_handler


def execute_spec(spec_path: str, pipeline_root: str,
                 environment: ImageEnvironment) -> list[TaskRun]:
    """Runs the compiled PipelineJob at `spec_path` with kfp.local; returns its tasks' runs.

    Raises:
      TaskFailed: a task exited non-zero (its name, exit code and the end of its log).
    """
    from kfp import components, local

    with open(spec_path, encoding="utf-8") as f:
        job = json.load(f)
    pipeline = components.load_component_from_text(json.dumps(job["pipelineSpec"]))
    local.init(runner=local.DockerRunner(), pipeline_root=pipeline_root,
               raise_on_error=True)
    first = len(environment.runs)
    with _image_tasks(environment, job["pipelineSpec"]):
        try:
            pipeline()
        except RuntimeError as e:
            failed = [r for r in environment.runs[first:] if r.exit_code != 0]
            if not failed:
                raise
            raise TaskFailed(_failure(failed[-1])) from e
    return environment.runs[first:]


def _failure(run: TaskRun) -> str:
    return (f"task {run.name} failed with exit code {run.exit_code}; the end of its log "
            f"({run.log_path}):\n{run.tail()}")


def _artifact_uri(run: TaskRun, key: str) -> str:
    [uri] = run.outputs()[key]
    return uri


def _task(runs: list[TaskRun], task: str) -> TaskRun:
    found = [r for r in runs if r.name == task]
    if not found:
        raise KeyError(f"no run of task {task} among {[r.name for r in runs]}")
    return found[-1]


def stage_data(data_dir: str, data_uri: str, paths: LocalPaths) -> str:
    """Copies the CSV files of `data_dir` to the local folder of `data_uri`, as `gsutil cp`
    would put them in the bucket; returns that folder."""
    target = paths.gcs(data_uri)
    if os.path.isdir(target):
        shutil.rmtree(target)
    shutil.copytree(data_dir, target)
    return target


# ---- The Vertex spec's Trainer: its CustomJob, run here ----


def _local_job_client(environment: ImageEnvironment, log_path: str):
    """TFX's Vertex job client with the job service replaced: `launch_job` runs the CustomJob's
    single worker pool's container command and env as a subprocess (Google Cloud is not here)."""
    from google.cloud.aiplatform_v1.types.job_state import JobState
    from tfx.extensions.google_cloud_ai_platform import training_clients

    class LocalJobClient(training_clients.VertexJobClient):
        job: dict[str, Any] = {}
        run: TaskRun | None = None

        def create_client(self) -> None:
            self._client = None

        def launch_job(self, project: str, training_job: dict[str, Any]) -> None:
            self._job_name = f"projects/{project}/locations/{self._region}/customJobs/local"
            pools = training_job["job_spec"]["worker_pool_specs"]
            if len(pools) != 1 or pools[0].get("replica_count", 1) != 1:
                raise ConfigError(f"the Trainer's CustomJob has worker pools {pools}; the "
                                  "local run executes one pool of one replica")
            container = pools[0]["container_spec"]
            LocalJobClient.job = training_job
            LocalJobClient.run = environment.run(
                "vertex-trainer-job", container["command"] + container.get("args", []),
                log_path, {e["name"]: e["value"] for e in container.get("env", [])})

        def get_job(self) -> Any:
            failed = self.run is None or self.run.exit_code != 0
            message = _failure(self.run) if failed and self.run else ""
            return dataclasses.make_dataclass("Job", ["name", "state", "error"])(
                self._job_name,
                JobState.JOB_STATE_FAILED if failed else JobState.JOB_STATE_SUCCEEDED,
                dataclasses.make_dataclass("Status", ["message"])(message))

    return LocalJobClient


def _on_cpu(custom_config: dict[str, Any]) -> dict[str, Any]:
    """The Trainer's custom_config with strategy 'tpu' as 'auto': there is no TPU here, and
    'tpu' never falls back to the CPU by itself."""
    from trainer_module.config import TrainerConfig
    from trainer_module.keys import TRAINER_CONFIG_KEY

    trainer = TrainerConfig.from_custom_config(custom_config)
    if trainer.runtime.strategy != "tpu":
        return custom_config
    return {**custom_config,
            TRAINER_CONFIG_KEY: trainer.replace(strategy="auto").to_custom_config()[
                TRAINER_CONFIG_KEY]}


def run_vertex_trainer(vertex_spec: str, kfp_trainer: TaskRun, job_root: str,
                       environment: ImageEnvironment) -> tuple[dict[str, Any], TaskRun]:
    """Runs the Vertex spec's Trainer step on the inputs the local KFP run gave its Trainer,
    with new output folders under `job_root`; returns the CustomJob and the job's run.

    Raises:
      TaskFailed: the job's command exited non-zero.
    """
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as utils

    from pipeline.components.vertex_trainer import VertexExecutor

    with open(vertex_spec, encoding="utf-8") as f:
        job = json.load(f)
    params = compiled_spec.tasks(job)[names.TRAINER]["inputs"]["parameters"]
    exec_properties = {name: compiled_spec.parameter(job, names.TRAINER, name)
                       for name in params}
    exec_properties[names.CUSTOM_CONFIG] = json.dumps(
        _on_cpu(json.loads(exec_properties[names.CUSTOM_CONFIG])))
    executor_input = json_format.ParseDict(kfp_trainer.executor_input,
                                           pipeline_spec_pb2.ExecutorInput(),
                                           ignore_unknown_fields=True)
    inputs = utils.parse_raw_artifact_dict(executor_input.inputs.artifacts)
    outputs = utils.parse_raw_artifact_dict(executor_input.outputs.artifacts)
    for key, artifacts in outputs.items():
        for artifact in artifacts:
            artifact.uri = os.path.join(job_root, key)
            os.makedirs(artifact.uri, exist_ok=True)
    client = _local_job_client(environment, os.path.join(job_root, "job.log"))
    executor = VertexExecutor()
    executor.job_client = client  # type: ignore[method-assign]
    executor.poll_seconds = 0
    try:
        executor.Do(inputs, outputs, exec_properties)
    except RuntimeError as e:
        raise TaskFailed(str(e)) from e
    assert client.run is not None
    return client.job, client.run


# ---- The whole local run ----


@dataclasses.dataclass
class LocalRun:
    """What `make kfp-local` ran and what came out."""

    spec_path: str
    spec_sha256: str
    runs: list[TaskRun]
    metrics: dict[str, float]
    pushed: str
    vertex_job: dict[str, Any]
    vertex_run: TaskRun

    def summary(self) -> dict[str, Any]:
        return {
            "spec": self.spec_path, "sha256": self.spec_sha256,
            "tasks": [{"task": r.name, "exit_code": r.exit_code, "seconds": round(r.seconds, 1),
                       "log": r.log_path, "outputs": r.outputs()} for r in self.runs],
            "metrics": self.metrics, "pushed": self.pushed,
            "vertex_trainer_job": {
                "exit_code": self.vertex_run.exit_code, "log": self.vertex_run.log_path,
                "worker_pool": self.vertex_job["job_spec"]["worker_pool_specs"][0]},
        }


def cloud_settings(config_path: str | None, env: Mapping[str, str],
                   data_dir: str | None = None) -> settings.CloudConfig:
    """The cloud settings of the user's config and environment, LOCAL_SETTINGS where they
    give none. DirectRunner's workers, where neither sets them, are those `make run` takes for
    the data (`data_dir`, default the dataset's shipped data): the tasks run on this machine,
    where small data runs fastest in each task's own process."""
    cloud = settings.read(config_path, env, defaults=LOCAL_SETTINGS)
    if not cloud.data_uri and cloud.data_source == "csv":
        cloud = dataclasses.replace(cloud, data_uri=f"{cloud.output_dir}/data")
    if cloud.beam_runner == "direct" and cloud.beam_direct_workers is None:
        cloud = dataclasses.replace(cloud, beam_direct_workers=_beam_workers(
            data_dir or datasets.shipped_data_dir(cloud.dataset)))
    return cloud.validate()


def _beam_workers(data_dir: str) -> int:
    """`make run`'s DirectRunner workers for the span a compiled run reads (the newest), or
    for a flat folder."""
    found = spans.find(data_dir)
    return pipeline_config.local_beam_workers(found.folders[found.newest] if found
                                              else data_dir)


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cloud: settings.CloudConfig, data_dir: str, output_dir: str,
        spec: str | None = None) -> LocalRun:
    """Compiles both targets (the KFP one unless `spec` names a compiled file to run instead),
    runs the KFP spec with kfp.local, then the Vertex Trainer's job.

    Raises:
      TaskFailed: a task or the job exited non-zero.
      ConfigError: a setting is wrong, or the image's environment is missing.
    """
    from pipeline.runs import eval_results

    if cloud.data_source != "csv":
        raise ConfigError(f"data_source={cloud.data_source!r} (DATA_SOURCE): the local run "
                          "reads CSV files; BigQuery exists only on Google Cloud")
    paths = LocalPaths(os.path.abspath(output_dir))
    paths.prepare()
    environment = ImageEnvironment(paths)
    build = os.path.join(paths.root, "build")
    kfp_spec = spec or kubeflow_v2_runner.compile_pipeline(cloud, build, "kfp")
    digest = sha256(kfp_spec)
    print(f"Running {kfp_spec} (sha256 {digest}) with kfp.local; container tasks run in "
          f"{environment.venv}", flush=True)
    if cloud.beam_runner == "direct":
        print(f"Beam steps: DirectRunner, {cloud.beam_direct_workers or 'one per core'} "
              f"worker(s) (BEAM_DIRECT_WORKERS)", flush=True)
    stage_data(data_dir, cloud.data_uri, paths)
    runs = execute_spec(kfp_spec, os.path.join(paths.root, "pipeline_root"), environment)

    evaluation = _artifact_uri(_task(runs, names.EVALUATOR), names.EVALUATION)
    pushed = _artifact_uri(_task(runs, names.PUSHER), names.PUSHED_MODEL)
    metrics = eval_results.overall_metrics(evaluation)

    vertex_cloud = dataclasses.replace(cloud, tpu=cloud.tpu or LOCAL_TPU)
    vertex_spec = kubeflow_v2_runner.compile_pipeline(vertex_cloud, build, "vertex")
    print(f"Running the Trainer's CustomJob of {vertex_spec} (sha256 {sha256(vertex_spec)}) "
          "on the CPU", flush=True)
    job, job_run = run_vertex_trainer(vertex_spec, _task(runs, names.TRAINER),
                                      os.path.join(paths.root, "vertex_trainer_job"),
                                      environment)
    return LocalRun(kfp_spec, digest, runs, metrics, pushed, job, job_run)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.environ.get("CLOUD_CONFIG"),
                        help="cloud settings (TOML); LOCAL_SETTINGS fill in what it lacks")
    parser.add_argument("--output-dir", default=os.environ.get("OUTPUT_DIR")
                        or DEFAULT_OUTPUT_DIR)
    parser.add_argument("--spec", help="a compiled KFP PipelineJob to run instead of the one "
                        "compiled from the settings")
    parser.add_argument("--data-dir", default=os.environ.get("DATA_DIR"),
                        help="CSV files staged as the bucket's data_uri (default: the "
                             "dataset's shipped data)")
    args = parser.parse_args(argv)
    try:
        cloud = cloud_settings(args.config, os.environ, args.data_dir)
        data_dir = args.data_dir or datasets.shipped_data_dir(cloud.dataset)
        result = run(cloud, data_dir, args.output_dir,
                     os.path.abspath(args.spec) if args.spec else None)
    except (ConfigError, TaskFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 1
    summary = result.summary()
    path = os.path.join(os.path.abspath(args.output_dir), "kfp-local.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print(f"\nkfp.local ran {len(result.runs)} tasks of {result.spec_path} "
          f"(sha256 {result.spec_sha256}), all succeeded:")
    for task in summary["tasks"]:
        print(f"  {task['task']:<24} {task['seconds']:>7.1f} s")
    print(f"Evaluation: {json.dumps(result.metrics, sort_keys=True)}")
    print(f"Pushed: {result.pushed}")
    print(f"Vertex Trainer's CustomJob: exit 0 ({result.vertex_run.log_path})")
    print(f"Summary: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
