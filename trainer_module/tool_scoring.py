"""Scores tables of raw CSV rows with an exported model, through its serving_features signature.

Works on plain paths (a SavedModel folder, pandas tables), so the pipeline's `make predict` and
the bench share it. A row whose cells do not fit the model's inputs is not scored: its reason
comes back with it, and nothing is dropped without one.
"""

import dataclasses
from typing import Any

from trainer_module.feature_signature import FeatureInput, parse_columns, read_contract
from trainer_module.missing import folded

# Rows per call of the signature: large enough that the per-call overhead vanishes, small
# enough that a batch's tensors stay in the CPU caches' neighbourhood.
BATCH_ROWS = 8192
# The predicted class name column, for multiclass models.
PREDICTED_CLASS = "predicted_class"


@dataclasses.dataclass(frozen=True)
class Predictor:
    """An exported model's serving_features signature and its contract."""

    model_dir: str
    contract: dict[str, Any]
    inputs: tuple[FeatureInput, ...]
    signature: Any

    @property
    def delimiter(self) -> str:
        """The field delimiter of the CSV files the model was trained on."""
        return self.contract.get("csv", {}).get("delimiter", ",")

    @property
    def missing(self) -> frozenset[str]:
        """The dataset's own missing markers (`missing.folded`)."""
        return folded(self.contract.get("csv", {}).get("missing_values", []))

    @property
    def output_columns(self) -> tuple[str, ...]:
        """The prediction columns `score` adds, in order."""
        if self.contract["task"] == "multiclass":
            return tuple(f"score_{c}" for c in self.contract["classes"]) + (PREDICTED_CLASS,)
        return (self.contract["prediction_key"],)


def load_predictor(model_dir: str) -> Predictor:
    """The model in `model_dir` (a pushed version or an exported Format-Serving folder).

    Raises:
      FileNotFoundError: the folder holds no model, or one exported without serving_features.
    """
    import tensorflow as tf

    contract, inputs = read_contract(model_dir)
    model = tf.saved_model.load(model_dir)
    return Predictor(model_dir, contract, inputs, model.signatures[contract["signature"]])


def score(predictor: Predictor, frame: Any) -> tuple[Any, Any]:
    """(predictions, reasons) for a DataFrame of CSV cells.

    predictions: a DataFrame indexed like the good rows of `frame`, one column per
    `predictor.output_columns`; reasons: a Series, "" for a scored row, else why it was not.

    Raises:
      ValueError: a required feature has no column, or a prediction column's name is already
        a column of `frame`.
    """
    import numpy as np
    import pandas as pd
    import tensorflow as tf

    clash = sorted(set(predictor.output_columns) & set(frame.columns))
    if clash:
        raise ValueError(f"the input already has column(s) {clash}, which the predictions "
                         "would overwrite: rename them")
    columns, reasons = parse_columns(frame, predictor.inputs, predictor.missing)
    good = (reasons == "").to_numpy()
    dtypes = {i.name: tf.dtypes.as_dtype(i.dtype) for i in predictor.inputs}
    keys = {i.name: i.key for i in predictor.inputs}
    parts = []
    rows = np.flatnonzero(good)
    for start in range(0, len(rows), BATCH_ROWS):
        take = rows[start:start + BATCH_ROWS]
        batch = {keys[name]: tf.constant(values[take], dtypes[name])
                 for name, values in columns.items()}
        parts.append({k: v.numpy() for k, v in predictor.signature(**batch).items()})
    names = predictor.output_columns
    if not parts:
        return pd.DataFrame(columns=list(names), index=frame.index[good]), reasons
    outputs = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    if predictor.contract["task"] == "multiclass":
        scores = outputs["scores"]
        table = dict(zip(names[:-1], scores.T, strict=True))
        table[PREDICTED_CLASS] = np.asarray(predictor.contract["classes"],
                                            dtype=object)[scores.argmax(axis=1)]
    else:
        table = {names[0]: outputs[predictor.contract["prediction_key"]][:, 0]}
    return pd.DataFrame(table, index=frame.index[good]), reasons
