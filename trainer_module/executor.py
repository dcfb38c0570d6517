"""The Trainer's executor: TFX's GenericExecutor, plus the raw eval examples for `run_fn`.

`run_fn` trains on Transform's output, but its export parity gate (trainer_module/parity.py)
calls the exported model as a client does, with raw tf.Examples. The Trainer component of this
pipeline (pipeline/components/trainer.py) has one more input, `raw_examples` (ExampleGen's
output); this executor hands the file pattern of its eval split to `run_fn` in
`custom_config`. It lives here, not in pipeline/, because the TPU trainer image runs it.

On Kubeflow Pipelines the warm-start model comes from a component that always writes a Model
artifact (pipeline/components/served_model.py); one marked as holding no model is no base model.
"""

import os
from typing import Any

from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.dsl.io import fileio
from tfx.types import standard_artifact_utils, standard_component_specs
from tfx.utils import io_utils, path_utils

from trainer_module.feature_signature import TRAINING_STATISTICS_FILE
from trainer_module.keys import EVAL_SPLIT, STATISTICS_FILE, TRAIN_SPLIT, split_dir

# The Trainer's input with ExampleGen's raw examples.
RAW_EXAMPLES_KEY = "raw_examples"
# The custom_config key that carries the raw eval split's file patterns to run_fn.
RAW_EVAL_FILES_KEY = "raw_eval_files"
# The Trainer's optional input with the statistics of the rows it trains on: StatisticsGen's of
# the span, or with a window of spans Transform's pre-transform statistics.
STATISTICS_KEY = "statistics"
# Model custom property: 0 when the artifact holds no model (nothing was served yet).
HAS_MODEL_KEY = "has_model"


def models_held(artifacts: list[types.Artifact]) -> list[types.Artifact]:
    """The artifacts that hold a model: all but those marked `has_model` = 0."""
    return [a for a in artifacts
            if not (a.has_custom_property(HAS_MODEL_KEY)
                    and a.get_int_custom_property(HAS_MODEL_KEY) == 0)]


def training_statistics_file(statistics: types.Artifact) -> str:
    """The file of the training rows' statistics in an ExampleStatistics artifact: its train
    split's (StatisticsGen's, one folder per split), or the one at its root (Transform's
    pre-transform statistics: the rows it analyzed, which are the training rows)."""
    if statistics.split_names:
        return os.path.join(statistics.uri, split_dir(TRAIN_SPLIT), STATISTICS_FILE)
    return os.path.join(statistics.uri, STATISTICS_FILE)


class Executor(trainer_executor.GenericExecutor):
    """GenericExecutor whose FnArgs also name the raw eval examples, and which ships the
    training split's statistics inside the exported model."""

    def Do(self, input_dict: dict[str, list[types.Artifact]],  # noqa: N802 (TFX's name)
           output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
        super().Do(input_dict, output_dict, exec_properties)
        statistics = input_dict.get(STATISTICS_KEY)
        if statistics:
            [model] = output_dict[standard_component_specs.MODEL_KEY]
            source = training_statistics_file(statistics[0])
            target = os.path.join(path_utils.serving_model_dir(model.uri),
                                  TRAINING_STATISTICS_FILE)
            fileio.makedirs(os.path.dirname(target))
            fileio.copy(source, target, overwrite=True)

    def _GetFnArgs(self, input_dict: dict[str, list[types.Artifact]],  # noqa: N802 (TFX's name)
                   output_dict: dict[str, list[types.Artifact]],
                   exec_properties: dict[str, Any]) -> FnArgs:
        base = standard_component_specs.BASE_MODEL_KEY
        if base in input_dict:
            input_dict = {**input_dict, base: models_held(input_dict[base])}
        fn_args = super()._GetFnArgs(input_dict, output_dict, exec_properties)
        raw = input_dict.get(RAW_EXAMPLES_KEY)
        if raw:
            fn_args.custom_config = {
                **(fn_args.custom_config or {}),
                RAW_EVAL_FILES_KEY: [io_utils.all_files_pattern(uri) for uri in
                                     standard_artifact_utils.get_split_uris(raw, EVAL_SPLIT)],
            }
        return fn_args
