"""Warm start: a new model begins with the weights of the latest blessed model.

The blessed model is the float32 SavedModel the Trainer exported; its Keras variables carry the
layer names `build_model` gives, so each variable of the new model takes the baseline's
variable of the same name. A new span brings new categories, so a vocabulary column's
embedding may have grown: its rows are matched by token (the baseline's vocabulary file ships
in its assets), a token new to this model keeps its fresh row, and the out-of-vocabulary rows
are carried over. The hashed category pairs' table is sized by the vocabularies, and its rows
are hashes of two ids, which a grown vocabulary moves: when its size changed it starts afresh,
and the log says so. Every other variable must be there with the same shape: a feature added or a
width changed makes the old weights meaningless for the new network, and the Trainer says which
layers differ instead of training from a partial copy.
"""

import os
from collections.abc import Mapping

import numpy as np
import tensorflow as tf
import tf_keras
from absl import logging

from trainer_module import keys
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.features import transformed_name, vocabulary_name
from trainer_module.model import PAIRS_LAYER
from trainer_module.tf_names import tf_name


class WarmStartError(ValueError):
    """The baseline's weights do not fit the model being trained."""


def _name(variable: tf.Variable) -> str:
    return variable.name.split(":")[0]


def baseline_weights(export_dir: str) -> dict[str, np.ndarray]:
    """The exported model's weights by name: the variables its serving signature reads."""
    loaded = tf.saved_model.load(export_dir)  # owns the variables: keep it while reading them
    return {_name(v): v.numpy() for v in loaded.signatures[keys.SERVING_SIGNATURE].variables}


def vocabularies(spec: DatasetSpec, tf_transform_output) -> dict[str, tuple[str, list[str]]]:
    """Each vocabulary column's embedding variable → (its vocabulary's asset name, this
    model's tokens in id order)."""
    found = {}
    for out in spec.model_outputs():
        feature = next((f for f in spec.features if f.role == "vocabulary"
                        and transformed_name(f.column) == out.name and not out.group), None)
        if feature is None:
            continue
        asset = vocabulary_name(feature.column)
        tokens = [t.decode("utf-8") if isinstance(t, bytes) else str(t)
                  for t in tf_transform_output.vocabulary_by_name(asset)]
        found[f"{tf_name(out.name)}_embedding/embeddings"] = (asset, tokens)
    return found


def _remapped(old: np.ndarray, fresh: np.ndarray, old_tokens: list[str],
              tokens: list[str]) -> np.ndarray:
    """`fresh` with the rows of the tokens `old` knew, and its out-of-vocabulary rows."""
    rows = fresh.copy()
    index = {t: i for i, t in enumerate(old_tokens)}
    for i, token in enumerate(tokens):
        if token in index:
            rows[i] = old[index[token]]
    oov = min(old.shape[0] - len(old_tokens), rows.shape[0] - len(tokens))
    rows[len(tokens):len(tokens) + oov] = old[len(old_tokens):len(old_tokens) + oov]
    return rows


def restore(keras_model: tf_keras.Model, export_dir: str,
            vocabularies: Mapping[str, tuple[str, list[str]]] | None = None) -> int:
    """Assigns the baseline's weights to `keras_model`'s variables; returns how many.

    Args:
      keras_model: the model about to train.
      export_dir: the baseline's exported SavedModel.
      vocabularies: from `vocabularies()`: embeddings whose rows are matched by token.

    Raises:
      WarmStartError: a variable is missing from the baseline or has another shape there
        (other than a vocabulary's grown or shrunk embedding).
    """
    weights = baseline_weights(export_dir)
    vocabularies = vocabularies or {}
    problems, remapped, fresh = [], [], []
    for variable in keras_model.weights:
        name = _name(variable)
        if (name.startswith(PAIRS_LAYER + "/") and vocabularies and name in weights
                and weights[name].shape != tuple(variable.shape.as_list())):
            weights[name] = variable.numpy()
            fresh.append(name)
        elif name not in weights:
            problems.append(f"{name} {variable.shape.as_list()} is not in the baseline")
        elif name in vocabularies and weights[name].shape[1:] == tuple(variable.shape[1:]):
            asset, tokens = vocabularies[name]
            with tf.io.gfile.GFile(os.path.join(export_dir, "assets", asset)) as f:
                old_tokens = f.read().splitlines()
            weights[name] = _remapped(weights[name], variable.numpy(), old_tokens, tokens)
            if len(old_tokens) != len(tokens):
                remapped.append(f"{name} ({len(old_tokens)} → {len(tokens)} tokens)")
        elif weights[name].shape != tuple(variable.shape.as_list()):
            problems.append(f"{name} is {list(weights[name].shape)} in the baseline, "
                            f"{variable.shape.as_list()} now")
    if problems:
        raise WarmStartError(
            f"warm_start: the latest blessed model ({export_dir}) does not fit this model: "
            + "; ".join(problems) + ". A changed feature or width changes these shapes; set "
            "warm_start=false to train this model from scratch")
    for variable in keras_model.weights:
        variable.assign(weights[_name(variable)].astype(variable.dtype.as_numpy_dtype))
    logging.info("Warm start: %d variables from %s%s", len(keras_model.weights) - len(fresh),
                 export_dir,
                 f"; rows matched by token in {', '.join(remapped)}" if remapped else "")
    if fresh:
        logging.warning("Warm start: %s start(s) afresh: the vocabularies' sizes changed, "
                        "and with them which row each category pair hashes to",
                        ", ".join(fresh))
    return len(keras_model.weights) - len(fresh)
