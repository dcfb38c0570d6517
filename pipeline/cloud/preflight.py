"""Checks a cloud run against the rules its backends apply, before anything is submitted.

    python -m pipeline.cloud.preflight --target vertex|kfp [--config cloud.toml]

Every check needs no network: it reads the settings, compiles the pipeline for the target into
a temporary folder and reads the compiled spec back, and reads the Dockerfiles and the lock.
One line per check; the exit code is 1 when any check fails (2 when the settings cannot be
read at all). `make submit` runs it first.

The rules, and where each backend states it:
- Kubeflow Pipelines' backend compiles only container and importer executors ("resolver
  executors not implemented", custom jobs "Google Cloud only":
  kubeflow/pipelines backend/src/v2/compiler/argocompiler/dag.go); Vertex AI also runs
  resolvers. A KFP run's service account is a Kubernetes service account name.
- TensorFlow on TPU v5e runs through PJRT: the worker needs NEXT_PLUGGABLE_DEVICE_USE_C_API and
  TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so, and the image libtpu.so in /lib (Vertex AI
  "Training with TPU accelerators"); v2/v3 use the stream executor and must not get them.
- Dataflow workers running the pipeline image as their SDK container need Runner v2, a disk
  for the >10 GB image, a subnetwork on a custom network, the Beam boot of the installed Beam,
  and RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1 so that boot does not build a new venv
  (tensorflow/tfx#6386, #6921).
- TFX's Vertex Pusher uploads the model with the given prediction image and passes the serving
  args, less endpoint_name/project/regions/labels, to `aiplatform.Model.deploy`; the image gets
  no port or route, so it must be one of Vertex AI's prebuilt TensorFlow images (Vertex AI
  "Prebuilt containers for inference", which lists them only under :latest).
- Vertex AI and KFP key their caches on inputs, parameters, image and command: images need a
  version tag or digest, and the schema's and custom components' content hashes must be in
  the compiled parameters.
"""

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable

from pipeline import console, names
from pipeline.cloud import compiled_spec, settings
from pipeline.cloud.tpu_types import LIBTPU_PATH, PJRT_ENV, TPU_TYPES
from pipeline.datasets import REPO_ROOT
from pipeline.errors import ConfigError
from pipeline.pipeline_config import DEFAULT_OUTPUT_DIR

# Executor kinds (keys of deploymentSpec.executors[*]) each backend runs.
SUPPORTED_EXECUTORS = {
    "kfp": {"container", "importer"},
    "vertex": {"container", "importer", "resolver", "customJob"},
}
VERTEX_TRAINER_EXECUTOR = "pipeline.components.vertex_trainer.VertexExecutor"
BEAM_TASKS = ("CsvExampleGen", "BigQueryExampleGen", "StatisticsGen", "Transform", "Evaluator")
SDK_ENV_LINE = "RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1"
# The packages the pipeline image installs over the TFX image's own (which pins Beam 2.59,
# kfp 2.5 and google-cloud-aiplatform 1.70): the versions the lock and the tests use.
IMAGE_PINNED = ("apache-beam", "kfp", "kfp-pipeline-spec", "google-cloud-aiplatform")
BEAM_SDK_IMAGE_RE = re.compile(r"^COPY --from=apache/beam_python3\.10_sdk:(\S+) "
                               r"/opt/apache/beam /opt/apache/beam$", re.M)


@dataclasses.dataclass(frozen=True)
class ProjectFiles:
    """The texts the checks read (tests pass edited copies)."""

    dockerfile: str
    dockerfile_tpu: str
    image_requirements: str
    lock: str

    @classmethod
    def read(cls, root: str = REPO_ROOT) -> "ProjectFiles":
        def text(*parts: str) -> str:
            with open(os.path.join(root, *parts), encoding="utf-8") as f:
                return f.read()

        return cls(text("Dockerfile"), text("Dockerfile.tpu"),
                   text("docker", "requirements-pipeline.txt"), text("requirements.lock"))


