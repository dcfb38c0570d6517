"""The one place that names the raw columns, how each is transformed, and the label.

Every other module (preprocessing, model, export, tests) derives its feature lists from here,
and tests check that these groups cover the curated schema in `schemas/` exactly.
"""

# Continuous values: missing → 0, then log1p (heavy right tails: fares up to $700) and z-score.
LOG_SCALED_FEATURES = ("fare", "trip_miles", "trip_seconds")

# Continuous values with no heavy tail: missing → mean, then z-score.
SCALED_FEATURES = ("trip_start_timestamp",)

# Quantile buckets (feature → bucket count); missing → a bucket of its own. Coordinates are
# only bucketed; fare and distance are bucketed as well as scaled, because the tip rate changes
# in steps with them (flat tips on short rides).
BUCKET_FEATURES = {
    "pickup_latitude": 16,
    "pickup_longitude": 16,
    "dropoff_latitude": 16,
    "dropoff_longitude": 16,
    "fare": 40,
    "trip_miles": 20,
}

# Small integer ranges used as categories directly: value → index in [0, size).
# (size is max value + 1; an index of `size` is the missing/out-of-range bucket.)
INTEGER_CATEGORICAL_FEATURES = {
    "trip_start_hour": 24,
    "trip_start_day": 8,
    "trip_start_month": 13,
    "pickup_community_area": 78,
    "dropoff_community_area": 78,
}

# Numeric identifiers with many values (~800 census tracts): hashed into a fixed number of
# buckets, which needs no analyzer pass; missing → a bucket of its own.
HASHED_FEATURES = {
    "pickup_census_tract": 256,
    "dropoff_census_tract": 256,
}

# Strings: vocabulary over the training split, plus OOV buckets for values first seen at
# serving time. Missing → the empty string, which gets a vocabulary entry of its own.
VOCAB_FEATURES = ("payment_type", "company")
VOCAB_TOP_K = 1000
VOCAB_OOV_BUCKETS = 10

# The label: a trip whose tip is more than 20% of its fare (the TFX taxi template's label).
LABEL_SOURCE_FEATURES = ("tips",)  # raw columns used only for the label: absent at serving time
FARE_KEY = "fare"
TIPS_KEY = "tips"
BIG_TIPPER_FRACTION = 0.2
LABEL_KEY = "big_tipper"

# Transformed output names carry this suffix so raw and transformed features never collide.
TRANSFORMED_SUFFIX = "_xf"


def transformed_name(key: str) -> str:
    return key + TRANSFORMED_SUFFIX


def bucket_name(key: str) -> str:
    return transformed_name(key + "_bucket")


def dense_float_outputs() -> tuple[str, ...]:
    """Transformed features holding one float32 value each."""
    return tuple(transformed_name(k) for k in LOG_SCALED_FEATURES + SCALED_FEATURES)


def categorical_outputs() -> tuple[str, ...]:
    """Transformed features holding one int64 category index each."""
    return (
        tuple(bucket_name(k) for k in BUCKET_FEATURES)
        + tuple(transformed_name(k) for k in INTEGER_CATEGORICAL_FEATURES)
        + tuple(transformed_name(k) for k in HASHED_FEATURES)
        + tuple(transformed_name(k) for k in VOCAB_FEATURES)
    )


def model_features() -> tuple[str, ...]:
    """Every raw feature the model sees (all columns but the label's sources)."""
    keys = LOG_SCALED_FEATURES + SCALED_FEATURES + tuple(BUCKET_FEATURES)
    keys += tuple(INTEGER_CATEGORICAL_FEATURES) + tuple(HASHED_FEATURES) + VOCAB_FEATURES
    return tuple(dict.fromkeys(keys))


def all_raw_columns() -> tuple[str, ...]:
    return model_features() + LABEL_SOURCE_FEATURES
