"""The Keras model: embeddings for categories, dense numeric features, an MLP on top.

Built with Keras 2 (`tf_keras`), which TFX 1.16 exports as a TF SavedModel. Inputs are the
transformed features as int32 ids and float32 values of shape [batch]; the model's contract
with the input pipeline and the serving signature is `model_inputs`.
"""

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from trainer_module import features
from trainer_module.config import TrainerConfig


def model_inputs(transformed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Selects the model's inputs from transformed features, with TPU-friendly dtypes.

    Category ids go to int32 (XLA on TPU has no native int64), values to float32.
    """
    inputs = {name: tf.cast(transformed[name], tf.float32)
              for name in features.dense_float_outputs()}
    inputs.update({name: tf.cast(transformed[name], tf.int32)
                   for name in features.categorical_outputs()})
    return inputs


def category_sizes(tf_transform_output: tft.TFTransformOutput) -> dict[str, int]:
    """Number of ids of each categorical transformed feature (embedding table rows)."""
    sizes = {}
    for key, num_buckets in features.BUCKET_FEATURES.items():
        sizes[features.bucket_name(key)] = num_buckets + 1
    for key, size in features.INTEGER_CATEGORICAL_FEATURES.items():
        sizes[features.transformed_name(key)] = size + 1
    for key, num_buckets in features.HASHED_FEATURES.items():
        sizes[features.transformed_name(key)] = num_buckets + 1
    for key in features.VOCAB_FEATURES:
        vocab = tf_transform_output.vocabulary_size_by_name(key)
        sizes[features.transformed_name(key)] = vocab + features.VOCAB_OOV_BUCKETS
    return sizes


def build_model(config: TrainerConfig, sizes: dict[str, int]) -> tf_keras.Model:
    """Builds (uncompiled) the big-tipper classifier under the current dtype policy."""
    inputs = {}
    parts = []
    numeric = []
    for name in features.dense_float_outputs():
        inputs[name] = tf_keras.Input(shape=(), dtype=tf.float32, name=name)
        numeric.append(tf_keras.layers.Reshape((1,))(inputs[name]))
    parts.append(tf_keras.layers.Concatenate(name="numeric")(numeric))
    for name in features.categorical_outputs():
        inputs[name] = tf_keras.Input(shape=(), dtype=tf.int32, name=name)
        parts.append(
            tf_keras.layers.Embedding(
                sizes[name], config.embedding_dim, name=f"{name}_embedding",
                embeddings_regularizer=tf_keras.regularizers.L2(config.l2) if config.l2 else None,
            )(inputs[name])
        )
    x = tf_keras.layers.Concatenate(name="all_features")(parts)
    for i, width in enumerate(config.hidden_units):
        x = tf_keras.layers.Dense(
            width, activation="relu", name=f"hidden_{i}",
            kernel_regularizer=tf_keras.regularizers.L2(config.l2) if config.l2 else None,
        )(x)
        if config.dropout:
            x = tf_keras.layers.Dropout(config.dropout, name=f"dropout_{i}")(x)
    # The head stays float32 under mixed precision so the sigmoid and the loss are exact.
    output = tf_keras.layers.Dense(1, activation="sigmoid", dtype="float32", name="probability")(x)
    return tf_keras.Model(inputs=inputs, outputs=output, name="big_tipper")


def compile_model(
    model: tf_keras.Model, config: TrainerConfig, steps_per_execution: int, jit_compile: bool
) -> None:
    model.compile(
        optimizer=tf_keras.optimizers.Adam(learning_rate=config.learning_rate),
        loss=tf_keras.losses.BinaryCrossentropy(),
        metrics=[
            tf_keras.metrics.BinaryAccuracy(name="accuracy"),
            tf_keras.metrics.AUC(name="auc"),
        ],
        steps_per_execution=steps_per_execution,
        jit_compile=jit_compile,
    )
    # Keras' steps have no tensor-dependent Python control flow, so AutoGraph has nothing to
    # rewrite; skipping its source transformation of Keras internals saves ~15 s per process
    # (a mistake would still fail loudly at trace time, never silently).
    for step in ("train_step", "test_step", "predict_step"):
        setattr(model, step, tf.autograph.experimental.do_not_convert(getattr(model, step)))