@dataclasses.dataclass(frozen=True)
class Context:
    cloud: settings.CloudConfig
    target: str
    job: dict  # the compiled PipelineJob
    files: ProjectFiles

    @property
    def tasks(self) -> dict:
        return compiled_spec.tasks(self.job)

    @property
    def executors(self) -> dict:
        return self.job["pipelineSpec"]["deploymentSpec"]["executors"]

    def parameter(self, task: str, name: str):
        return compiled_spec.parameter(self.job, task, name)

    def container(self, task: str) -> dict:
        label = self.tasks[task]["componentRef"]["name"]
        executor = self.job["pipelineSpec"]["components"][label]["executorLabel"]
        return self.executors[executor].get("container", {})


def check_settings(ctx: Context) -> list[str]:
    """Every setting in its form: project, region, bucket, names, networks, sizes."""
    skip = {"pipeline_image", "tpu_trainer_image", "service_account", "kfp_service_account"}
    return [message for name, message in ctx.cloud.problems()
            if name not in skip and not name.startswith(ENDPOINT_PREFIX)]


def check_service_account(ctx: Context) -> list[str]:
    """Vertex AI runs as a Google Cloud service account email; a KFP run as a Kubernetes
    service account name."""
    problems = [message for name, message in ctx.cloud.problems()
                if name in ("service_account", "kfp_service_account")]
    if ctx.target == "kfp" and "@" in ctx.cloud.kfp_service_account:
        problems.append(f"kfp_service_account={ctx.cloud.kfp_service_account!r}: KFP takes a "
                        "Kubernetes service account name, not an email")
    return problems


def check_images(ctx: Context) -> list[str]:
    """Both images carry a version tag or a digest (a rebuilt :latest is served from cache)."""
    problems = [message for name, message in ctx.cloud.problems()
                if name in ("pipeline_image", "tpu_trainer_image")]
    for name, executor in ctx.executors.items():
        image = executor.get("container", {}).get("image", "")
        reason = settings.image_problem(image) if image else ""
        if reason:
            problems.append(f"{name} runs image {image!r}: {reason}")
    return problems


def check_executors(ctx: Context) -> list[str]:
    """Every executor in the compiled spec is of a kind the target's backend runs."""
    allowed = SUPPORTED_EXECUTORS[ctx.target]
    problems = []
    for name, executor in sorted(ctx.executors.items()):
        kinds = set(executor) - allowed
        if kinds:
            problems.append(f"{name} is a {'/'.join(sorted(kinds))} executor, which "
                            f"{ctx.target} does not run (it runs {', '.join(sorted(allowed))})")
    return problems


def _trainer_job_spec(ctx: Context) -> dict | None:
    config = ctx.parameter(names.TRAINER, "custom_config")
    if not config:
        return None
    training = json.loads(config).get("ai_platform_training_args")
    return training["job_spec"] if training else None


def check_tpu(ctx: Context) -> list[str]:
    """The Trainer's CustomJob asks for the configured TPU's machine, accelerator, count and
    topology, sets exactly the runtime environment that TPU needs, the TPU image holds
    libtpu.so where PJRT looks for it, and the step waiting for the job ends."""
    job_spec = _trainer_job_spec(ctx)
    if not ctx.cloud.tpu:
        return (["the Trainer submits a CustomJob but no TPU is configured"]
                if job_spec else [])
    if ctx.cloud.tpu not in TPU_TYPES:
        return [f"tpu={ctx.cloud.tpu!r} is not one of {', '.join(TPU_TYPES)}"]
    tpu = TPU_TYPES[ctx.cloud.tpu]
    if not job_spec:
        return [f"tpu={ctx.cloud.tpu!r}, but the compiled Trainer submits no CustomJob"]
    problems = []
    [pool] = job_spec["worker_pool_specs"]
    machine = pool["machine_spec"]
    expected = {"machine_type": tpu.machine_type, "accelerator_type": tpu.accelerator_type,
                "accelerator_count": tpu.accelerator_count}
    if tpu.topology:
        expected["tpu_topology"] = tpu.topology
    for key, value in expected.items():
        if machine.get(key) != value:
            problems.append(f"{ctx.cloud.tpu}: machine_spec.{key} is {machine.get(key)!r}, "
                            f"expected {value!r}")
    env = {e["name"]: e["value"] for e in pool["container_spec"].get("env", [])}
    for name in PJRT_ENV:
        if tpu.env.get(name) != env.get(name):
            problems.append(
                f"{ctx.cloud.tpu} ({tpu.runtime} runtime): container_spec.env {name} is "
                f"{env.get(name)!r}, expected {tpu.env.get(name)!r}")
    executor_class = " ".join(_args(ctx, names.TRAINER))
    if VERTEX_TRAINER_EXECUTOR not in executor_class:
        problems.append(f"the Trainer step does not run {VERTEX_TRAINER_EXECUTOR}, whose wait "
                        "ends on every final job state (TFX's own polls an EXPIRED job forever)")
    if tpu.env and not re.search(rf"^RUN .*\bcp\b.*libtpu\.so\S*\s+{re.escape(LIBTPU_PATH)}\b",
                                 ctx.files.dockerfile_tpu.replace("\\\n", " "), re.M):
        problems.append(f"Dockerfile.tpu does not copy libtpu.so to {LIBTPU_PATH}, where the "
                        "PJRT runtime loads it")
    return problems


