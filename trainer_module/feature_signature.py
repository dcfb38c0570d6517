"""The `serving_features` signature: plain feature values in, the task's outputs out.

`serving_default` takes serialized tf.Examples, which a JSON caller (TF Serving's REST API, a
Vertex AI endpoint) can only send as base64 blobs. This signature takes one named input per raw
feature of the serving request, each a [batch] tensor, so a request body is a list of
`{"feature": value, ...}` instances. Every instance carries every input (TF Serving's row format
needs the same keys in each); a value the schema lets be absent is sent as a marker instead:

  - optional numbers (float and int features the schema does not require) arrive as floats,
    NaN meaning "missing"; int features are float64 so that 11-digit ids stay exact;
  - optional strings: "" means missing (a CSV's empty cell never reaches training as "");
  - required features arrive in their schema dtype, and a missing marker there (NaN, "") fails
    the request with the feature's name.

The values are turned into what `tf.io.parse_example` would have produced for the same row
(dense [batch, 1] for required features, [batch, 1] SparseTensors for optional ones), so both
signatures run the same Transform graph and model and give the same predictions.
"""

import dataclasses
from typing import Any

from trainer_module import keys
from trainer_module import numbers as number_format
from trainer_module.missing import NO_EXTRA, is_missing
from trainer_module.tf_names import tf_name

MISSING_STRING = ""
# Written beside the SavedModel (assets.extra/ travels with every copy and push of it): what
# the model takes and answers, for callers without the dataset's schema.
CONTRACT_FILE = "assets.extra/serving_contract.json"
# The statistics of the rows the model trained on (its span's training split, or with a window
# of spans the window's training splits): `make predict` compares scored rows with them.
TRAINING_STATISTICS_FILE = "assets.extra/training_statistics.pb"


@dataclasses.dataclass(frozen=True)
class FeatureInput:
    """One input of the signature.

    name: the raw feature (the column's own name); kind: 'float', 'int' or 'string' (the
    schema's type); required: the schema requires a value in every row; dtype: the input
    tensor's dtype name; key: the signature's input name (trainer_module/tf_names.py), which
    stays distinct for distinct columns, case included; format: how the column's numbers are
    written in the CSV files ("$#,##0": trainer_module/numbers.py), '' for plain numbers (the
    signature itself takes the numbers).
    """

    name: str
    kind: str
    required: bool
    format: str = ""

    @property
    def key(self) -> str:
        return tf_name(self.name)

    @property
    def dtype(self) -> str:
        if self.kind == "string":
            return "string"
        if self.required:
            return "float32" if self.kind == "float" else "int64"
        return "float32" if self.kind == "float" else "float64"

    @property
    def missing(self) -> str:
        """How a caller says "no value" (documentation and error messages)."""
        if self.required:
            return "never (required)"
        return '""' if self.kind == "string" else "NaN"


def feature_inputs(raw_feature_spec: dict, formats: dict[str, str] | None = None
                   ) -> tuple[FeatureInput, ...]:
    """The signature's inputs for a serving request's raw feature spec (FixedLenFeature:
    required; VarLenFeature: optional), sorted by name; `formats`: the spec's number formats."""
    import tensorflow as tf

    inputs = []
    for name in sorted(raw_feature_spec):
        feature = raw_feature_spec[name]
        kind = {tf.float32: "float", tf.int64: "int", tf.string: "string"}[feature.dtype]
        inputs.append(FeatureInput(name, kind, isinstance(feature, tf.io.FixedLenFeature),
                                   (formats or {}).get(name, "")))
    return tuple(inputs)


def input_signature(inputs: tuple[FeatureInput, ...]) -> list[Any]:
    """One [batch] TensorSpec per input, named by its key."""
    import tensorflow as tf

    return [tf.TensorSpec([None], tf.dtypes.as_dtype(i.dtype), name=i.key) for i in inputs]


