"""Warm start: a new model begins with the weights of the latest blessed model.

The blessed model is the float32 SavedModel the Trainer exported; its Keras variables carry the
layer names `build_model` gives, so each variable of the new model takes the baseline's
variable of the same name. Every variable must be there with the same shape: a vocabulary that
grew, a feature added or a width changed makes the old weights meaningless for the new
network, and the Trainer says which layers differ instead of training from a partial copy.
"""

import numpy as np
import tensorflow as tf
import tf_keras
from absl import logging

from trainer_module import keys


class WarmStartError(ValueError):
    """The baseline's weights do not fit the model being trained."""


def _name(variable: tf.Variable) -> str:
    return variable.name.split(":")[0]


def baseline_weights(export_dir: str) -> dict[str, np.ndarray]:
    """The exported model's weights by name: the variables its serving signature reads."""
    loaded = tf.saved_model.load(export_dir)  # owns the variables: keep it while reading them
    return {_name(v): v.numpy() for v in loaded.signatures[keys.SERVING_SIGNATURE].variables}


def restore(keras_model: tf_keras.Model, export_dir: str) -> int:
    """Assigns the baseline's weights to `keras_model`'s variables; returns how many.

    Raises:
      WarmStartError: a variable is missing from the baseline or has another shape there.
    """
    weights = baseline_weights(export_dir)
    problems = []
    for variable in keras_model.weights:
        name = _name(variable)
        if name not in weights:
            problems.append(f"{name} {variable.shape.as_list()} is not in the baseline")
        elif weights[name].shape != tuple(variable.shape.as_list()):
            problems.append(f"{name} is {list(weights[name].shape)} in the baseline, "
                            f"{variable.shape.as_list()} now")
    if problems:
        raise WarmStartError(
            f"warm_start: the latest blessed model ({export_dir}) does not fit this model: "
            + "; ".join(problems) + ". A grown vocabulary or a changed feature or width changes "
            "these shapes; set warm_start=false to train this model from scratch")
    for variable in keras_model.weights:
        variable.assign(weights[_name(variable)].astype(variable.dtype.as_numpy_dtype))
    logging.info("Warm start: %d variables from %s", len(keras_model.weights), export_dir)
    return len(keras_model.weights)