def _args(ctx: Context, task: str) -> list[str]:
    return ctx.container(task).get("args", []) if task in ctx.tasks else []


def check_dataflow(ctx: Context) -> list[str]:
    """Beam steps on Dataflow: Runner v2 with the pipeline image as SDK container, a disk for
    it, the subnetwork, the image's SDK-environment setting and a Beam boot that matches."""
    if ctx.cloud.beam_runner != "dataflow":
        return []
    problems = []
    for task in BEAM_TASKS:
        if task not in ctx.tasks:
            continue
        args = _args(ctx, task)
        flags = dict(a.split("=", 1) if "=" in a else (a, "") for a in args if a.startswith("--"))
        wanted = {"--runner": "DataflowRunner", "--sdk_container_image": ctx.cloud.pipeline_image,
                  "--experiments": "use_runner_v2", "--sdk_location": "container",
                  "--region": ctx.cloud.region}
        problems += [f"{task}: {flag}={flags.get(flag)!r}, expected {value!r}"
                     for flag, value in wanted.items() if flags.get(flag) != value]
        disk = flags.get("--disk_size_gb", "")
        if not disk.isdigit() or int(disk) < settings.MIN_DATAFLOW_DISK_GB:
            problems.append(f"{task}: --disk_size_gb={disk or None!r}, expected at least "
                            f"{settings.MIN_DATAFLOW_DISK_GB} for the >10 GB image")
        if (ctx.cloud.network or not ctx.cloud.dataflow_public_ips) and not flags.get(
                "--subnetwork"):
            problems.append(f"{task}: no --subnetwork, which workers on a custom network or "
                            "without public IPs need")
        if not ctx.cloud.dataflow_public_ips and "--no_use_public_ips" not in flags:
            problems.append(f"{task}: dataflow_public_ips is false but --no_use_public_ips "
                            "is missing")
    if not re.search(rf"^ENV .*\b{SDK_ENV_LINE}\b", ctx.files.dockerfile, re.M):
        problems.append(f"Dockerfile does not set {SDK_ENV_LINE}: Beam's boot would build a new "
                        "venv on every worker, without the project's packages")
    return problems


def check_image_versions(ctx: Context) -> list[str]:
    """The pipeline image installs the lock's Beam, kfp and aiplatform over the TFX image's,
    with the Beam boot of that Beam version."""
    lock = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+)$", ctx.files.lock, re.M))
    pins = dict(re.findall(r"^([a-z0-9_.-]+)(?:\[[a-z,]+\])?==(\S+)$",
                           ctx.files.image_requirements, re.M))
    problems = [f"docker/requirements-pipeline.txt: {name} is "
                f"{pins.get(name)!r}, the lock's {lock.get(name)!r}"
                for name in IMAGE_PINNED if pins.get(name) != lock.get(name)]
    boot = BEAM_SDK_IMAGE_RE.search(ctx.files.dockerfile)
    if not boot or boot.group(1) != lock.get("apache-beam"):
        problems.append("Dockerfile: the Beam boot (/opt/apache/beam) must come from "
                        f"apache/beam_python3.10_sdk:{lock.get('apache-beam')}, the installed "
                        f"Beam; found {boot.group(1) if boot else 'none'}")
    return problems


