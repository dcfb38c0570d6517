"""`make preflight`: each failure a first cloud run would meet, reintroduced, and caught.

The checks read the spec TFX really compiles for each target, the Dockerfiles and the lock;
each test below breaks one thing the way an edit or a setting would, and asserts the check
that names it fails (Google Cloud and a Kubeflow cluster are not reachable here: the rules are
the backends' own, cited in pipeline/cloud/preflight.py).
"""

import copy
import dataclasses
import json
import os
import re

import cloud_settings
import pytest

from pipeline.cloud import compiled_spec, preflight, settings
from pipeline.pipeline_config import REPO_ROOT

# Every check has something to check: a v5e TPU, Dataflow on a custom network, warm start.
CLOUD = {
    **cloud_settings.CLOUD,
    "TPU_TYPE": "v5e-4",
    "TPU_TRAINER_IMAGE": cloud_settings.TPU_IMAGE,
    "BEAM_RUNNER": "dataflow",
    "WARM_START": "true",
    "VPC_NETWORK": "projects/123456/global/networks/ml",
    "DATAFLOW_SUBNETWORK": "regions/us-central1/subnetworks/ml-central",
    "KFP_SERVICE_ACCOUNT": "pipeline-runner",
    "SERVICE_ACCOUNT": "pipelines@my-ml-project.iam.gserviceaccount.com",
}


@pytest.fixture(scope="module")
def cloud() -> settings.CloudConfig:
    return settings.load(env=CLOUD)


@pytest.fixture(scope="module")
def jobs(cloud) -> dict[str, dict]:
    return {target: preflight.compiled_job(cloud, target) for target in settings.TARGETS}


def _context(base, jobs, target="kfp", **changes) -> preflight.Context:
    values = {"cloud": base, "target": target, "job": copy.deepcopy(jobs[target]),
              "files": preflight.ProjectFiles.read(), **changes}
    return preflight.Context(**values)


def _failures(ctx: preflight.Context, check: str, also: set[str] = frozenset()) -> list[str]:
    """The problems `check` finds, asserting no check other than it (and `also`) fails."""
    results = preflight.run_checks(ctx)
    assert {name for name, problems in results.items() if problems} == {check, *also}, results
    return results[check]


@pytest.mark.parametrize("target", settings.TARGETS)
def test_a_correct_configuration_passes_every_check(cloud, jobs, target):
    assert preflight.run_checks(_context(cloud, jobs, target)) == {
        name: [] for name, _ in preflight.CHECKS}


def test_resolver_executors_fail_the_kfp_target(cloud, jobs):
    # The Vertex spec keeps TFX's resolvers: what `make compile` wrote before the KFP path
    # had its own baseline step.
    failures = _failures(_context(cloud, jobs, "kfp", job=copy.deepcopy(jobs["vertex"])),
                         "executors")
    assert any("baseline_resolver-model-resolver_executor is a resolver executor, which kfp "
               "does not run" in f for f in failures), failures


def test_custom_job_executors_fail_the_kfp_target_only(cloud, jobs):
    job = copy.deepcopy(jobs["kfp"])
    job["pipelineSpec"]["deploymentSpec"]["executors"]["Trainer_executor"] = {
        "customJob": {"customJob": {}}}
    # (The Trainer step then no longer runs the waiting executor either.)
    [failure] = _failures(_context(cloud, jobs, "kfp", job=job), "executors", also={"tpu"})
    assert failure.startswith("Trainer_executor is a customJob executor")
    vertex = copy.deepcopy(jobs["vertex"])
    vertex["pipelineSpec"]["deploymentSpec"]["executors"]["Trainer_executor"] = {
        "customJob": {"customJob": {}}}
    assert not preflight.check_executors(_context(cloud, jobs, "vertex", job=vertex))


def test_an_email_as_the_kfp_service_account_fails(cloud, jobs):
    bad = dataclasses.replace(cloud, kfp_service_account="pipelines@my-ml-project.iam."
                              "gserviceaccount.com")
    failures = _failures(_context(cloud, jobs, "kfp", cloud=bad), "service account")
    assert any("Kubernetes service account name" in f for f in failures)


def _set_pool(job: dict, edit) -> dict:
    job = copy.deepcopy(job)
    params = job["pipelineSpec"]["root"]["dag"]["tasks"]["Trainer"]["inputs"]["parameters"]
    runtime = params["custom_config"]["runtimeValue"]
    config = json.loads(compiled_spec.parameter(job, "Trainer", "custom_config"))
    edit(config["ai_platform_training_args"]["job_spec"]["worker_pool_specs"][0])
    if "constant" in runtime:  # pipeline spec 2.1
        runtime["constant"] = json.dumps(config)
    else:
        runtime["constantValue"]["stringValue"] = json.dumps(config)
    return job


