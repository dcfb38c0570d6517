"""The table of tasks: what a binary, multiclass or regression label changes, in one place.

Each task names its Evaluator metrics (TFMA class, the metric name TFMA reports, and which way
is better), the serving outputs it returns, and builds its head, loss and Keras metrics. This
module imports TensorFlow only inside the builders, so the pipeline can check a spec's task and
thresholds before TensorFlow loads.
"""

import dataclasses
from typing import Any

BINARY = "binary"
MULTICLASS = "multiclass"
REGRESSION = "regression"

# Regression losses, on the target scaled to unit variance.
REGRESSION_LOSSES = ("mse", "huber")


@dataclasses.dataclass(frozen=True)
class EvalMetric:
    """A metric the Evaluator computes and a threshold may bound.

    tfma_class: the MetricConfig class_name (TFMA's, or one of pipeline/components/eval_metrics.py);
    tfma_name: the name TFMA reports it under; higher_is_better: the direction of its
    thresholds (a lower bound and an allowed drop, or an upper bound and an allowed rise).
    """

    tfma_class: str
    tfma_name: str
    higher_is_better: bool


@dataclasses.dataclass(frozen=True)
class Task:
    """One kind of label.

    metrics: the spec's threshold keys → Evaluator metric; headline: the metric summaries and
    the report lead with; extra_tfma: metrics computed and reported, never thresholds (class
    names as tfma_class); prediction_key: the serving output TFMA scores; outputs: serving
    output names.
    """

    name: str
    metrics: dict[str, EvalMetric]
    headline: str
    extra_tfma: tuple[str, ...]
    prediction_key: str
    outputs: tuple[str, ...]

    def head(self, num_classes: int, label_scale: tuple[float, float],
             dense: Any = None, wide: Any = None) -> Any:
        """The output layer(s), float32 even under mixed precision so losses stay exact;
        `dense(units, activation=, dtype=, name=)` builds the last layer (default: Keras'
        Dense; an ensemble's gives each member its own). `wide`, if given, is added to the
        last layer's logits (or, for regression, to the scaled target) before the activation
        (ModelConfig.wide)."""
        import tf_keras

        dense_layer = dense or tf_keras.layers.Dense
        activation = {BINARY: "sigmoid", MULTICLASS: "softmax"}.get(self.name)
        if self.name == REGRESSION:
            mean, std = label_scale
            # The network predicts the target scaled to mean 0 and variance 1; this fixed
            # layer turns it back into the label's own units.
            last = tf_keras.layers.Rescaling(std, offset=mean, dtype="float32", name="unscale")
        elif wide is None:
            return dense_layer(num_classes, activation=activation, dtype="float32",
                               name="head")
        else:
            last = tf_keras.layers.Activation(activation, dtype="float32",
                                              name="head_activation")
        dense = dense_layer(num_classes, dtype="float32", name="head")
        if wide is None:
            return lambda x: last(dense(x))
        add = tf_keras.layers.Add(dtype="float32", name="deep_and_wide")
        return lambda x: last(add([dense(x), wide]))

    def loss(self, regression_loss: str, label_scale: tuple[float, float],
             label_smoothing: float = 0.0) -> Any:
        import tf_keras

        if self.name == BINARY:
            return tf_keras.losses.BinaryCrossentropy(label_smoothing=label_smoothing)
        if self.name == MULTICLASS:
            if not label_smoothing:
                return tf_keras.losses.SparseCategoricalCrossentropy()
            import tensorflow as tf

            def smoothed_loss(y_true, y_pred):
                # Keras' sparse loss takes no smoothing: the class ids as one-hot rows.
                ids = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
                return tf_keras.losses.categorical_crossentropy(
                    tf.one_hot(ids, tf.shape(y_pred)[-1], dtype=y_pred.dtype), y_pred,
                    label_smoothing=label_smoothing)

            return smoothed_loss
        if label_smoothing:
            raise ValueError(f"label_smoothing={label_smoothing!r}: a regression label has "
                             "no classes to smooth toward; use 0")
        # Per-example functions: Keras wraps a loss function with the reduction a distribution
        # strategy needs (a loss object called inside it would reduce on its own, and fail).
        base = (tf_keras.losses.mean_squared_error if regression_loss == "mse"
                else tf_keras.losses.huber)
        std = label_scale[1]

        def scaled_loss(y_true, y_pred):
            # (y - m)/s - (ŷ - m)/s = (y - ŷ)/s: the loss on the standardized target.
            return base(y_true / std, y_pred / std)

        return scaled_loss

    def keras_metrics(self) -> list[Any]:
        import tf_keras

        if self.name == BINARY:
            return [tf_keras.metrics.BinaryAccuracy(name="accuracy"),
                    tf_keras.metrics.AUC(name="auc")]
        if self.name == MULTICLASS:
            return [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        return [tf_keras.metrics.RootMeanSquaredError(name="rmse"),
                tf_keras.metrics.MeanAbsoluteError(name="mae")]

    def output_meanings(self, label: str, classes: tuple[str, ...]) -> dict[str, str]:
        """What each serving output means, for the README, the contract and the model card;
        `label` names the label (with its rule, if it has one)."""
        if self.name == BINARY:
            # A binary spec's classes are [negative, positive]; without them the label is 0/1.
            positive = (f"{label} is {classes[-1]!r} (the positive class; the other is "
                        f"{classes[0]!r})" if classes else f"{label} is 1")
            return {"probabilities": f"the probability, 0 to 1, that {positive} (float32, one "
                                     "value per instance)"}
        if self.name == MULTICLASS:
            return {"scores": f"the probability of each class of {label}, in the order of "
                              f"'classes' ({', '.join(classes)}); they sum to 1 (float32)",
                    "classes": "the class names, the same list in every answer (string)"}
        return {"predictions": f"the predicted {label}, in the label's own units (float32, one "
                               "value per instance)"}

    def serving_outputs(self, prediction: Any, class_names: tuple[str, ...]) -> dict[str, Any]:
        """The serving signature's outputs for the model's [batch, n] prediction."""
        import tensorflow as tf

        if self.name == BINARY:
            return {"probabilities": prediction}
        if self.name == MULTICLASS:
            names = tf.constant(list(class_names), tf.string)
            classes = tf.tile(tf.expand_dims(names, 0), [tf.shape(prediction)[0], 1])
            return {"scores": prediction, "classes": classes}
        return {"predictions": prediction}


TASKS: dict[str, Task] = {
    BINARY: Task(
        BINARY,
        metrics={"accuracy": EvalMetric("OnePassBinaryAccuracy", "binary_accuracy", True),
                 "auc": EvalMetric("OnePassAUC", "auc", True)},
        headline="accuracy", extra_tfma=("OnePassCalibration",), prediction_key="probabilities",
        outputs=("probabilities",)),
    MULTICLASS: Task(
        MULTICLASS,
        metrics={"accuracy": EvalMetric("SparseCategoricalAccuracy",
                                        "sparse_categorical_accuracy", True)},
        headline="accuracy", extra_tfma=(), prediction_key="scores",
        outputs=("scores", "classes")),
    REGRESSION: Task(
        REGRESSION,
        metrics={"rmse": EvalMetric("RootMeanSquaredError", "root_mean_squared_error", False),
                 "mae": EvalMetric("MeanAbsoluteError", "mean_absolute_error", False)},
        headline="rmse", extra_tfma=("MeanSquaredError",), prediction_key="predictions",
        outputs=("predictions",)),
}
