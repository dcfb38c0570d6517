"""Transform's `preprocessing_fn`: raw taxi features → dense, fixed-shape numeric tensors.

Everything that turns strings into numbers happens here, on the host, and is materialized by
Transform, so the train step (and a TPU's XLA program) only ever sees float32/int64 tensors of
shape [batch]. The same graph is attached to the exported model for serving.
"""

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from trainer_module import features


def _to_dense(x: tf.Tensor | tf.SparseTensor, default: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """Returns (values [batch], present [batch]) for a feature with at most one value.

    Required features arrive dense ([batch, 1], from `shape { dim { size: 1 } }` in the schema);
    optional ones arrive sparse, and their gaps are filled with `default`.
    """
    if isinstance(x, tf.SparseTensor):
        batch = tf.shape(x, out_type=tf.int64)[0]
        x = tf.sparse.reset_shape(x, [batch, 1])
        present = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.bool), x.dense_shape), False
        )
        values = tf.sparse.to_dense(x, default_value=tf.cast(default, x.dtype))
        return tf.squeeze(values, axis=1), tf.squeeze(present, axis=1)
    values = tf.reshape(x, [-1])
    return values, tf.ones_like(values, tf.bool)


def _log_scaled(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    values, _ = _to_dense(x, 0)
    values = tf.math.log1p(tf.maximum(tf.cast(values, tf.float32), 0.0))
    return tft.scale_to_z_score(values)


def _scaled(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    values, _ = _to_dense(x, 0)
    return tft.scale_to_z_score(tf.cast(values, tf.float32))


def _quantile_bucket(x: tf.Tensor | tf.SparseTensor, num_buckets: int) -> tf.Tensor:
    """Quantile bucket in [0, num_buckets); missing → num_buckets."""
    values, present = _to_dense(x, 0)
    values = tf.cast(values, tf.float32)
    boundaries = tft.quantiles(tf.boolean_mask(values, present), num_buckets, epsilon=0.01)
    buckets = tft.apply_buckets(values, boundaries)
    return tf.where(present, buckets, tf.constant(num_buckets, tf.int64))


def _integer_category(x: tf.Tensor | tf.SparseTensor, size: int) -> tf.Tensor:
    """The value itself in [0, size); missing or out of range → size."""
    values, present = _to_dense(x, -1)
    values = tf.cast(values, tf.int64)
    in_range = present & (values >= 0) & (values < size)
    return tf.where(in_range, values, tf.constant(size, tf.int64))


def _hashed(x: tf.Tensor | tf.SparseTensor, num_buckets: int) -> tf.Tensor:
    """Hash bucket in [0, num_buckets) of the value's decimal text; missing → num_buckets."""
    values, present = _to_dense(x, 0)
    buckets = tf.strings.to_hash_bucket_fast(tf.strings.as_string(values), num_buckets)
    return tf.where(present, buckets, tf.constant(num_buckets, tf.int64))


def _vocabulary_index(x: tf.Tensor | tf.SparseTensor, key: str) -> tf.Tensor:
    values, _ = _to_dense(x, "")
    return tft.compute_and_apply_vocabulary(
        values,
        top_k=features.VOCAB_TOP_K,
        num_oov_buckets=features.VOCAB_OOV_BUCKETS,
        vocab_filename=key,
    )


def big_tipper_label(fare: tf.Tensor, tips: tf.Tensor) -> tf.Tensor:
    """1 when the tip exceeds BIG_TIPPER_FRACTION of the fare, else 0 (int64)."""
    fare = tf.cast(fare, tf.float32)
    tips = tf.cast(tips, tf.float32)
    return tf.cast(tips > features.BIG_TIPPER_FRACTION * fare, tf.int64)


def preprocessing_fn(inputs: dict[str, Any]) -> dict[str, tf.Tensor]:
    """TFX Transform entry point; every output has shape [batch]."""
    outputs: dict[str, tf.Tensor] = {}
    for key in features.LOG_SCALED_FEATURES:
        outputs[features.transformed_name(key)] = _log_scaled(inputs[key])
    for key in features.SCALED_FEATURES:
        outputs[features.transformed_name(key)] = _scaled(inputs[key])
    for key, num_buckets in features.BUCKET_FEATURES.items():
        outputs[features.bucket_name(key)] = _quantile_bucket(inputs[key], num_buckets)
    for key, size in features.INTEGER_CATEGORICAL_FEATURES.items():
        outputs[features.transformed_name(key)] = _integer_category(inputs[key], size)
    for key, num_buckets in features.HASHED_FEATURES.items():
        outputs[features.transformed_name(key)] = _hashed(inputs[key], num_buckets)
    for key in features.VOCAB_FEATURES:
        outputs[features.transformed_name(key)] = _vocabulary_index(inputs[key], key)

    fare, _ = _to_dense(inputs[features.FARE_KEY], 0)
    tips, _ = _to_dense(inputs[features.TIPS_KEY], 0)
    outputs[features.LABEL_KEY] = big_tipper_label(fare, tips)
    return outputs
