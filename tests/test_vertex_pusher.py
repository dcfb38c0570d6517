"""Deployment to a Vertex AI endpoint: the settings, the compiled Pusher, `make preflight`, the
dry run, and TFX's own Vertex Pusher executor run on a real model folder.

Google Cloud cannot be reached from here: in the executor test the Vertex AI SDK's Model,
Endpoint and init are replaced by autospecced mocks (the boundary), and the arguments TFX hands
`Model.deploy` are bound to the real SDK's signature.
"""

import dataclasses
import inspect
import json
import os
import re
from unittest import mock

import cloud_settings
import pytest
import test_kubeflow
import test_preflight
from google.cloud import aiplatform
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts
from tfx.utils import import_utils

from pipeline import names
from pipeline.cloud import compiled_spec, kubeflow_v2_runner, preflight, settings, submit
from pipeline.pipeline_config import ConfigError

ENDPOINT = {**cloud_settings.CLOUD, "ENDPOINT_NAME": "taxi-tips", "ENDPOINT_MACHINE_TYPE":
            "n1-standard-4", "ENDPOINT_MIN_REPLICAS": "1", "ENDPOINT_MAX_REPLICAS": "3",
            "ENDPOINT_TRAFFIC_PERCENTAGE": "20"}
SERVING_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


@pytest.fixture(scope="module")
def cloud() -> settings.CloudConfig:
    return settings.load(env=ENDPOINT)


@pytest.fixture(scope="module")
def job(cloud) -> dict:
    return preflight.compiled_job(cloud, "vertex")


def _endpoint_failures(cloud, job) -> list[str]:
    ctx = preflight.Context(cloud, "vertex", job, preflight.ProjectFiles.read())
    results = preflight.run_checks(ctx)
    assert {n for n, p in results.items() if p} <= {"endpoint", "settings"}, results
    return results["endpoint"]


def test_compiled_pusher_deploys_with_the_configured_endpoint(job):
    ctx = preflight.Context(settings.load(env=ENDPOINT), "vertex", job,
                            preflight.ProjectFiles.read())
    assert preflight.VERTEX_PUSHER_EXECUTOR in " ".join(preflight._args(ctx, names.PUSHER))
    assert compiled_spec.endpoint_deployment(job) == {
        "region": "us-central1",
        "serving_image": SERVING_IMAGE,
        "serving_args": {"project": "my-ml-project", "endpoint_name": "taxi-tips",
                         "machine_type": "n1-standard-4", "min_replica_count": 1,
                         "max_replica_count": 3, "traffic_percentage": 20}}
    # The Pusher still takes the Trainer's model and the Evaluator's blessing.
    assert set(compiled_spec.tasks(job)[names.PUSHER]["dependentTasks"]) == {
        names.TRAINER, names.EVALUATOR}


def test_without_an_endpoint_the_pusher_writes_the_serving_dir(cloud_env, tmp_path):
    job, _ = test_kubeflow._compile(tmp_path)
    assert compiled_spec.endpoint_deployment(job) is None
    config = json.loads(compiled_spec.parameter(job, names.PUSHER, "push_destination"))
    assert config["filesystem"]["base_directory"] == "gs://my-ml-bucket/taxi-tpu/serving_model/taxi-tpu"


def test_a_correct_endpoint_passes_preflight(cloud, job):
    assert _endpoint_failures(cloud, job) == []


def test_the_serving_image_follows_the_region():
    assert settings.load(env={**ENDPOINT, "GCP_REGION": "europe-west4"}).serving_image == \
        "europe-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    # The default image is one the installed Vertex AI SDK lists as a prebuilt TF image.
    from google.cloud.aiplatform.constants import prediction
    assert SERVING_IMAGE in prediction.TF_CONTAINER_URIS


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(serving_image="us-docker.pkg.dev/vertex-ai/prediction/tf2-gpu.2-15:latest"),
     "not one of the prebuilt TensorFlow CPU prediction images"),
    (lambda d: d.update(serving_image="europe-docker.pkg.dev/vertex-ai/prediction/"
                        "tf2-cpu.2-15:latest"), "another multi-region"),
    (lambda d: d.update(region="europe-west4"), "Pusher region is 'europe-west4'"),
    (lambda d: d["serving_args"].update(min_replicas=2), "aiplatform.Model.deploy refuses"),
    (lambda d: d["serving_args"].update(endpoint_name="other"), "name endpoint 'other'"),
])
def test_a_pusher_spec_vertex_would_refuse_fails_preflight(cloud, job, edit, message):
    from tfx.extensions.google_cloud_ai_platform import constants as vertex

    config = json.loads(compiled_spec.parameter(job, names.PUSHER, names.CUSTOM_CONFIG))
    deployment = {"region": config[vertex.VERTEX_REGION_KEY],
                  "serving_image": config[vertex.VERTEX_CONTAINER_IMAGE_URI_KEY],
                  "serving_args": config[vertex.SERVING_ARGS_KEY]}
    edit(deployment)
    config.update({vertex.VERTEX_REGION_KEY: deployment["region"],
                   vertex.VERTEX_CONTAINER_IMAGE_URI_KEY: deployment["serving_image"],
                   vertex.SERVING_ARGS_KEY: deployment["serving_args"]})
    edited = test_preflight._set_parameter(job, names.PUSHER, names.CUSTOM_CONFIG,
                                           json.dumps(config))
    failures = _endpoint_failures(cloud, edited)
    assert any(message in f for f in failures), failures


