"""The table of feature kinds (a dataset spec's roles), each defined once.

A kind says which raw column types it accepts, which parameters it takes, the transformed
features it writes (name, float value or category id, embedding rows), and its Transform code.
`preprocessing_fn`, the model's inputs, the embedding tables and the spec's checks are loops
over this table, so a new kind is one entry here. TensorFlow is imported inside the transforms
only: the pipeline checks specs against this table before TensorFlow loads.

Every output is dense with shape [batch] (a TPU compiles only static shapes), float32 values or
int64 ids in [0, rows). Missing values never reach the model as gaps: numeric kinds impute the
mean and add an is-missing indicator; categorical kinds give missing values an id of their own.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

from trainer_module.tf_names import tf_name

# Transformed names carry this suffix, so raw and transformed features never collide.
TRANSFORMED_SUFFIX = "_xf"
FLOAT = "float"
CATEGORY = "category"

# Schema types (tensorflow_metadata FeatureType names) a role may read.
INT, FLOAT_TYPE, BYTES = "INT", "FLOAT", "BYTES"
NUMERIC_TYPES = (INT, FLOAT_TYPE)


def transformed_name(key: str) -> str:
    return key + TRANSFORMED_SUFFIX


# Transform writes the model's inputs packed: per example, one vector of all FLOAT outputs and
# one of all CATEGORY ids, ordered by name (DatasetSpec.packed_inputs). Parsing a tf.Example
# costs per feature it holds, so two vectors parse as fast as the GZIP files decompress, where
# one feature per input made parsing the cold input epoch's bottleneck (`make bench`).
PACKED_NAMES = {FLOAT: transformed_name("model_values"), CATEGORY: transformed_name("model_ids")}


@dataclasses.dataclass(frozen=True)
class Param:
    """A role parameter: its default (None: required) and what a valid value is."""

    default: Any
    check: Callable[[Any], bool]
    expected: str


def _whole(minimum: int) -> Param:
    return Param(None, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
                 f"a whole number >= {minimum}")


def _whole_default(default: int, minimum: int) -> Param:
    return dataclasses.replace(_whole(minimum), default=default)


_RANGE = Param(None, lambda v: (isinstance(v, list | tuple) and len(v) == 2
                                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
                                and v[0] <= v[1]),
               "[low, high], two whole numbers with low <= high")


@dataclasses.dataclass(frozen=True)
class Output:
    name: str
    kind: str  # FLOAT (a float32 value) or CATEGORY (an id with `rows` embedding rows)
    # CATEGORY ids of one group (a text's token positions) share one embedding table, and
    # the model averages their vectors over the ids that are not 0 (padding).
    group: str = ""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One role. outputs(column, params) → the transformed features it writes;
    transform(x, column, params) → their tensors; rows(column, params, vocab_size) → embedding
    rows of its CATEGORY output (vocab_size reads a vocabulary's size from Transform's
    output)."""

    name: str
    types: tuple[str, ...]
    params: dict[str, Param]
    outputs: Callable[[str, dict], tuple[Output, ...]]
    transform: Callable[[Any, str, dict], dict[str, Any]] | None
    rows: Callable[[str, dict, Callable[[str], int]], int] = lambda *_: 0


# --- transforms (TensorFlow loads only when Transform runs them) -----------------------------

def to_dense(x: Any, default: Any) -> tuple[Any, Any]:
    """(values [batch], present [batch]) of a feature with at most one value per row.

    Required columns arrive dense ([batch, 1], from `shape { dim { size: 1 } }` in the schema);
    optional ones arrive sparse, and their gaps are filled with `default`.
    """
    import tensorflow as tf

    if isinstance(x, tf.SparseTensor):
        # The shape is set, not reset: tf.sparse.reset_shape adds about 25 checking ops per
        # feature to the graph (45 ops against 20). A row with a second value still fails, in
        # sparse.to_dense's own index check.
        shape = tf.stack([tf.shape(x, out_type=tf.int64)[0], tf.constant(1, tf.int64)])
        present = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.bool), shape), False)
        values = tf.sparse.to_dense(tf.SparseTensor(x.indices, x.values, shape),
                                    default_value=tf.cast(default, x.dtype))
        return tf.squeeze(values, axis=1), tf.squeeze(present, axis=1)
    values = tf.reshape(x, [-1])
    return values, tf.ones_like(values, tf.bool)


