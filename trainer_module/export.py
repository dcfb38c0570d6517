"""Exports a float32 SavedModel with the Transform graph applied inside, on the host.

Signatures:
  serving_default(examples: serialized raw tf.Example) → the task's outputs: binary
    'probabilities' [batch, 1]; multiclass 'scores' [batch, K] and 'classes' [batch, K] (class
    names); regression 'predictions' [batch, 1] in the label's own units.
  serving_features(one [batch] input per raw feature, see trainer_module/feature_signature.py)
    → the same outputs as serving_default, for JSON callers.
  transform_features(examples: serialized raw tf.Example, label included) → the transformed
    label (and its weight, when rows without a label are dropped): what the Evaluator reads
    from it. Only these outputs, so the Evaluator neither computes nor carries per example the
    features serving_default transforms again itself.
Whatever precision the model trained in (mixed_bfloat16 on TPU), the export is rebuilt under a
float32 policy, so CPU consumers (Evaluator, TF Serving) never see bfloat16.
"""

from collections.abc import Callable

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from absl import logging

from trainer_module import keys
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.feature_signature import (
    feature_inputs,
    input_signature,
    refuse_infinite,
    to_parsed,
    write_contract,
)
from trainer_module.model import build_export, category_sizes, model_inputs


def float32_copy(trained: tf_keras.Model, config: TrainerConfig, spec: DatasetSpec,
                 sizes: dict[str, int], label_scale: tuple[float, float]) -> tf_keras.Model:
    """The same model rebuilt under the float32 policy, with the trained weights."""
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy("float32")
    try:
        model = build_export(config, spec, sizes, label_scale)
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
    model.set_weights(trained.get_weights())
    return model


def serving_raw_feature_spec(tf_transform_output: tft.TFTransformOutput,
                             spec: DatasetSpec) -> dict:
    """Raw feature spec of a serving request: every raw column the model reads, so neither the
    label (and its sources) nor a column whose only role is 'ignore'."""
    ignored = set(spec.ignored_columns)
    return {key: feature for key, feature in tf_transform_output.raw_feature_spec().items()
            if key not in ignored and key not in spec.label_sources}


def export_serving_model(
    trained: tf_keras.Model,
    config: TrainerConfig,
    spec: DatasetSpec,
    tf_transform_output: tft.TFTransformOutput,
    export_dir: str,
    label_scale: tuple[float, float],
) -> Callable[[dict], dict]:
    """Saves the float32 copy of `trained` with its three signatures to `export_dir`.

    Returns:
      The traced function from parsed raw serving features to the model's inputs that both
      serving signatures call, for the parity gate to transform its examples with.
    """
    model = float32_copy(trained, config, spec, category_sizes(spec, tf_transform_output),
                         label_scale)
    model.tft_layer = tf_transform_output.transform_features_layer()
    serving_spec = serving_raw_feature_spec(tf_transform_output, spec)
    full_spec = tf_transform_output.raw_feature_spec()
    task = spec.task_info

    # One trace of the Transform layer for every caller: a layer call on a transform graph
    # saved on TF1's path (pipeline/dag.py) prunes that graph again, seconds on a wide dataset.
    @tf.function(autograph=False)
    def to_model_inputs(raw: dict) -> dict[str, tf.Tensor]:
        return model_inputs(model.tft_layer(raw), spec)

    @tf.function(autograph=False)
    def predict(raw: dict) -> dict[str, tf.Tensor]:
        return task.serving_outputs(model(to_model_inputs(raw), training=False), spec.classes)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
                 autograph=False)
    def serve_tf_examples(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict(refuse_infinite(tf.io.parse_example(serialized, serving_spec)))

    inputs = feature_inputs(serving_spec, dict(spec.number_formats))

    @tf.function(input_signature=input_signature(inputs), autograph=False)
    def serve_features(*values: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict(to_parsed(dict(zip([i.name for i in inputs], values, strict=True)),
                                 inputs))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
                 autograph=False)
    def transform_features(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(serialized, full_spec)
        transformed = model.tft_layer(raw)
        return {k: transformed[k] for k in spec.label_outputs}

    model.save(
        export_dir,
        save_format="tf",
        # Layer call traces are only needed to reload a Keras object without its code;
        # consumers here use the signatures, and skipping them halves the export time.
        save_traces=False,
        signatures={
            keys.SERVING_SIGNATURE: serve_tf_examples.get_concrete_function(),
            keys.FEATURES_SIGNATURE: serve_features.get_concrete_function(),
            keys.TRANSFORM_SIGNATURE: transform_features.get_concrete_function(),
        },
    )
    write_contract(export_dir, inputs, spec)
    logging.info("Exported float32 serving model to %s", export_dir)
    return to_model_inputs
