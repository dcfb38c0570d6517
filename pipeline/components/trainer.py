"""The Trainer: TFX's Trainer with more inputs: the raw examples of ExampleGen, and (optional)
the statistics of the rows it trains on (StatisticsGen's of the span, or Transform's of a
window of spans), which the executor ships inside the model for `make predict`'s skew report.

The export parity gate inside `run_fn` (trainer_module/parity.py) calls the exported model with
raw eval examples; TFX's TrainerSpec has no input for them, so this spec adds `raw_examples`
and the executor (trainer_module/executor.py) passes their eval split to `run_fn`. The node id
stays "Trainer". pipeline/components/vertex_trainer.py runs the same executor as a Vertex AI
CustomJob.
"""

from typing import Any

from tfx import types
from tfx.components.trainer import component as trainer_component
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter
from tfx.utils import json_utils

from trainer_module import executor


class TrainerSpec(standard_component_specs.TrainerSpec):
    """TFX's TrainerSpec plus `raw_examples`."""

    INPUTS = {**standard_component_specs.TrainerSpec.INPUTS,
              executor.RAW_EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
              executor.STATISTICS_KEY: ChannelParameter(
                  type=standard_artifacts.ExampleStatistics, optional=True)}


class Trainer(trainer_component.Trainer):
    """Trains with `run_fn` on transformed examples; checks the export on raw ones."""

    SPEC_CLASS = TrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, *, examples: types.BaseChannel, raw_examples: types.BaseChannel,
                 transform_graph: types.BaseChannel, schema: types.BaseChannel,
                 run_fn: str, train_args: trainer_pb2.TrainArgs,
                 eval_args: trainer_pb2.EvalArgs, custom_config: dict[str, Any],
                 base_model: types.BaseChannel | None = None,
                 hyperparameters: types.BaseChannel | None = None,
                 statistics: types.BaseChannel | None = None) -> None:
        spec = TrainerSpec(
            examples=examples, raw_examples=raw_examples, statistics=statistics,
            transform_graph=transform_graph,
            schema=schema, base_model=base_model, hyperparameters=hyperparameters,
            train_args=train_args, eval_args=eval_args,
            run_fn=run_fn, custom_config=json_utils.dumps(custom_config),
            model=types.Channel(type=standard_artifacts.Model),
            model_run=types.Channel(type=standard_artifacts.ModelRun))
        base_component.BaseComponent.__init__(self, spec=spec)