def _numeric(log: bool) -> Callable[[Any, str, dict], dict[str, Any]]:
    def transform(x: Any, column: str, params: dict) -> dict[str, Any]:
        import tensorflow as tf

        values, present = to_dense(x, 0)
        values = tf.cast(values, tf.float32)
        if log:
            values = tf.math.log1p(tf.maximum(values, 0.0))
        return _number(values, present, column, params["bins"])

    return transform


def _number(values: Any, present: Any, column: str, bins: int) -> dict[str, Any]:
    """A number's outputs from its dense float values and where they are present."""
    import tensorflow as tf
    import tensorflow_transform as tft

    # Gaps take the mean, so they z-score to 0; the indicator lets the model tell an imputed
    # value from a real one.
    outputs = {transformed_name(column): _z_score(values, present),
               _missing_name(column): 1.0 - tf.cast(present, tf.float32)}
    if bins:
        observed = tf.boolean_mask(values, present)
        # One bin has no inner edge (and tft.quantiles asks for 2 or more): it is the value's
        # place between the column's least and greatest.
        inner = (tft.quantiles(observed, bins, epsilon=0.01)[0] if bins > 1
                 else tf.zeros([0], tf.float32))
        encoded = piecewise_linear(values, inner, *_value_range(observed))
        # One masking op and one unstack for all bins: an op per bin would put hundreds more
        # ops in the graph, which Transform traces, saves, loads and runs.
        encoded = tf.where(present[:, tf.newaxis], encoded, tf.zeros_like(encoded))
        outputs.update(zip(_bin_names(column, bins), tf.unstack(encoded, bins, axis=1),
                           strict=True))
    return outputs


# Every analyzer call adds its own chain of Beam transforms and graph bindings to Transform,
# whatever the data's size. tft.mean and tft.var each run TFT's mean-and-variance combiner,
# tft.min and tft.max each its min-and-max one: the two helpers below take both results from
# one analyzer (the taxi spec's Transform: 20 analyzers instead of 28).

