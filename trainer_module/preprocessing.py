"""Transform's `preprocessing_fn`, generated from the dataset spec in `custom_config`.

Every feature goes through its kind's transform (trainer_module/features.py) and the label
through its task's rule, on the host, materialized by Transform: the train step (and a TPU's
XLA program) only ever sees dense float32/int64 tensors of static shape. The same graph is
attached to the exported model for serving, where the label's sources are absent.
"""

from typing import Any

import tensorflow as tf

from trainer_module import tasks
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.features import CATEGORY, FLOAT, to_dense

_PACKED_DTYPES = {FLOAT: tf.float32, CATEGORY: tf.int64}
_COMPARE = {">": tf.greater, ">=": tf.greater_equal, "<": tf.less, "<=": tf.less_equal}


def class_ids(values: tf.Tensor, classes: tuple[str, ...]) -> tf.Tensor:
    """Index of each value's text in `classes`, -1 for a value outside them (int64 [batch])."""
    if values.dtype != tf.string:
        values = tf.strings.as_string(values)
    matches = tf.equal(tf.expand_dims(values, 1), tf.constant(list(classes))[tf.newaxis, :])
    ids = tf.argmax(tf.cast(matches, tf.int64), axis=1)
    return tf.where(tf.reduce_any(matches, axis=1), ids, tf.constant(-1, tf.int64))


def label(inputs: dict[str, Any], spec: DatasetSpec) -> tuple[tf.Tensor, tf.Tensor]:
    """(label [batch], present [batch]): int64 ids for classification, float32 for regression."""
    if spec.rule:
        rule = spec.rule
        left, present = to_dense(inputs[rule.column], 0)
        left = tf.cast(left, tf.float32)
        if rule.of:
            right, right_present = to_dense(inputs[rule.of], 0)
            right = rule.times * tf.cast(right, tf.float32)
            present &= right_present
        else:
            right = tf.constant(rule.value, tf.float32)
        return tf.cast(_COMPARE[rule.op](left, right), tf.int64), present
    raw = inputs[spec.label]
    values, present = to_dense(raw, "" if raw.dtype == tf.string else 0)
    if spec.task == tasks.REGRESSION:
        return tf.cast(values, tf.float32), present
    if spec.classes:
        return class_ids(values, spec.classes), present
    return tf.cast(values, tf.int64), present


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, Any]:
    """TFX Transform entry point: the model's inputs packed by kind ([batch, n] each, see
    `features.PACKED_NAMES`), the label (and its weight) of shape [batch]."""
    spec = DatasetSpec.from_custom_config(custom_config)
    transformed: dict[str, Any] = {}
    for feature in spec.features:
        if feature.kind.transform is not None:
            transformed.update(feature.kind.transform(inputs[feature.column], feature.column,
                                                      feature.params))
    outputs: dict[str, Any] = {
        name: tf.stack([tf.cast(transformed[o.name], _PACKED_DTYPES[o.kind]) for o in packed],
                       axis=1)
        for name, packed in spec.packed_inputs().items()}
    # The label's sources are absent at serving time; the serving graph prunes these outputs.
    value, present = label(inputs, spec)
    if spec.missing_labels == "drop":
        # A row without a label weighs 0 in training and evaluation; its label is a valid
        # placeholder (0), so no loss or metric ever sees an id outside the classes.
        value = tf.where(present, value, tf.zeros_like(value))
        outputs[spec.label_weight_key] = tf.cast(present, tf.float32)
    outputs[spec.label_key] = value
    return outputs