def to_parsed(values: dict[str, Any], inputs: tuple[FeatureInput, ...]) -> dict[str, Any]:
    """The tensors `tf.io.parse_example` gives for the same rows, from the signature's inputs."""
    import tensorflow as tf

    parsed = {}
    for feature in inputs:
        x = values[feature.name]
        if feature.required and feature.kind == "int":
            parsed[feature.name] = tf.expand_dims(x, 1)  # an int64 cannot be missing
            continue
        if feature.kind == "string":
            present = tf.not_equal(x, MISSING_STRING)
        else:
            x = _finite(x, f"serving_features: {feature.name}")
            present = tf.logical_not(tf.math.is_nan(x))
        if feature.required:
            check = tf.debugging.Assert(
                tf.reduce_all(present),
                [f"serving_features: {feature.name} is required: every instance "
                 f"needs a value (got {'an empty string' if feature.kind == 'string' else 'NaN'})"])
            with tf.control_dependencies([check]):
                parsed[feature.name] = tf.expand_dims(tf.identity(x), 1)
            continue
        if feature.kind == "int":
            x = tf.cast(tf.where(present, x, tf.zeros_like(x)), tf.int64)
        rows = tf.where(present)  # [n, 1]
        parsed[feature.name] = tf.SparseTensor(
            indices=tf.concat([rows, tf.zeros_like(rows)], axis=1),
            values=tf.boolean_mask(x, present),
            dense_shape=tf.stack([tf.shape(x, out_type=tf.int64)[0], 1]))
    return parsed


def _finite(x: Any, where: str) -> Any:
    """`x`, once no value of it is infinite: a served model refuses what training refuses
    (trainer_module/numbers.py), naming the input; NaN stays a missing value."""
    import tensorflow as tf

    check = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(tf.math.is_inf(x))),
        [f"{where} holds an infinite number: send a finite one (or NaN for no value)"])
    with tf.control_dependencies([check]):
        return tf.identity(x)


def refuse_infinite(raw: dict[str, Any]) -> dict[str, Any]:
    """Parsed tf.Example features, each float one checked by `_finite`."""
    import tensorflow as tf

    checked = {}
    for name, x in raw.items():
        if x.dtype != tf.float32:
            checked[name] = x
        elif isinstance(x, tf.SparseTensor):
            checked[name] = tf.SparseTensor(x.indices, _finite(x.values, f"examples: {name}"),
                                            x.dense_shape)
        else:
            checked[name] = _finite(x, f"examples: {name}")
    return checked


def parse_columns(frame: Any, inputs: tuple[FeatureInput, ...],
                  markers: frozenset[str] = NO_EXTRA) -> tuple[dict[str, Any], Any]:
    """The signature's columns for a table of CSV cells, and why each row cannot be scored.

    frame: a pandas DataFrame of strings ("" or NaN: an empty cell); columns beyond the inputs
    are ignored. markers: the dataset's own missing markers (`missing.folded`). Returns
    ({input name: numpy array: int64 for required ints, float64 for other numbers, object for
    strings}, a Series of reasons, "" for a good row). A bad row's values are placeholders:
    send only the good rows.

    Raises:
      ValueError: a required feature has no column at all.
    """
    import numpy as np
    import pandas as pd

    missing = [f.name for f in inputs if f.required and f.name not in frame.columns]
    if missing:
        raise ValueError(f"no column for required feature(s) {missing}: the model needs "
                         "them in every row")
    reasons = pd.Series("", index=frame.index, dtype=object)

    def note(mask: Any, text: Any) -> None:
        if mask.any():
            joined = reasons[mask].where(reasons[mask] == "", reasons[mask] + "; ")
            reasons[mask] = joined + text[mask] if isinstance(text, pd.Series) else joined + text

    columns: dict[str, Any] = {}
    for feature in inputs:
        if feature.name in frame.columns:
            cells = frame[feature.name].fillna("").astype(str).str.strip()
        else:
            cells = pd.Series("", index=frame.index, dtype=object)
        empty = cells == ""
        if feature.kind != "string":  # NA, N/A, NaN, … are gaps in a number column
            empty = empty | cells.map(lambda cell: is_missing(cell, markers))
        if feature.required:
            note(empty, f"{feature.name}: empty, but the schema requires a value")
        if feature.kind == "string":
            columns[feature.name] = cells.to_numpy(dtype=object)
            continue
        quoted = feature.name + ": " + cells.map(repr)
        if feature.format:  # "$5,993": read through the column's format
            fmt = number_format.parse_format(feature.format)
            numbers = cells.where(~empty).map(lambda cell, fmt=fmt: _formatted(cell, fmt)
                                              ).astype(np.float64)
            not_number = ~empty & numbers.isna()
            note(not_number, quoted + f" is not written as the column's format "
                                      f"{feature.format!r}")
        else:
            numbers = pd.to_numeric(cells.where(~empty), errors="coerce").astype(np.float64)
            not_number = ~empty & numbers.isna()
            note(not_number, quoted + f" is not a number (the schema's type is "
                                      f"{feature.kind.upper()})")
        infinite = ~empty & ~numbers.isna() & ~np.isfinite(numbers)
        if feature.kind == "float":  # a value float32 cannot hold is infinite in the model
            with np.errstate(over="ignore"):
                infinite |= ~empty & ~numbers.isna() & ~np.isfinite(numbers.astype(np.float32))
        note(infinite, quoted + " is not a finite number")
        if feature.kind == "int":
            whole = numbers.where(np.isfinite(numbers), 0.0)
            note(~empty & ~not_number & ~infinite & (whole % 1 != 0),
                 quoted + " is not a whole number (the schema's type is INT)")
        bad = not_number | infinite
        if feature.required and feature.kind == "int":
            # Exact for any int64, not only for what a float64 holds.
            ints = pd.to_numeric(cells.where(~(empty | bad), "0"), errors="coerce")
            columns[feature.name] = ints.fillna(0).astype(np.int64).to_numpy()
        else:
            # float64 here, whatever the input's dtype: the cast to float32 happens where the
            # values become tensors, and a JSON instance keeps the cell's decimal value.
            columns[feature.name] = numbers.where(~bad, np.nan).to_numpy(dtype=np.float64)
    return columns, reasons


