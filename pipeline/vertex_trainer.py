"""The Trainer as a Vertex AI CustomJob (the TPU machine, the TPU trainer image).

Its step in the pipeline runs TFX's Vertex training executor, which submits a CustomJob and
waits for it; the job runs `trainer_module.executor.Executor`, so `run_fn` gets the raw eval
examples and checks its export there as it does locally. Kept apart from
pipeline/trainer_component.py because importing TFX's Vertex executor loads the Google Cloud
AI Platform SDK, which local runs never need.
"""

from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_executor

from pipeline import names
from pipeline.trainer_component import Trainer
from trainer_module import executor


class VertexExecutor(vertex_executor.GenericExecutor):
    """Submits the CustomJob that runs this project's Trainer executor."""

    def _GetExecutorClass(self) -> type:  # noqa: N802 (TFX's name)
        return executor.Executor


class VertexTrainer(Trainer):
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexExecutor)


def vertex_trainer(**kwargs) -> Trainer:
    """The Trainer whose step submits and waits for a Vertex AI CustomJob."""
    return VertexTrainer(**kwargs).with_id(names.TRAINER)