def _z_score(values: Any, present: Any) -> Any:
    """[batch] z-scores of `values` [batch] against the mean and variance of its `present`
    values; 0 where a value is absent. A constant column stays centered (0)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    scaled = tft.scale_to_z_score(tf.boolean_mask(values, present))
    return tf.scatter_nd(tf.where(present), scaled, tf.shape(values, out_type=tf.int64))


def _value_range(observed: Any) -> tuple[Any, Any]:
    """(min, max) over the dataset of `observed` [n], from one analyzer: the maxima of
    -observed and observed."""
    import tensorflow as tf
    import tensorflow_transform as tft

    minus_low, high = tf.unstack(
        tft.max(tf.stack([-observed, observed], axis=1), reduce_instance_dims=False))
    return -minus_low, high


# Quantile bins of a number's piecewise-linear encoding (Gorishniy et al., 2022, "On
# Embeddings for Numerical Features in Tabular Deep Learning"): beside its z-score, a number
# becomes `bins` values, each the share of one quantile bin the value has passed (0 below the
# bin, 1 above it, linear inside). An MLP reads thresholds off them as trees do, where a single
# z-score gives its first layer only one slope per feature.
NUMERIC_BINS = 16


def piecewise_linear(values: Any, boundaries: Any, low: Any, high: Any) -> Any:
    """[batch, len(boundaries) + 1] encoding of `values` [batch] over the bins that the
    sorted inner `boundaries` cut [low, high] into. A value at or past a bin's right edge has
    passed all of it (exactly 1, however the division rounds on the CPU at hand), so a bin of
    zero width (repeated quantiles of a column with few values) is a step at its edge, and a
    bin is entered only once every bin below it is full."""
    import tensorflow as tf

    edges = tf.concat([tf.reshape(low, [1]), tf.cast(boundaries, tf.float32),
                       tf.reshape(high, [1])], axis=0)
    left, right = edges[:-1], edges[1:]
    width = right - left
    x = tf.expand_dims(values, 1)
    inside = tf.clip_by_value((x - left) / tf.where(width > 0, width, tf.ones_like(width)),
                              0.0, 1.0)
    return tf.where(x >= right, tf.ones_like(inside), inside)


def _missing_name(column: str) -> str:
    return transformed_name(column + "_missing")


def _bin_names(column: str, bins: int) -> list[str]:
    return [transformed_name(f"{column}_bin{i:02d}") for i in range(bins)]


def _numeric_outputs(column: str, params: dict) -> tuple[Output, ...]:
    return (Output(transformed_name(column), FLOAT), Output(_missing_name(column), FLOAT),
            *(Output(name, FLOAT) for name in _bin_names(column, params["bins"])))


def _quantile(x: Any, column: str, params: dict) -> dict[str, Any]:
    import tensorflow as tf
    import tensorflow_transform as tft

    n = params["buckets"]
    values, present = to_dense(x, 0)
    values = tf.cast(values, tf.float32)
    boundaries = tft.quantiles(tf.boolean_mask(values, present), n, epsilon=0.01)
    buckets = tft.apply_buckets(values, boundaries)
    return {_bucket_name(column): tf.where(present, buckets, tf.constant(n, tf.int64))}


def _bucket_name(column: str) -> str:
    return transformed_name(column + "_bucket")


def _integer(x: Any, column: str, params: dict) -> dict[str, Any]:
    import tensorflow as tf

    low, high = params["range"]
    values, present = to_dense(x, low - 1)
    ids = tf.cast(values, tf.int64) - low
    size = high - low + 1
    in_range = present & (ids >= 0) & (ids < size)
    outputs = {transformed_name(column): tf.where(in_range, ids, tf.constant(size, tf.int64))}
    if params["bins"]:
        # The column read once: the number comes from the same dense values as the id.
        outputs.update(_number(tf.cast(values, tf.float32), present, _number_column(column),
                               params["bins"]))
    return outputs


def _integer_outputs(column: str, params: dict) -> tuple[Output, ...]:
    number = _numeric_outputs(_number_column(column), params) if params["bins"] else ()
    return (Output(transformed_name(column), CATEGORY), *number)


def _number_column(column: str) -> str:
    """The name an integer's value as a number goes by, beside its id's."""
    return column + "_number"


def _hash_ids(text: Any, present: Any, buckets: int) -> Any:
    """Each text's hash bucket in [0, buckets); a missing one, id `buckets`."""
    import tensorflow as tf

    return tf.where(present, tf.strings.to_hash_bucket_fast(text, buckets),
                    tf.constant(buckets, tf.int64))


def _hashed(x: Any, column: str, params: dict) -> dict[str, Any]:
    import tensorflow as tf

    values, present = to_dense(x, "" if x.dtype == tf.string else 0)
    text = values if values.dtype == tf.string else tf.strings.as_string(values)
    return {transformed_name(column): _hash_ids(text, present, params["buckets"])}


def _vocabulary(x: Any, column: str, params: dict) -> dict[str, Any]:
    import tensorflow as tf
    import tensorflow_transform as tft

    # Missing → the empty string, which gets a vocabulary entry of its own when it occurs.
    values, _ = to_dense(x, "" if x.dtype == tf.string else 0)
    if values.dtype != tf.string:
        values = tf.strings.as_string(values)
    return {transformed_name(column): tft.compute_and_apply_vocabulary(
        values, top_k=params["top_k"], num_oov_buckets=params["oov_buckets"],
        vocab_filename=vocabulary_name(column))}


def vocabulary_name(column: str) -> str:
    """The vocabulary's file and scope name in the Transform graph (a TensorFlow name)."""
    return tf_name(column)


# --- dates and timestamps --------------------------------------------------------------------

# A datetime's periodic parts, as (name, period, first value): each becomes a sine and a
# cosine, so December sits beside January and 23:00 beside midnight.
_PERIODIC = (("month", 12.0, 1.0), ("weekday", 7.0, 0.0), ("day", 31.0, 1.0),
             ("hour", 24.0, 0.0))
_SECONDS_PER_DAY = 86400.0


def _datetime_names(column: str) -> list[str]:
    names = [transformed_name(f"{column}_year"), transformed_name(f"{column}_elapsed")]
    for part, _, _ in _PERIODIC:
        names += [transformed_name(f"{column}_{part}_{wave}") for wave in ("sin", "cos")]
    return names


