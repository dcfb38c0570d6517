"""The Trainer as a Vertex AI CustomJob (the TPU machine, the TPU trainer image).

Its step in the pipeline submits a CustomJob through TFX's Vertex job client and waits for it;
the job runs `trainer_module.executor.Executor`, so `run_fn` gets the raw eval examples and
checks its export there as it does locally. Kept apart from pipeline/components/trainer.py
because importing TFX's Vertex executor loads the Google Cloud AI Platform SDK, which local
runs never need.

The wait is this module's own. TFX 1.16's loop (tfx/extensions/google_cloud_ai_platform/
runner.py) polls until the state is SUCCEEDED, FAILED or CANCELLED, but the v1 API's JobState
(google.cloud.aiplatform_v1, the version that client uses) has more final states: EXPIRED (the
job never started before its scheduling timeout, e.g. no TPU capacity) and PARTIALLY_SUCCEEDED,
on which that loop polls forever (tensorflow/tfx#6630, #4419). Here every final state ends the
step: success returns, the others fail it with the job's name, state and error message.
"""

import time
from collections.abc import Callable
from typing import Any

from absl import logging
from google.cloud.aiplatform_v1.types.job_state import JobState
from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform import constants as vertex_constants
from tfx.extensions.google_cloud_ai_platform import training_clients
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_executor
from tfx.types import standard_component_specs
from tfx.utils import json_utils, name_utils

from pipeline import names
from pipeline.components.trainer import Trainer
from trainer_module import executor

POLL_SECONDS = 30
CONNECTION_RETRIES = 5
# Every state a CustomJob can end in, and how the step reports it (None: success).
TERMINAL_STATES: dict[JobState, str | None] = {
    JobState.JOB_STATE_SUCCEEDED: None,
    JobState.JOB_STATE_FAILED: "failed",
    JobState.JOB_STATE_CANCELLED: "was cancelled",
    JobState.JOB_STATE_EXPIRED: "expired before it could start (no capacity for its machines "
                                "within its scheduling timeout); retry later, or in another "
                                "region or TPU type",
    JobState.JOB_STATE_PARTIALLY_SUCCEEDED: "only partially succeeded",
}


class VertexJobError(RuntimeError):
    """The Trainer's CustomJob ended without succeeding."""


def wait_for_job(client: training_clients.VertexJobClient,
                 sleep: Callable[[float], None] = time.sleep,
                 poll_seconds: float = POLL_SECONDS) -> Any:
    """Polls the launched job until it reaches a terminal state; returns the succeeded job.

    Raises:
      VertexJobError: the job failed, was cancelled or expired.
      ConnectionError: polling failed CONNECTION_RETRIES times in a row.
    """
    job = client.get_job()
    failures = 0
    while job.state not in TERMINAL_STATES:
        sleep(poll_seconds)
        try:
            job = client.get_job()
            failures = 0
        except ConnectionError as e:
            failures += 1
            if failures > CONNECTION_RETRIES:
                raise
            logging.warning("Polling %s failed (%s); reconnecting", client.get_job_name(), e)
            client.create_client()
    outcome = TERMINAL_STATES[job.state]
    if outcome is not None:
        detail = job.error.message if job.error and job.error.message else "no error message"
        raise VertexJobError(f"Vertex AI CustomJob {job.name} {outcome} "
                             f"({JobState(job.state).name}): {detail}")
    logging.info("Vertex AI CustomJob %s succeeded", job.name)
    return job


class VertexExecutor(vertex_executor.GenericExecutor):
    """Submits the CustomJob that runs this project's Trainer executor, and waits for it."""

    def _GetExecutorClass(self) -> type:  # noqa: N802 (TFX's name)
        return executor.Executor

    poll_seconds: float = POLL_SECONDS

    def job_client(self, region: str) -> training_clients.VertexJobClient:
        """The Vertex job client (tests replace its job service: Google Cloud is not here)."""
        return training_clients.VertexJobClient(region)

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX API)
        custom_config = json_utils.loads(
            exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY, "null")) or {}
        job_args = dict(custom_config[vertex_executor.TRAINING_ARGS_KEY])
        project = job_args.pop("project")
        client = self.job_client(custom_config[vertex_constants.VERTEX_REGION_KEY])
        job = client.create_training_job(
            input_dict, output_dict, exec_properties,
            name_utils.get_full_name(self._GetExecutorClass()), job_args,
            custom_config.get(vertex_executor.JOB_ID_KEY), None)
        client.launch_job(project, job)
        wait_for_job(client, poll_seconds=self.poll_seconds)


class VertexTrainer(Trainer):
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexExecutor)


def vertex_trainer(**kwargs) -> Trainer:
    """The Trainer whose step submits and waits for a Vertex AI CustomJob."""
    return VertexTrainer(**kwargs).with_id(names.TRAINER)