def _formatted(cell: Any, fmt: Any) -> float:
    """A formatted cell's number; NaN for an empty cell or one that breaks the format."""
    if not isinstance(cell, str):
        return float("nan")
    try:
        return number_format.parse(cell, fmt)
    except ValueError:
        return float("nan")


def instance(row: dict[str, str], inputs: tuple[FeatureInput, ...]) -> dict[str, Any]:
    """A JSON instance for the signature (input keys → values) from one CSV row's cells
    ("" is an empty cell).

    Raises:
      ValueError: a cell does not parse as its feature's type, or a required one is empty;
        the message names the feature and the value.
    """
    import pandas as pd

    columns, reasons = parse_columns(pd.DataFrame([row], dtype=object), inputs)
    if reasons.iloc[0]:
        raise ValueError(reasons.iloc[0])
    keys = {i.name: i.key for i in inputs}
    return {keys[name]: values[0].item() if hasattr(values[0], "item") else values[0]
            for name, values in columns.items()}


def write_contract(export_dir: str, inputs: tuple[FeatureInput, ...], spec: Any) -> None:
    """Writes CONTRACT_FILE: the dataset, its task and label, the signature's inputs (name,
    schema type, dtype, required, missing marker) and the outputs (with class names)."""
    import json

    import tensorflow as tf

    task = spec.task_info
    label = f"{spec.label} ({spec.rule.describe()})" if spec.rule else spec.label
    contract = {
        "dataset": spec.name,
        "task": spec.task,
        "label": label,
        "classes": list(spec.classes),
        "signature": keys.FEATURES_SIGNATURE,
        # key: the input's name in the signature, distinct for distinct columns (case too).
        "inputs": [{"name": i.name, "key": i.key, "type": i.kind.upper(), "dtype": i.dtype,
                    "required": i.required, "missing": i.missing,
                    **({"format": i.format} if i.format else {})} for i in inputs],
        "outputs": [{"name": name, "meaning": meaning} for name, meaning in
                    task.output_meanings(label, spec.classes).items()],
        "prediction_key": task.prediction_key,
        # How the training CSV files were written: `make predict` reads its files alike.
        "csv": {"delimiter": spec.delimiter, "missing_values": list(spec.missing_values)},
    }
    path = f"{export_dir.rstrip('/')}/{CONTRACT_FILE}"
    tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(contract, indent=2))


def read_contract(model_dir: str) -> tuple[dict[str, Any], tuple[FeatureInput, ...]]:
    """(the contract, the signature's inputs) of an exported model folder.

    Raises:
      FileNotFoundError: the folder holds no contract (a model exported without this
        signature): export it again with the current trainer.
    """
    import json

    import tensorflow as tf

    path = f"{model_dir.rstrip('/')}/{CONTRACT_FILE}"
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path} does not exist: this model was exported without the "
                                f"{keys.FEATURES_SIGNATURE} signature; train and push it again")
    with tf.io.gfile.GFile(path) as f:
        contract = json.load(f)
    inputs = tuple(FeatureInput(i["name"], i["type"].lower(), i["required"],
                                i.get("format", "")) for i in contract["inputs"])
    return contract, inputs