def _instant_name(column: str) -> str:
    """The name of a datetime's exact value as an id (its `instant_buckets`)."""
    return transformed_name(f"{column}_instant")


def _datetime_outputs(column: str, params: dict) -> tuple[Output, ...]:
    instant = (Output(_instant_name(column), CATEGORY),) if params["instant_buckets"] else ()
    return (*(Output(n, FLOAT) for n in _datetime_names(column)),
            Output(_missing_name(column), FLOAT), *instant)


def days_from_civil(year: Any, month: Any, day: Any) -> Any:
    """Days since 1970-01-01 of a proleptic Gregorian date (float tensors of whole numbers;
    H. Hinnant's days_from_civil)."""
    import tensorflow as tf

    year = year - tf.cast(month <= 2, tf.float32)
    era = tf.math.floor(year / 400.0)
    year_of_era = year - era * 400.0
    day_of_year = tf.math.floor((153.0 * (month + tf.where(month > 2, -3.0, 9.0)) + 2.0) / 5.0) \
        + day - 1.0
    day_of_era = (year_of_era * 365.0 + tf.math.floor(year_of_era / 4.0)
                  - tf.math.floor(year_of_era / 100.0) + day_of_year)
    return era * 146097.0 + day_of_era - 719468.0


def _datetime(x: Any, column: str, params: dict) -> dict[str, Any]:
    import math

    import tensorflow as tf

    from trainer_module import datetimes

    compiled = datetimes.pattern(params["format"])
    values, present = to_dense(x, "")
    values = tf.strings.strip(values)
    matched = present & tf.strings.regex_full_match(values, compiled.regex)

    def field(name: str) -> Any:
        if name not in compiled.groups:
            return tf.zeros_like(values, tf.float32)
        # "0" + the group: a number also where the group is empty; an unmatched cell is "0"
        # (it stays unchanged by the replacement, and to_number would fail on it).
        own = tf.strings.regex_replace(values, compiled.regex, f"0\\{compiled.groups[name]}")
        return tf.strings.to_number(tf.where(matched, own, "0"), tf.float32)

    year, month, day, hour, minute, second = (field(f) for f in "YmdHMS")
    ok = (matched & (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31) & (hour < 24)
          & (minute < 60) & (second < 61))
    days = days_from_civil(year, tf.where(ok, month, 1.0), tf.where(ok, day, 1.0))
    local = days + (hour * 3600.0 + minute * 60.0 + second) / _SECONDS_PER_DAY
    utc = local
    if "sign" in compiled.groups:
        sign = tf.strings.regex_replace(values, compiled.regex, f"\\{compiled.groups['sign']}")
        offset = (field("off_h") * 60.0 + field("off_m")) / (24.0 * 60.0)
        utc = local - tf.where(tf.equal(sign, "-"), -offset, offset)
    start, end = _value_range(tf.boolean_mask(utc, ok))
    periodic = {"month": month, "weekday": tf.math.floormod(days + 3.0, 7.0), "day": day,
                "hour": hour + minute / 60.0}
    parts = [_z_score(year, ok), (utc - start) / tf.maximum(end - start, 1.0)]
    for name, period, first in _PERIODIC:
        angle = 2.0 * math.pi * (periodic[name] - first) / period
        parts += [tf.sin(angle), tf.cos(angle)]
    zero = tf.zeros_like(year)
    outputs = {name: tf.where(ok, part, zero)
               for name, part in zip(_datetime_names(column), parts, strict=True)}
    outputs[_missing_name(column)] = 1.0 - tf.cast(ok, tf.float32)
    if params["instant_buckets"]:
        # The value's text, hashed: rows that share an instant share an id.
        outputs[_instant_name(column)] = _hash_ids(values, present, params["instant_buckets"])
    return outputs


def _check_format(value: Any) -> bool:
    from trainer_module import datetimes

    if not isinstance(value, str):
        return False
    try:
        datetimes.pattern(value)
    except datetimes.FormatError:
        return False
    return True


# --- free text -------------------------------------------------------------------------------

def _token_names(column: str, params: dict) -> list[str]:
    return [transformed_name(f"{column}_token{i:03d}") for i in range(params["max_tokens"])]


