"""preprocessing_fn on a few hand-made rows, run by real tf.Transform on Beam."""

import numpy as np
import pytest

import taxi_rows
from conftest import analyze, transform
from trainer_module import features


def _rows() -> list[dict[str, str]]:
    rows = taxi_rows.read_rows(40)
    # Row 0: every optional column missing. Row 1: values the training rows never had.
    for key in ("trip_seconds", "pickup_latitude", "pickup_longitude", "dropoff_latitude",
                "dropoff_longitude", "pickup_community_area", "dropoff_community_area",
                "pickup_census_tract", "dropoff_census_tract", "company"):
        rows[0][key] = ""
    rows[1]["company"] = "A Company Never Seen"
    rows[1]["trip_start_hour"] = "23"
    rows[2]["fare"], rows[2]["tips"] = "10.0", "2.5"   # 25%: big tipper
    rows[3]["fare"], rows[3]["tips"] = "10.0", "2.0"   # exactly 20%: not a big tipper
    return rows


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    rows = _rows()
    transform_dir = analyze(rows, str(tmp_path_factory.mktemp("few")))
    columns = transform(rows, transform_dir)
    instances = [{k: v[i] for k, v in columns.items()} for i in range(len(rows))]
    assert len(instances) == len(rows)
    return instances, transform_dir


def test_every_output_is_a_dense_numeric_scalar(transformed):
    import tensorflow_transform as tft

    instances, transform_dir = transformed
    spec = tft.TFTransformOutput(transform_dir).transformed_feature_spec()
    expected = set(features.dense_float_outputs() + features.categorical_outputs())
    assert set(spec) == expected | {features.LABEL_KEY}
    for name, feature_spec in spec.items():
        assert type(feature_spec).__name__ == "FixedLenFeature", name
        assert list(feature_spec.shape) == [], name
        assert feature_spec.dtype.name in ("float32", "int64"), name
    for instance in instances:
        assert set(instance) == set(spec)
        for name in spec:
            assert np.ndim(instance[name]) == 0 and np.isfinite(instance[name]), name


def test_missing_values_are_filled_with_their_own_bucket(transformed):
    instances, _ = transformed
    first = instances[0]
    for key, num_buckets in features.BUCKET_FEATURES.items():
        if key in ("fare", "trip_miles"):
            continue  # required columns, never missing
        assert first[features.bucket_name(key)] == num_buckets, key
    for key, size in features.INTEGER_CATEGORICAL_FEATURES.items():
        if key.endswith("community_area"):
            assert first[features.transformed_name(key)] == size, key
    for key, num_buckets in features.HASHED_FEATURES.items():
        assert first[features.transformed_name(key)] == num_buckets, key
    assert first[features.transformed_name("trip_seconds")] < 0  # 0 s, below the mean


def test_category_ids_stay_in_range(transformed):
    instances, _ = transformed
    for instance in instances:
        for key, num_buckets in features.BUCKET_FEATURES.items():
            assert 0 <= instance[features.bucket_name(key)] <= num_buckets
        for key, size in features.INTEGER_CATEGORICAL_FEATURES.items():
            assert 0 <= instance[features.transformed_name(key)] <= size
    assert instances[1][features.transformed_name("trip_start_hour")] == 23


def test_strings_unseen_in_analysis_get_an_oov_bucket(transformed):
    import tensorflow as tf
    import tensorflow_transform as tft

    _, transform_dir = transformed
    output = tft.TFTransformOutput(transform_dir)
    row = dict(taxi_rows.read_rows(1)[0], company="Brand New Cab Co", payment_type="Bitcoin")
    raw = tf.io.parse_example(
        [taxi_rows.to_example(row).SerializeToString()], output.raw_feature_spec())
    result = output.transform_features_layer()(raw)
    for key in features.VOCAB_FEATURES:
        vocab_size = output.vocabulary_size_by_name(key)
        index = int(result[features.transformed_name(key)][0])
        assert vocab_size <= index < vocab_size + features.VOCAB_OOV_BUCKETS, key


def test_scaled_values_are_z_scores(transformed):
    instances, _ = transformed
    fares = np.array([i[features.transformed_name("fare")] for i in instances])
    assert abs(fares.mean()) < 1e-4
    assert abs(fares.std() - 1) < 1e-3


def test_label_is_tip_over_twenty_percent_of_fare(transformed):
    instances, _ = transformed
    rows = _rows()
    for row, instance in zip(rows, instances, strict=True):
        expected = int(float(row["tips"]) > 0.2 * float(row["fare"]))
        assert instance[features.LABEL_KEY] == expected
    assert instances[2][features.LABEL_KEY] == 1
    assert instances[3][features.LABEL_KEY] == 0