def test_v5e_without_the_pjrt_environment_fails(cloud, jobs):
    job = _set_pool(jobs["kfp"], lambda pool: pool["container_spec"].pop("env"))
    failures = _failures(_context(cloud, jobs, job=job), "tpu")
    assert ("v5e-4 (pjrt runtime): container_spec.env NEXT_PLUGGABLE_DEVICE_USE_C_API is None, "
            "expected 'true'") in failures


def test_stream_executor_tpus_must_not_get_pjrt_and_machines_must_match(cloud, jobs):
    v3 = dataclasses.replace(cloud, tpu="v3-8")
    failures = _failures(_context(cloud, jobs, cloud=v3), "tpu")
    assert "v3-8: machine_spec.machine_type is 'ct5lp-hightpu-4t', expected 'cloud-tpu'" in failures
    assert any("v3-8 (stream_executor runtime): container_spec.env "
               "TF_PLUGGABLE_DEVICE_LIBRARY_PATH is '/lib/libtpu.so', expected None" in f
               for f in failures)


def test_tfxs_own_vertex_executor_fails(cloud, jobs):
    """TFX's Vertex trainer executor polls an EXPIRED job forever
    (pipeline/components/vertex_trainer.py)."""
    job = copy.deepcopy(jobs["kfp"])
    args = job["pipelineSpec"]["deploymentSpec"]["executors"]["Trainer_executor"]["container"][
        "args"]
    args[args.index("pipeline.components.vertex_trainer.VertexExecutor")] = (
        "tfx.extensions.google_cloud_ai_platform.trainer.executor.GenericExecutor")
    [failure] = _failures(_context(cloud, jobs, job=job), "tpu")
    assert "does not run pipeline.components.vertex_trainer.VertexExecutor" in failure


def _edited_files(**edits: tuple[str, str]) -> preflight.ProjectFiles:
    """The project's files with `old` replaced by `new` in each named one (`old` must be there,
    or the test would check an unchanged file)."""
    files = preflight.ProjectFiles.read()
    changes = {}
    for field, (old, new) in edits.items():
        text = getattr(files, field)
        assert old in text, (field, old)
        changes[field] = text.replace(old, new)
    return dataclasses.replace(files, **changes)


def test_tpu_image_without_libtpu_in_lib_fails(cloud, jobs):
    edited = _edited_files(dockerfile_tpu=(" /lib/libtpu.so", " /usr/lib/libtpu.so"))
    [failure] = _failures(_context(cloud, jobs, files=edited), "tpu")
    assert "Dockerfile.tpu does not copy libtpu.so to /lib/libtpu.so" in failure


def _edit_beam_args(job: dict, edit) -> dict:
    job = copy.deepcopy(job)
    for executor in job["pipelineSpec"]["deploymentSpec"]["executors"].values():
        container = executor.get("container", {})
        if "--runner=DataflowRunner" in container.get("args", []):
            container["args"] = edit(container["args"])
    return job


@pytest.mark.parametrize("edit,message", [
    (lambda args: [a for a in args if not a.startswith("--disk_size_gb")],
     "--disk_size_gb=None, expected at least 50"),
    (lambda args: [a if not a.startswith("--disk_size_gb") else "--disk_size_gb=25"
                   for a in args], "--disk_size_gb='25', expected at least 50"),
    (lambda args: [a for a in args if a != "--experiments=use_runner_v2"],
     "--experiments=None, expected 'use_runner_v2'"),
    (lambda args: [a for a in args if not a.startswith("--subnetwork")],
     "no --subnetwork"),
    (lambda args: [a if not a.startswith("--sdk_container_image") else
                   "--sdk_container_image=apache/beam_python3.10_sdk:2.61.0" for a in args],
     "--sdk_container_image='apache/beam_python3.10_sdk:2.61.0', expected"),
])
def test_dataflow_flags_workers_need(cloud, jobs, edit, message):
    failures = _failures(_context(cloud, jobs, job=_edit_beam_args(jobs["kfp"], edit)),
                         "dataflow")
    assert any(message in f for f in failures), failures


def test_image_without_the_sdk_environment_setting_fails_dataflow(cloud, jobs):
    edited = _edited_files(dockerfile=("ENV RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1", ""))
    [failure] = _failures(_context(cloud, jobs, files=edited), "dataflow")
    assert "does not set RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1" in failure


def test_image_versions_other_than_the_locks_fail(cloud, jobs):
    edited = _edited_files(
        image_requirements=("kfp==2.13.0", "kfp==2.5.0"),
        dockerfile=("beam_python3.10_sdk:2.61.0", "beam_python3.10_sdk:2.59.0"))
    failures = _failures(_context(cloud, jobs, files=edited), "image versions")
    assert "docker/requirements-pipeline.txt: kfp is '2.5.0', the lock's '2.13.0'" in failures
    assert any("apache/beam_python3.10_sdk:2.61.0, the installed Beam; found 2.59.0" in f
               for f in failures)