def check_cache_keys(ctx: Context) -> list[str]:
    """The compiled spec carries the current content hash of the schema and the code hash of
    every step that runs project code (pipeline/cache_keys.py), so an edit is never served
    from cache."""
    from pipeline import cache_keys
    from pipeline.cloud import kubeflow_v2_runner

    problems = []
    for component in kubeflow_v2_runner.create_pipeline(ctx.cloud, ctx.target).components:
        if component.id not in ctx.tasks:
            continue
        compiled = {key: ctx.parameter(component.id, key)
                    for key in (names.CODE_VERSION, names.CUSTOM_CONFIG, names.SCHEMA_HASH)}
        pairs = [(names.CODE_VERSION, cache_keys.recorded_code_version(compiled),
                  cache_keys.step_code_version(component) or None)]
        if names.SCHEMA_HASH in component.exec_properties:
            pairs.append((names.SCHEMA_HASH, compiled[names.SCHEMA_HASH],
                          component.exec_properties[names.SCHEMA_HASH]))
        problems += [f"{component.id}.{key} is {found!r}, the current content's hash is "
                     f"{current!r}: recompile (make compile) after editing"
                     for key, found, current in pairs if found != current]
    return problems


# What TFX's Vertex prediction client takes out of the serving args before it calls
# aiplatform.Model.deploy (tfx/extensions/google_cloud_ai_platform/prediction_clients.py).
SERVING_ARGS_NOT_DEPLOYED = ("endpoint_name", "project", "regions", "labels")
ENDPOINT_PREFIX = "endpoint_"  # the endpoint settings, checked by check_endpoint
VERTEX_PUSHER_EXECUTOR = "tfx.extensions.google_cloud_ai_platform.pusher.executor.Executor"


def check_endpoint(ctx: Context) -> list[str]:
    """With an endpoint configured: the Pusher step runs TFX's Vertex Pusher in the pipeline's
    region, with a prebuilt TensorFlow CPU prediction image the installed Vertex AI SDK lists,
    and arguments `aiplatform.Model.deploy` accepts."""
    import inspect

    from google.cloud import aiplatform
    from google.cloud.aiplatform.constants import prediction

    executor = " ".join(_args(ctx, names.PUSHER))
    deployment = compiled_spec.endpoint_deployment(ctx.job) or {}
    if not ctx.cloud.endpoint_name:
        return ([f"the Pusher runs {VERTEX_PUSHER_EXECUTOR} but no endpoint_name is set"]
                if VERTEX_PUSHER_EXECUTOR in executor else [])
    problems = [message for name, message in ctx.cloud.problems()
                if name.startswith(ENDPOINT_PREFIX)]
    if VERTEX_PUSHER_EXECUTOR not in executor:
        return problems + [f"endpoint_name={ctx.cloud.endpoint_name!r}, but the Pusher step "
                           f"does not run {VERTEX_PUSHER_EXECUTOR}"]
    if deployment.get("region") != ctx.cloud.region:
        problems.append(f"Pusher region is {deployment.get('region')!r}, the pipeline's is "
                        f"{ctx.cloud.region!r}")
    image = deployment.get("serving_image") or ""
    match = settings.PREBUILT_IMAGE_RE.match(image)
    if image not in prediction.TF_CONTAINER_URIS or not match or match["accelerator"] != "cpu":
        problems.append(f"Pusher serving image {image!r} is not one of the prebuilt TensorFlow "
                        "CPU prediction images google-cloud-aiplatform lists "
                        "(aiplatform.constants.prediction.TF_CONTAINER_URIS)")
    elif match["geo"] != settings.multi_region(ctx.cloud.region):
        problems.append(f"Pusher serving image {image!r} is pulled from another multi-region "
                        f"than the endpoint's region {ctx.cloud.region!r}")
    args = dict(deployment.get("serving_args") or {})
    if args.get("endpoint_name") != ctx.cloud.endpoint_name or args.get(
            "project") != ctx.cloud.project:
        problems.append(f"Pusher serving args name endpoint {args.get('endpoint_name')!r} in "
                        f"project {args.get('project')!r}, expected "
                        f"{ctx.cloud.endpoint_name!r} in {ctx.cloud.project!r}")
    deploy = {k: v for k, v in args.items() if k not in SERVING_ARGS_NOT_DEPLOYED}
    try:
        inspect.signature(aiplatform.Model.deploy).bind(None, endpoint=None, **deploy)
    except TypeError as e:
        problems.append(f"Pusher serving args {sorted(deploy)}: aiplatform.Model.deploy "
                        f"refuses them ({e})")
    return problems


