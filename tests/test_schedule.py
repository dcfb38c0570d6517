"""Schedules (pipeline/cloud/schedule.py): the cron rules of each backend, a Vertex AI
PipelineJobSchedule built with the aiplatform SDK and sent nowhere (Google Cloud cannot be
reached from here: the dry run is the boundary), and a KFP recurring run sent to a local
stand-in of the KFP v2beta1 API."""

import http.server
import json
import threading

import pytest
from test_kubeflow import NODES, _KfpApi

from pipeline.cloud import kubeflow_v2_runner, schedule, settings
from pipeline.errors import ConfigError


@pytest.mark.parametrize("cron, target, expected", [
    ("0 3 * * *", "vertex", "0 3 * * *"),
    ("0 3 * * *", "kfp", "0 0 3 * * *"),  # robfig/cron: seconds first
    ("TZ=Europe/Paris 30 2 * * MON-FRI", "vertex", "TZ=Europe/Paris 30 2 * * MON-FRI"),
    ("*/15 0-6,22 1 JAN,jul 0", "kfp", "0 */15 0-6,22 1 JAN,jul 0"),
])
def test_a_cron_expression_is_written_in_the_backends_form(cron, target, expected):
    assert schedule.check_cron(cron, target) == expected


@pytest.mark.parametrize("cron, target, message", [
    ("0 3 * *", "vertex", "expected five fields"),
    ("0 0 3 * * *", "vertex", "expected five fields"),
    ("61 3 * * *", "vertex", r"the minute field '61' is not \*, a number in 0..59"),
    ("0 3 * * 8", "kfp", "the day of week field '8'"),
    ("0 3 5-1 * *", "vertex", "the day of month field '5-1'"),
    ("0 3 * * */0", "vertex", "the day of week field"),
    ("TZ=Mars/Olympus 0 3 * * *", "vertex", "'Mars/Olympus' is no IANA time zone"),
    ("TZ=UTC 0 3 * * *", "kfp", "Kubeflow Pipelines takes no time zone prefix"),
])
def test_a_bad_cron_expression_names_the_field(cron, target, message):
    with pytest.raises(ConfigError, match=message):
        schedule.check_cron(cron, target)


def test_vertex_schedule_dry_run_builds_the_sdks_schedule(cloud_env, tmp_path, capsys,
                                                          no_network):
    from google.cloud.aiplatform.compat.types import schedule as gca_schedule

    cloud_env.setenv("SERVICE_ACCOUNT", "pipelines@my-ml-project.iam.gserviceaccount.com")
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path))
    capsys.readouterr()
    assert schedule.main(["create", "--target", "vertex", "--cron", "0 3 * * *", "--dry-run",
                          "--pipeline-file", path]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["parent"] == "projects/my-ml-project/locations/us-central1"
    body = report["schedule"]
    # The request reads back as the API's own Schedule message.
    parsed = gca_schedule.Schedule.from_json(json.dumps(body))
    assert parsed.cron == "0 3 * * *" and parsed.max_concurrent_run_count == 1
    assert parsed.display_name == "taxi-tpu-schedule"
    job = parsed.create_pipeline_job_request.pipeline_job
    assert parsed.create_pipeline_job_request.parent == report["parent"]
    assert job.service_account == "pipelines@my-ml-project.iam.gserviceaccount.com"
    assert set(body["createPipelineJobRequest"]["pipelineJob"]["pipelineSpec"]["root"]["dag"][
        "tasks"]) == NODES
    assert schedule.main(["create", "--target", "vertex", "--cron", "0 3 * *", "--dry-run",
                          "--pipeline-file", path]) == 2


def test_kfp_schedule_is_a_recurring_run_sent_to_the_endpoint(cloud_env, tmp_path, capsys):
    path = kubeflow_v2_runner.compile_pipeline(settings.load(), str(tmp_path), "kfp")
    _KfpApi.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KfpApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"http://127.0.0.1:{server.server_address[1]}"
        code = schedule.main(["create", "--target", "kfp", "--cron", "0 3 * * *", "--host",
                              host, "--pipeline-file", path, "--experiment", "taxi"])
    finally:
        server.shutdown()
    assert code == 0, capsys.readouterr()
    posts = {p: body for method, p, body in _KfpApi.requests if method == "POST"}
    body = posts["/apis/v2beta1/recurringruns"]
    assert body["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * *"
    assert body["mode"] == "ENABLE" and int(body["max_concurrency"]) == 1
    assert body["no_catchup"] is True and body["experiment_id"] == "exp-1"
    assert body["display_name"] == "taxi-tpu-schedule"
    assert set(body["pipeline_spec"]["root"]["dag"]["tasks"]) == set(
        json.load(open(path))["pipelineSpec"]["root"]["dag"]["tasks"])


class _RecurringRuns(_KfpApi):
    """The KFP stand-in, also answering the list and delete calls of recurring runs."""

    def do_GET(self):  # noqa: N802
        if "/recurringruns" not in self.path:
            return super().do_GET()
        self.requests.append(("GET", self.path, {}))
        self._reply({"recurringRuns": [  # the JSON name KFP's API writes
            {"recurring_run_id": "rr-1", "display_name": "taxi-tpu-schedule",
             "trigger": {"cron_schedule": {"cron": "0 0 3 * * *"}}, "status": "ENABLED"},
            {"recurring_run_id": "rr-2", "display_name": "another-pipeline-schedule",
             "trigger": {"cron_schedule": {"cron": "0 0 4 * * *"}}, "status": "ENABLED"}]})

    def do_DELETE(self):  # noqa: N802
        self.requests.append(("DELETE", self.path, {}))
        self._reply({})


def test_kfp_schedules_are_listed_for_this_pipeline_and_removed_by_id(cloud_env, capsys):
    _RecurringRuns.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecurringRuns)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"http://127.0.0.1:{server.server_address[1]}"
        capsys.readouterr()
        assert schedule.main(["list", "--target", "kfp", "--host", host]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert schedule.main(["remove", "--target", "kfp", "--host", host, "--id", "rr-1"]) == 0
        assert schedule.main(["remove", "--target", "kfp", "--host", host]) == 2
    finally:
        server.shutdown()
    assert [(s["id"], s["cron"]) for s in listed] == [("rr-1", "0 0 3 * * *")]
    assert ("DELETE", "/apis/v2beta1/recurringruns/rr-1", {}) in _RecurringRuns.requests