def test_a_filesystem_pusher_fails_preflight_when_an_endpoint_is_set(cloud, cloud_env, tmp_path):
    plain, _ = test_kubeflow._compile(tmp_path)
    failures = _endpoint_failures(cloud, plain)
    assert any("does not run tfx.extensions.google_cloud_ai_platform.pusher" in f
               for f in failures), failures


@pytest.mark.parametrize("env,message", [
    ({"ENDPOINT_NAME": "taxi tips!"}, "endpoint_name='taxi tips!' (ENDPOINT_NAME"),
    ({"ENDPOINT_MIN_REPLICAS": "3", "ENDPOINT_MAX_REPLICAS": "2"},
     "endpoint_max_replicas=2 (ENDPOINT_MAX_REPLICAS or `endpoint_max_replicas` in the cloud "
     "config): it is below endpoint_min_replicas=3"),
    ({"ENDPOINT_TRAFFIC_PERCENTAGE": "120"}, "endpoint_traffic_percentage=120"),
    ({"ENDPOINT_MACHINE_TYPE": "big"}, "endpoint_machine_type='big'"),
    ({"ENDPOINT_SERVING_IMAGE": "us-docker.pkg.dev/my-ml-project/serving/tf:2.16"},
     "only Vertex AI's prebuilt TensorFlow images"),
])
def test_bad_endpoint_settings_are_refused(env, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        settings.load(env={**ENDPOINT, **env})


def test_an_endpoint_needs_the_vertex_target(cloud, tmp_path):
    with pytest.raises(ConfigError, match="endpoint deployment needs target 'vertex'"):
        kubeflow_v2_runner.compile_pipeline(cloud, str(tmp_path), "kfp")


def test_dry_run_prints_the_deployment(cloud_env, tmp_path, capsys, no_network):
    for var, value in ENDPOINT.items():
        cloud_env.setenv(var, value)
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path))
    capsys.readouterr()
    assert submit.main(["--target", "vertex", "--dry-run", "--pipeline-file", path]) == 0
    request = json.loads(capsys.readouterr().out)
    assert request["endpoint_deployment"]["serving_image"] == SERVING_IMAGE
    assert request["endpoint_deployment"]["serving_args"]["traffic_percentage"] == 20


def _artifacts(tmp_path, blessed: bool) -> tuple[dict, dict]:
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    serving = os.path.join(model.uri, "Format-Serving")
    fileio.makedirs(os.path.join(serving, "variables"))
    with open(os.path.join(serving, "saved_model.pb"), "wb") as f:
        f.write(b"saved model")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / "blessing")
    blessing.set_int_custom_property(names.BLESSED, int(blessed))
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")
    return ({"model": [model], "model_blessing": [blessing]}, {names.PUSHED_MODEL: [pushed]})


@pytest.mark.parametrize("blessed", [True, False])
def test_tfxs_vertex_pusher_uploads_and_deploys_a_blessed_model(job, tmp_path, blessed):
    executor_path = next(a for a in preflight._args(
        preflight.Context(settings.load(env=ENDPOINT), "vertex", job,
                          preflight.ProjectFiles.read()), names.PUSHER)
        if a.endswith(".Executor"))
    executor_class = import_utils.import_class_by_path(executor_path)
    exec_properties = {names.CUSTOM_CONFIG: compiled_spec.parameter(
        job, names.PUSHER, names.CUSTOM_CONFIG), "push_destination": None}
    inputs, outputs = _artifacts(tmp_path, blessed)
    endpoint = mock.create_autospec(aiplatform.Endpoint, instance=True)
    endpoint.resource_name = "projects/1/locations/us-central1/endpoints/7"
    with mock.patch.object(aiplatform, "init", autospec=True) as init, \
            mock.patch.object(aiplatform, "Endpoint", autospec=True) as endpoints, \
            mock.patch.object(aiplatform, "Model", autospec=True) as models:
        endpoints.list.return_value = [endpoint]
        uploaded = models.upload.return_value
        uploaded.resource_name = "projects/1/locations/us-central1/models/42"
        executor_class().Do(inputs, outputs, exec_properties)
    pushed = outputs[names.PUSHED_MODEL][0]
    if not blessed:
        models.upload.assert_not_called()
        assert pushed.get_int_custom_property(names.PUSHED) == 0
        return
    init.assert_called_once_with(project="my-ml-project", location="us-central1")
    upload = models.upload.call_args.kwargs
    assert upload["serving_container_image_uri"] == SERVING_IMAGE
    # The model folder was copied to the pushed artifact, and that copy is what is uploaded.
    assert upload["artifact_uri"] == pushed.uri
    assert os.path.isfile(os.path.join(pushed.uri, "saved_model.pb"))
    inspect.signature(aiplatform.Model.upload).bind(**upload)
    deploy = uploaded.deploy.call_args.kwargs
    assert deploy == {"endpoint": endpoint, "machine_type": "n1-standard-4",
                      "min_replica_count": 1, "max_replica_count": 3, "traffic_percentage": 20}
    inspect.signature(aiplatform.Model.deploy).bind(None, **deploy)
    assert pushed.get_int_custom_property(names.PUSHED) == 1
    assert pushed.get_string_custom_property(names.PUSHED_DESTINATION) == uploaded.resource_name


def test_settings_file_documents_every_endpoint_setting():
    with open(os.path.join(os.path.dirname(settings.__file__), "cloud.example.toml"),
              encoding="utf-8") as f:
        text = f.read()
    for field in dataclasses.fields(settings.CloudConfig):
        if field.name.startswith("endpoint_"):
            assert f"{field.name} =" in text, field.name