def check_spans(ctx: Context) -> list[str]:
    """The spec's spans fit the backend: CsvExampleGen's compiled pattern has the spec's span
    layout (a local data dir, as kfp-local runs, also holds it), and CRON, when set, is in the
    backend's form (pipeline/cloud/schedule.py)."""
    from pipeline.cloud import schedule
    from pipeline.spans import folders as spans

    config = ctx.cloud.pipeline_config()
    spec = config.spec
    problems = []
    if ctx.cloud.data_source == "csv" and spec.span_layout:
        pattern = json.dumps(ctx.parameter(names.CSV_EXAMPLE_GEN, "input_config") or "")
        if spans.FOLDER_PATTERN[spec.span_layout] not in pattern:
            problems.append(f"CsvExampleGen reads {pattern}, not the spec's "
                            f"{spec.span_layout} span folders")
        found = spans.find(ctx.cloud.data_uri)  # a local folder; a gs:// one is not listed
        if found is None and os.path.isdir(ctx.cloud.data_uri):
            problems.append(f"data_uri={ctx.cloud.data_uri!r} has no span folders, but the "
                            f"spec says [spans] layout = {spec.span_layout!r}")
    cron = os.environ.get("CRON", "")
    if cron:
        try:
            schedule.check_cron(cron, ctx.target)
        except ConfigError as e:
            problems.append(str(e))
    return problems


CHECKS: tuple[tuple[str, Callable[[Context], list[str]]], ...] = (
    ("settings", check_settings),
    ("service account", check_service_account),
    ("images", check_images),
    ("executors", check_executors),
    ("tpu", check_tpu),
    ("dataflow", check_dataflow),
    ("image versions", check_image_versions),
    ("cache keys", check_cache_keys),
    ("endpoint", check_endpoint),
    ("spans", check_spans),
)


def run_checks(ctx: Context) -> dict[str, list[str]]:
    """Check name → its problems (empty when it passes)."""
    return {name: check(ctx) for name, check in CHECKS}


def compiled_job(cloud: settings.CloudConfig, target: str) -> dict:
    """The pipeline compiled for `target` into a temporary folder, parsed."""
    from pipeline.cloud import kubeflow_v2_runner

    with tempfile.TemporaryDirectory() as tmp:
        path = kubeflow_v2_runner.compile_pipeline(cloud, tmp, target)
        with open(path, encoding="utf-8") as f:
            return json.load(f)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Check a cloud run before submitting it.")
    parser.add_argument("--target", choices=settings.TARGETS, default="vertex")
    parser.add_argument("--config", default=os.environ.get("CLOUD_CONFIG"),
                        help="cloud settings (TOML); see pipeline/cloud/cloud.example.toml")
    args = parser.parse_args(argv)
    try:
        cloud = settings.read(args.config)
    except ConfigError as e:
        print(f"FAIL settings: {e}")
        return 2
    with console.session(os.environ.get("OUTPUT_DIR") or DEFAULT_OUTPUT_DIR, "preflight"):
        return _check(cloud, args.target)


def _check(cloud: settings.CloudConfig, target: str) -> int:
    try:
        job = compiled_job(cloud.validate(), target)
    except ConfigError as e:
        # The settings are wrong in ways the checks below name one by one; compile with what
        # can be compiled is impossible, so list those and stop.
        for _, message in cloud.problems() or [("", str(e))]:
            print(f"FAIL settings: {message}")
        return 1
    results = run_checks(Context(cloud, target, job, ProjectFiles.read()))
    for name, problems in results.items():
        if problems:
            for problem in problems:
                print(f"FAIL {name}: {problem}")
        else:
            print(f"ok   {name}")
    failed = sum(bool(p) for p in results.values())
    print(f"{target}: {len(results) - failed} of {len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
