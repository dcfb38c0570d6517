"""The Trainer step on Vertex AI submits a CustomJob and waits for it: it must end, with the
right outcome, in every final state the job can reach.

Vertex AI cannot be reached from here: the job service is a fake standing in for
google.cloud.aiplatform_v1's JobServiceClient (the injected seam), answering with real
CustomJob messages. Everything else (TFX's Vertex job client building the CustomJob, the
executor) is the real code.
"""

import json

import pytest
from google.cloud.aiplatform_v1.types import custom_job as custom_job_pb2
from google.cloud.aiplatform_v1.types.job_state import JobState
from google.rpc import status_pb2
from tfx.extensions.google_cloud_ai_platform import training_clients
from tfx.types import standard_artifacts

from pipeline.components import vertex_trainer

JOB_NAME = "projects/1/locations/us-central1/customJobs/42"


class FakeJobService:
    """Answers create_custom_job / get_custom_job like Vertex AI's JobService, walking
    through `states`, and fails the test instead of letting a wait run on."""

    def __init__(self, states: list[JobState], error: str = "") -> None:
        self.states = list(states)
        self.error = error
        self.created: list[tuple[str, dict]] = []
        self.polls = 0

    def create_custom_job(self, parent: str, custom_job: dict):
        self.created.append((parent, custom_job))
        return custom_job_pb2.CustomJob(name=JOB_NAME, state=JobState.JOB_STATE_QUEUED)

    def get_custom_job(self, name: str, retry=None):
        assert name == JOB_NAME
        self.polls += 1
        assert self.polls <= 20, "the step kept polling a job in a final state"
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        job = custom_job_pb2.CustomJob(name=JOB_NAME, state=state)
        if self.error and state != JobState.JOB_STATE_SUCCEEDED:
            job.error = status_pb2.Status(code=9, message=self.error)
        return job


def _executor(service: FakeJobService) -> vertex_trainer.VertexExecutor:
    class Client(training_clients.VertexJobClient):
        def create_client(self) -> None:
            self._client = service

    class Executor(vertex_trainer.VertexExecutor):
        poll_seconds = 0

        def job_client(self, region: str) -> training_clients.VertexJobClient:
            assert region == "us-central1"
            return Client(region)

    return Executor()


def _do(service: FakeJobService) -> None:
    examples = standard_artifacts.Examples()
    examples.uri = "gs://bucket/examples"
    model = standard_artifacts.Model()
    model.uri = "gs://bucket/model"
    config = {
        "ai_platform_enable_vertex": True,
        "ai_platform_vertex_region": "us-central1",
        "ai_platform_training_args": {"project": "my-ml-project", "job_spec": {
            "worker_pool_specs": [{"machine_spec": {"machine_type": "ct5lp-hightpu-4t"},
                                   "replica_count": 1,
                                   "container_spec": {"image_uri": "img:1.0",
                                                      "env": [{"name": "A", "value": "1"}]}}]}},
    }
    _executor(service).Do({"examples": [examples]}, {"model": [model]},
                          {"custom_config": json.dumps(config)})


RUNNING = [JobState.JOB_STATE_QUEUED, JobState.JOB_STATE_PENDING, JobState.JOB_STATE_RUNNING]


def test_a_succeeded_job_ends_the_step_and_ran_this_projects_executor():
    service = FakeJobService(RUNNING + [JobState.JOB_STATE_SUCCEEDED])
    _do(service)
    [(parent, job)] = service.created
    assert parent == "projects/my-ml-project/locations/us-central1"
    [pool] = job["job_spec"]["worker_pool_specs"]
    command = pool["container_spec"]["command"]
    assert command[command.index("--executor_class_path") + 1] == (
        "trainer_module.executor.Executor")
    assert pool["container_spec"]["env"] == [{"name": "A", "value": "1"}]
    assert service.polls == 4


@pytest.mark.parametrize("state,words", [
    (JobState.JOB_STATE_FAILED, "failed (JOB_STATE_FAILED)"),
    (JobState.JOB_STATE_CANCELLED, "was cancelled (JOB_STATE_CANCELLED)"),
    (JobState.JOB_STATE_EXPIRED, "expired before it could start"),
    (JobState.JOB_STATE_PARTIALLY_SUCCEEDED, "only partially succeeded"),
])
def test_every_other_final_state_fails_the_step_with_the_jobs_error(state, words):
    service = FakeJobService(RUNNING + [state], error="no TPU capacity in us-central1")
    with pytest.raises(vertex_trainer.VertexJobError) as error:
        _do(service)
    message = str(error.value)
    assert message.startswith(f"Vertex AI CustomJob {JOB_NAME} ")
    assert words in message and "no TPU capacity in us-central1" in message
    assert service.polls == 4


def test_final_states_are_the_apis_and_tfxs_own_loop_misses_some():
    """The wait knows every final state of the v1 API's JobState (the enum TFX's client reads);
    TFX 1.16's loop stops only on three, so it would poll an expired job forever."""
    final = {JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED,
             JobState.JOB_STATE_CANCELLED, JobState.JOB_STATE_EXPIRED,
             JobState.JOB_STATE_PARTIALLY_SUCCEEDED}
    assert set(vertex_trainer.TERMINAL_STATES) == final
    assert training_clients.JobState is JobState
    assert JobState.JOB_STATE_EXPIRED not in training_clients.VertexJobClient.JOB_STATES_COMPLETED


def test_polling_survives_a_dropped_connection_and_gives_up_after_retries():
    class Flaky(FakeJobService):
        def get_custom_job(self, name, retry=None):
            if self.polls in (1, 2):
                self.polls += 1
                raise ConnectionError("reset by peer")
            return super().get_custom_job(name, retry)

    service = Flaky(RUNNING + [JobState.JOB_STATE_SUCCEEDED])
    _do(service)

    class Down(FakeJobService):
        def get_custom_job(self, name, retry=None):
            if self.polls:
                self.polls += 1
                raise ConnectionError("unreachable")
            return super().get_custom_job(name, retry)

    with pytest.raises(ConnectionError):
        _do(Down(RUNNING))
