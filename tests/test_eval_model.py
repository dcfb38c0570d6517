"""The Evaluator's model loading (pipeline/components/eval_model.py): TFMA's own shared model,
with the single-input signatures callable positionally, as TFMA calls them."""

import inspect

import numpy as np
import tensorflow as tf
import tensorflow_model_analysis as tfma
import tensorflow_transform as tft
from tfx import types
from tfx.components.util import udf_utils
from tfx.types import standard_artifacts

from pipeline import dag
from pipeline.components import eval_model, evaluator
from trainer_module import export, keys
from trainer_module.config import TrainerConfig
from trainer_module.model import NO_SCALE, build_model, category_sizes

SERIALIZED_INPUT = (keys.SERVING_SIGNATURE, keys.TRANSFORM_SIGNATURE)  # what the Evaluator calls


def _exported(data, folder) -> str:
    tft_output = tft.TFTransformOutput(data.transform_dir)
    config = TrainerConfig.create(hidden_units=(128,))
    model = build_model(config, data.spec, category_sizes(data.spec, tft_output))
    export.export_serving_model(model, config, data.spec, tft_output, str(folder), NO_SCALE)
    return str(folder)


def test_positional_calls_answer_as_keyword_calls(transformed_data, tmp_path):
    path = _exported(transformed_data, tmp_path / "model")
    shared = eval_model.custom_eval_shared_model(
        eval_saved_model_path=path, model_name="", eval_config=dag.eval_config(
            transformed_data.spec))
    assert shared.model_path == path
    model = shared.model_loader.construct_fn()
    plain = tf.saved_model.load(path)
    serialized = tf.constant(transformed_data.rows.serialized(
        list(transformed_data.eval_csv_rows[:7])))
    for name in SERIALIZED_INPUT:
        # TensorFlow's rule: a SavedModel signature binds its inputs by keyword only.
        parameters = plain.signatures[name].function_type.parameters.values()
        assert [p.kind for p in parameters] == [inspect.Parameter.KEYWORD_ONLY]
        assert isinstance(model.signatures[name], eval_model.PositionalSignature)
        got = model.signatures[name](serialized)
        expected = plain.signatures[name](examples=serialized)
        assert set(got) == set(expected)
        for key in expected:
            np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())
    # One input per raw column: TFMA passes those by name, and they stay as TensorFlow made them.
    assert not isinstance(model.signatures["serving_features"], eval_model.PositionalSignature)


def test_the_evaluator_loads_its_models_through_this_module():
    component = evaluator.Evaluator(
        examples=types.Channel(type=standard_artifacts.Examples),
        model=types.Channel(type=standard_artifacts.Model),
        baseline_model=types.Channel(type=standard_artifacts.Model),
        schema=types.Channel(type=standard_artifacts.Schema),
        eval_config=tfma.EvalConfig())
    # How TFX's Evaluator executor finds its model hook (tfx/components/evaluator/executor.py).
    assert udf_utils.try_get_fn(component.exec_properties, "custom_eval_shared_model") is \
        eval_model.custom_eval_shared_model