def _text_outputs(column: str, params: dict) -> tuple[Output, ...]:
    return tuple(Output(name, CATEGORY, group=column) for name in _token_names(column, params))


def _text(x: Any, column: str, params: dict) -> dict[str, Any]:
    import tensorflow as tf

    values, _ = to_dense(x, "")
    words = tf.strings.split(tf.strings.regex_replace(tf.strings.lower(values), r"[^\w]+", " "))
    # Ids 1..buckets; 0 pads a text shorter than max_tokens (and is all of a missing one).
    ids = tf.strings.to_hash_bucket_fast(words, params["buckets"]) + 1
    dense = ids.to_tensor(default_value=0, shape=[None, params["max_tokens"]])
    return {name: dense[:, i] for i, name in enumerate(_token_names(column, params))}


def _one(suffix_name: Callable[[str], str]) -> Callable[[str, dict], tuple[Output, ...]]:
    return lambda column, params: (Output(suffix_name(column), CATEGORY),)


KINDS: dict[str, Kind] = {k.name: k for k in (
    # z-score, plus `bins` piecewise-linear quantile bins (0: none); gaps → the mean (bins: 0),
    # plus an is-missing indicator.
    Kind("zscore", NUMERIC_TYPES, {"bins": _whole_default(NUMERIC_BINS, 0)}, _numeric_outputs,
         _numeric(log=False)),
    # log(1 + max(x, 0)), then as zscore (heavy right tails).
    Kind("log_zscore", NUMERIC_TYPES, {"bins": _whole_default(NUMERIC_BINS, 0)},
         _numeric_outputs, _numeric(log=True)),
    # Quantile bucket id in [0, buckets); missing → id `buckets`.
    Kind("quantile", NUMERIC_TYPES, {"buckets": _whole(2)},
         _one(_bucket_name), _quantile, lambda column, p, _: p["buckets"] + 1),
    # The value itself as a category id (value - low); missing or outside range → one id.
    # With `bins`, also the value as a number (as zscore with those bins): a count's order,
    # which its ids do not carry.
    Kind("integer", (INT,), {"range": _RANGE, "bins": _whole_default(0, 0)},
         _integer_outputs, _integer, lambda column, p, _: p["range"][1] - p["range"][0] + 2),
    # Vocabulary of the training split (top_k most frequent) plus OOV buckets for values first
    # seen at serving time; missing → the empty string.
    Kind("vocabulary", (BYTES, INT), {"top_k": _whole_default(1000, 1),
                                      "oov_buckets": _whole_default(10, 1)},
         _one(transformed_name), _vocabulary,
         lambda column, p, vocab_size: vocab_size(vocabulary_name(column)) + p["oov_buckets"]),
    # Hash bucket of the value's text (ids, high cardinality; no analyzer pass); missing → id
    # `buckets`.
    Kind("hashed", (BYTES, INT), {"buckets": _whole(2)},
         _one(transformed_name), _hashed, lambda column, p, _: p["buckets"] + 1),
    # A date or timestamp (ISO-8601, or the strftime-style `format`): year, elapsed time since
    # the training minimum, month, weekday, day and hour as sine and cosine; unparseable or
    # missing → all 0 and the is-missing indicator. With `instant_buckets`, also the exact
    # value's text hashed into that many ids (missing → id `instant_buckets`): rows that
    # share an instant, such as one event recorded on several rows, share an id.
    Kind("datetime", (BYTES,), {"format": Param("", _check_format,
                                                "a format of %Y %m %d %H %M %S fields, or \"\""
                                                " for ISO-8601"),
                                "instant_buckets": _whole_default(0, 0)},
         _datetime_outputs, _datetime, lambda column, p, _: p["instant_buckets"] + 1),
    # Lowercased words hashed into `buckets` ids, padded or cut to `max_tokens` positions
    # (static shapes), averaged through one embedding of `dim` wide; missing → no words.
    Kind("text", (BYTES,), {"buckets": _whole_default(10_000, 2),
                            "max_tokens": _whole_default(32, 1), "dim": _whole_default(16, 1)},
         _text_outputs, _text, lambda column, p, _: p["buckets"] + 1),
    # Not used by the model.
    Kind("ignore", (INT, FLOAT_TYPE, BYTES), {}, lambda column, params: (), None),
)}
