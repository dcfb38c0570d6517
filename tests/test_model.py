"""Model building and the float32 export: what serving and the Evaluator receive."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

import taxi_rows
from trainer_module import export, features
from trainer_module.config import TrainerConfig
from trainer_module.model import build_model, category_sizes, compile_model, model_inputs


@pytest.fixture(scope="module")
def tft_output(transformed_data):
    return tft.TFTransformOutput(transformed_data.transform_dir)


def test_model_takes_every_transformed_feature(tft_output):
    model = build_model(TrainerConfig(), category_sizes(tft_output))
    expected = set(features.dense_float_outputs() + features.categorical_outputs())
    assert set(model.input_names) == expected
    assert model.output_shape == (None, 1)


def test_hidden_widths_are_multiples_of_128(tft_output):
    config = TrainerConfig()
    model = build_model(config, category_sizes(tft_output))
    widths = [layer.units for layer in model.layers if layer.name.startswith("hidden_")]
    assert widths == list(config.hidden_units)
    assert all(w % 128 == 0 for w in widths)


def test_embedding_tables_fit_every_id_the_transform_emits(tft_output, transformed_data):
    sizes = category_sizes(tft_output)
    batch = next(iter(tf.data.TFRecordDataset(transformed_data.train_files, "GZIP").batch(1000)))
    parsed = model_inputs(tf.io.parse_example(batch, tft_output.transformed_feature_spec()))
    for name in features.categorical_outputs():
        assert int(tf.reduce_max(parsed[name])) < sizes[name], name
        assert int(tf.reduce_min(parsed[name])) >= 0, name


def test_steps_per_execution_is_applied(tft_output):
    model = build_model(TrainerConfig(), category_sizes(tft_output))
    compile_model(model, TrainerConfig(), steps_per_execution=16, jit_compile=False)
    assert int(model._steps_per_execution.numpy()) == 16


def test_export_serves_raw_examples_in_float32(tft_output, tmp_path):
    config = TrainerConfig(hidden_units=(128,))
    model = build_model(config, category_sizes(tft_output))
    export_dir = str(tmp_path / "serving")
    export.export_serving_model(model, config, tft_output, export_dir)

    loaded = tf.saved_model.load(export_dir)
    assert set(loaded.signatures) == {"serving_default", "transform_features"}
    rows = taxi_rows.read_rows(5)
    serving = [taxi_rows.to_example(r, drop=features.LABEL_SOURCE_FEATURES).SerializeToString()
               for r in rows]
    out = loaded.signatures["serving_default"](examples=tf.constant(serving))
    probabilities = out["probabilities"]
    assert probabilities.dtype == tf.float32 and probabilities.shape == (5, 1)
    assert np.all((probabilities.numpy() >= 0) & (probabilities.numpy() <= 1))
    # Same weights, same answer as the in-memory model on the same transformed rows.
    parsed = tf.io.parse_example(serving, export.serving_raw_feature_spec(tft_output))
    expected = model(model_inputs(tft_output.transform_features_layer()(parsed)))
    np.testing.assert_allclose(probabilities.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)

    with_label = [taxi_rows.to_example(r).SerializeToString() for r in rows]
    transformed = loaded.signatures["transform_features"](examples=tf.constant(with_label))
    assert transformed[features.LABEL_KEY].shape == (5,)


def test_export_is_float32_after_mixed_precision_training(tft_output, tmp_path):
    config = TrainerConfig(hidden_units=(128,))
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_model(config, category_sizes(tft_output))
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    assert model.get_layer("hidden_0").compute_dtype == "bfloat16"
    export_dir = str(tmp_path / "serving")
    export.export_serving_model(model, config, tft_output, export_dir)
    loaded = tf.saved_model.load(export_dir)
    serving = [taxi_rows.to_example(r, drop=features.LABEL_SOURCE_FEATURES).SerializeToString()
               for r in taxi_rows.read_rows(3)]
    out = loaded.signatures["serving_default"](examples=tf.constant(serving))
    assert out["probabilities"].dtype == tf.float32
    # No bfloat16 op or tensor anywhere in the serving graph (functions included).
    graph_def = loaded.signatures["serving_default"].graph.as_graph_def()
    assert "DT_BFLOAT16" not in str(graph_def)
