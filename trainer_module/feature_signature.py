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
import math
from typing import Any

SIGNATURE_NAME = "serving_features"
MISSING_STRING = ""


@dataclasses.dataclass(frozen=True)
class FeatureInput:
    """One input of the signature.

    name: the raw feature; kind: 'float', 'int' or 'string' (the schema's type); required:
    the schema requires a value in every row; dtype: the input tensor's dtype name.
    """

    name: str
    kind: str
    required: bool

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


def feature_inputs(raw_feature_spec: dict) -> tuple[FeatureInput, ...]:
    """The signature's inputs for a serving request's raw feature spec (FixedLenFeature:
    required; VarLenFeature: optional), sorted by name."""
    import tensorflow as tf

    inputs = []
    for name in sorted(raw_feature_spec):
        feature = raw_feature_spec[name]
        kind = {tf.float32: "float", tf.int64: "int", tf.string: "string"}[feature.dtype]
        inputs.append(FeatureInput(name, kind, isinstance(feature, tf.io.FixedLenFeature)))
    return tuple(inputs)


def input_signature(inputs: tuple[FeatureInput, ...]) -> list[Any]:
    """One [batch] TensorSpec per input, named after its feature."""
    import tensorflow as tf

    return [tf.TensorSpec([None], tf.dtypes.as_dtype(i.dtype), name=i.name) for i in inputs]


def to_parsed(values: dict[str, Any], inputs: tuple[FeatureInput, ...]) -> dict[str, Any]:
    """The tensors `tf.io.parse_example` gives for the same rows, from the signature's inputs."""
    import tensorflow as tf

    parsed = {}
    for feature in inputs:
        x = values[feature.name]
        if feature.kind == "string":
            present = tf.not_equal(x, MISSING_STRING)
        else:
            present = tf.logical_not(tf.math.is_nan(tf.cast(x, tf.float64)))
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


def instance(row: dict[str, str], inputs: tuple[FeatureInput, ...]) -> dict[str, Any]:
    """A JSON instance for the signature from a CSV row's cells (strings; "" is an empty cell).

    Raises:
      ValueError: a cell does not parse as its feature's type, or a required one is empty;
        the message names the feature and the value.
    """
    out: dict[str, Any] = {}
    for feature in inputs:
        cell = row.get(feature.name, "")
        cell = "" if cell is None else str(cell).strip()
        if cell == "":
            if feature.required:
                raise ValueError(f"{feature.name}: empty, but the schema requires a value")
            out[feature.name] = MISSING_STRING if feature.kind == "string" else math.nan
            continue
        if feature.kind == "string":
            out[feature.name] = cell
            continue
        if feature.kind == "int":
            try:  # exact, however many digits
                whole = int(cell)
            except ValueError:
                pass
            else:
                out[feature.name] = whole if feature.required else float(whole)
                continue
        try:
            number = float(cell)
        except ValueError:
            raise ValueError(f"{feature.name}: {cell!r} is not a number (the schema's type is "
                             f"{feature.kind.upper()})") from None
        if not math.isfinite(number):
            raise ValueError(f"{feature.name}: {cell!r} is not a finite number")
        if feature.kind == "int":
            if not number.is_integer():
                raise ValueError(f"{feature.name}: {cell!r} is not a whole number (the schema's "
                                 "type is INT)")
            out[feature.name] = int(number) if feature.required else number
        else:
            out[feature.name] = number
    return out