def test_latest_images_fail(cloud, jobs):
    latest = "us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:latest"
    job = copy.deepcopy(jobs["vertex"])
    for executor in job["pipelineSpec"]["deploymentSpec"]["executors"].values():
        if "container" in executor:
            executor["container"]["image"] = latest
    bad = dataclasses.replace(cloud, pipeline_image=latest)
    # The Dataflow workers' SDK container is the same image.
    failures = _failures(_context(cloud, jobs, "vertex", cloud=bad, job=job), "images",
                         also={"dataflow"})
    assert any(f.startswith("pipeline_image='us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:"
                            "latest'") and "version tag" in f for f in failures)
    assert any(f.startswith("Trainer_executor runs image") for f in failures)


def _set_parameter(job: dict, task: str, name: str, value: str | None) -> dict:
    job = copy.deepcopy(job)
    params = job["pipelineSpec"]["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    if value is None:
        params.pop(name)
    else:
        params[name] = {"runtimeValue": {"constantValue": {"stringValue": value}}}
    return job


@pytest.mark.parametrize("task,name,value,message", [
    ("ImportSchemaGen", "schema_hash", "0" * 16,
     "ImportSchemaGen.schema_hash is '0000000000000000', the current content's hash"),
    ("AnomalyGate", "code_version", None, "AnomalyGate.code_version is None"),
    ("Evaluator", "code_version", "old", "Evaluator.code_version is 'old'"),
    ("CsvExampleGen", "code_version", "old", "CsvExampleGen.code_version is 'old'"),
    ("baseline_resolver", "code_version", "old", "baseline_resolver.code_version is 'old'"),
])
def test_stale_or_missing_content_hashes_fail(cloud, jobs, task, name, value, message):
    job = _set_parameter(jobs["kfp"], task, name, value)
    [failure] = _failures(_context(cloud, jobs, job=job), "cache keys")
    assert failure.startswith(message)


def test_bad_region_and_bucket_forms_fail(cloud, jobs):
    bad = dataclasses.replace(cloud, region="US Central", bucket="my-ml-bucket")
    # The Dataflow region no longer matches either; and a bucket that is no gs:// path makes a
    # DAG (a staging Pusher) other than the one compiled, so its code hashes differ too.
    failures = _failures(_context(cloud, jobs, cloud=bad), "settings",
                         also={"dataflow", "cache keys"})
    assert any(f.startswith("region='US Central' (GCP_REGION") for f in failures), failures
    assert any(f.startswith("bucket='my-ml-bucket' (GCS_BUCKET") for f in failures), failures


def test_main_prints_one_line_per_check(monkeypatch, capsys, tmp_path):
    for var, value in CLOUD.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("CLOUD_CONFIG", raising=False)
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path))
    assert preflight.main(["--target", "kfp"]) == 0
    log, *lines = capsys.readouterr().out.strip().splitlines()
    [log_file] = (tmp_path / "logs").iterdir()
    assert log.startswith(f"Log: {log_file}")
    assert lines == [f"ok   {name}" for name, _ in preflight.CHECKS] + [
        f"kfp: {len(preflight.CHECKS)} of {len(preflight.CHECKS)} checks passed"]

    monkeypatch.setenv("PIPELINE_IMAGE", "us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:latest")
    assert preflight.main(["--target", "kfp"]) == 1
    out = capsys.readouterr().out
    assert "FAIL settings: pipeline_image='us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:latest'" \
        in out



def test_make_submit_runs_preflight_first():
    """`make submit` depends on `preflight` (before `compile`), with the same target and config."""
    with open(os.path.join(REPO_ROOT, "Makefile"), encoding="utf-8") as f:
        makefile = f.read()
    [prerequisites] = re.findall(r"^submit: (.*)$", makefile, re.M)
    assert prerequisites.split()[:2] == ["preflight", "compile"]
    [recipe] = re.findall(r"^preflight: .*\n\t(.*)$", makefile, re.M)
    assert "-m pipeline.cloud.preflight $(CLOUD_ARGS)" in recipe
    assert re.search(r"^CLOUD_ARGS = --target \$\(TARGET\) ", makefile, re.M)


def test_a_bad_cron_fails_the_spans_check(cloud, jobs, monkeypatch):
    """Each backend takes its own cron form (pipeline/cloud/schedule.py)."""
    monkeypatch.setenv("CRON", "0 3 * * * *")
    for target in settings.TARGETS:
        failures = preflight.check_spans(_context(cloud, jobs, target))
        assert any("expected five fields" in f for f in failures), failures
    monkeypatch.setenv("CRON", "TZ=UTC 0 3 * * *")
    assert _failures(_context(cloud, jobs, "kfp"), "spans") == [
        "CRON='TZ=UTC 0 3 * * *': Kubeflow Pipelines takes no time zone prefix; give the "
        "time in the cluster's zone"]
    assert preflight.check_spans(_context(cloud, jobs, "vertex")) == []
