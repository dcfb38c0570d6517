"""The spec's preprocessing_fn on a few hand-made rows, run by real tf.Transform on Beam."""

import numpy as np
import pytest

from conftest import analyze, transform, unpacked
from dataset_rows import PENGUINS, TAXI
from trainer_module.features import CATEGORY, FLOAT, PACKED_NAMES, transformed_name

TAXI_OPTIONAL = ("trip_seconds", "pickup_latitude", "pickup_longitude", "dropoff_latitude",
                 "dropoff_longitude", "pickup_community_area", "dropoff_community_area",
                 "pickup_census_tract", "dropoff_census_tract", "company")


def _rows() -> list[dict[str, str]]:
    rows = TAXI.read_rows(40)
    # Row 0: every optional column missing. Row 1: values the training rows never had.
    for key in TAXI_OPTIONAL:
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
    columns = unpacked(transform(rows, transform_dir))
    instances = [{k: v[i] for k, v in columns.items()} for i in range(len(rows))]
    assert len(instances) == len(rows)
    return instances, transform_dir


def _features(role: str):
    return [f for f in TAXI.spec.features if f.role == role]


def test_inputs_are_packed_by_kind_into_dense_vectors(transformed):
    import tensorflow_transform as tft

    instances, transform_dir = transformed
    spec = tft.TFTransformOutput(transform_dir).transformed_feature_spec()
    outputs = TAXI.spec.model_outputs()
    floats = sum(o.kind == FLOAT for o in outputs)
    # One float vector and one id vector hold every model input; the label is a scalar.
    assert {name: (list(s.shape), s.dtype.name) for name, s in spec.items()} == {
        PACKED_NAMES[FLOAT]: ([floats], "float32"),
        PACKED_NAMES[CATEGORY]: ([len(outputs) - floats], "int64"),
        TAXI.spec.label_key: ([], "int64")}
    assert all(type(s).__name__ == "FixedLenFeature" for s in spec.values())
    for instance in instances:
        assert set(instance) == {o.name for o in outputs} | {TAXI.spec.label_key}
        for name, value in instance.items():
            assert np.ndim(value) == 0 and np.isfinite(value), name


def test_missing_categories_get_an_id_of_their_own(transformed):
    first = transformed[0][0]
    for feature in _features("quantile") + _features("hashed"):
        if feature.column in TAXI_OPTIONAL:
            [out] = feature.outputs()
            assert first[out.name] == feature.params["buckets"], feature.column
    for feature in _features("integer"):
        if feature.column in TAXI_OPTIONAL:
            low, high = feature.params["range"]
            assert first[transformed_name(feature.column)] == high - low + 1, feature.column


def test_missing_numbers_are_imputed_with_the_mean_and_flagged(transformed):
    instances, _ = transformed
    value, flag = transformed_name("trip_seconds"), transformed_name("trip_seconds_missing")
    # The mean of the present values z-scores to 0; only row 0 is flagged.
    assert abs(instances[0][value]) < 1e-5
    assert instances[0][flag] == 1.0
    assert all(i[flag] == 0.0 for i in instances[1:])
    # The present values themselves are z-scored with their own mean and spread.
    present = np.array([i[value] for i in instances[1:]])
    assert abs(present.mean()) < 1e-4
    assert abs(present.std() - 1) < 1e-3
    # A required column is never flagged.
    assert all(i[transformed_name("fare_missing")] == 0.0 for i in instances)


def test_quantile_bins_encode_each_number_piecewise_linearly(transformed):
    """Each bin holds the share of it a value has passed: 1 for the bins below the value, 0
    above, so a larger value never has less; a missing value has every bin 0."""
    instances, _ = transformed
    for feature in TAXI.spec.features:
        bins = feature.params.get("bins")
        if not bins:
            continue
        names = [o.name for o in feature.outputs()][2:]
        assert len(names) == bins, feature.column
        encoded = np.array([[i[name] for name in names] for i in instances])
        values = np.array([i[transformed_name(feature.column)] for i in instances])
        present = np.array([i[transformed_name(feature.column + "_missing")] == 0.0
                            for i in instances])
        assert ((encoded >= 0) & (encoded <= 1)).all(), feature.column
        # A bin is only entered once every bin below it is full.
        assert (np.diff(encoded, axis=1) <= 0).all(), feature.column
        assert (encoded[~present] == 0).all(), feature.column
        order = np.argsort(values[present], kind="stable")
        assert (np.diff(encoded[present].sum(axis=1)[order]) >= -1e-6).all(), feature.column
        assert encoded[present].sum(axis=1).max() > encoded[present].sum(axis=1).min()
        # The bins span the present values' range: the largest has passed every bin.
        np.testing.assert_array_equal(encoded[present][values[present].argmax()], 1.0)


def test_a_second_value_in_an_optional_column_fails_the_transform(transformed):
    """Optional columns hold at most one value (the schema's value_count); a request that
    sends two is refused by the transform graph, not silently cut to one."""
    import tensorflow as tf
    import tensorflow_transform as tft

    _, transform_dir = transformed
    example = TAXI.to_example(_rows()[5], False)
    example.features.feature["trip_seconds"].int64_list.value[:] = [60, 120]
    output = tft.TFTransformOutput(transform_dir)
    raw = tf.io.parse_example([example.SerializeToString()], output.raw_feature_spec())
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of bounds"):
        output.transform_features_layer()(raw)


def test_category_ids_stay_in_range(transformed):
    instances, _ = transformed
    outputs = [(f, o) for f in TAXI.spec.features for o in f.outputs() if o.kind == CATEGORY]
    for instance in instances:
        for feature, out in outputs:
            if feature.role != "vocabulary":
                rows = feature.kind.rows(feature.column, feature.params, None)
                assert 0 <= instance[out.name] < rows, out.name
    assert instances[1][transformed_name("trip_start_hour")] == 23


def test_strings_unseen_in_analysis_get_an_oov_bucket(transformed):
    import tensorflow as tf
    import tensorflow_transform as tft

    _, transform_dir = transformed
    output = tft.TFTransformOutput(transform_dir)
    row = dict(TAXI.read_rows(1)[0], company="Brand New Cab Co", payment_type="Bitcoin")
    raw = tf.io.parse_example(TAXI.serialized([row]), output.raw_feature_spec())
    result = unpacked(output.transform_features_layer()(raw))
    for feature in _features("vocabulary"):
        vocab_size = output.vocabulary_size_by_name(feature.column)
        index = int(result[transformed_name(feature.column)][0])
        assert vocab_size <= index < vocab_size + feature.params["oov_buckets"], feature.column


def test_scaled_values_are_z_scores(transformed):
    instances, _ = transformed
    fares = np.array([i[transformed_name("fare")] for i in instances])
    assert abs(fares.mean()) < 1e-4
    assert abs(fares.std() - 1) < 1e-3


def test_label_rule_is_tip_over_twenty_percent_of_fare(transformed):
    instances, _ = transformed
    key = TAXI.spec.label_key
    for row, instance in zip(_rows(), instances, strict=True):
        assert instance[key] == int(float(row["tips"]) > 0.2 * float(row["fare"]))
    assert instances[2][key] == 1
    assert instances[3][key] == 0


def test_multiclass_label_is_the_class_index(tmp_path):
    rows = PENGUINS.read_rows()[::20]
    columns = transform(rows, analyze(rows, str(tmp_path), PENGUINS), PENGUINS)
    expected = [PENGUINS.spec.classes.index(r["species"]) for r in rows]
    assert columns[PENGUINS.spec.label_key].tolist() == expected
    assert set(expected) == {0, 1, 2}


def test_rows_without_a_label_weigh_nothing_when_the_spec_drops_them(tmp_path):
    from google.protobuf import text_format

    from dataset_rows import DatasetRows
    from pipeline import datasets

    folder = tmp_path / "penguins-drop"
    folder.mkdir()
    schema = PENGUINS.schema
    species = next(f for f in schema.feature if f.name == "species")
    species.ClearField("shape")
    species.presence.min_fraction = 0.0
    species.value_count.min, species.value_count.max = 0, 1
    (folder / datasets.SCHEMA_FILE).write_text(text_format.MessageToString(schema))
    spec_text = open(PENGUINS.spec_path, encoding="utf-8").read()
    (folder / datasets.SPEC_FILE).write_text(spec_text.replace('missing = "stop"',
                                                               'missing = "drop"'))
    dataset = DatasetRows(str(folder), PENGUINS.csv_path)
    rows = PENGUINS.read_rows()[::20]
    rows[1]["species"] = ""
    columns = transform(rows, analyze(rows, str(tmp_path / "tft"), dataset), dataset)
    spec = dataset.spec
    assert columns[spec.label_weight_key].tolist() == [0.0 if i == 1 else 1.0
                                                      for i in range(len(rows))]
    assert columns[spec.label_key][1] == 0  # a valid id, weighing nothing
    assert columns[spec.label_key][0] == spec.classes.index(rows[0]["species"])


@pytest.mark.parametrize("bins", [1, 2])
def test_an_integer_with_bins_is_also_a_number(tmp_path, bins):
    """`bins` on an integer adds its value as a number (z-score, bins) beside its id, so the
    model sees a count's order; the id is the same as without them. One bin, which has no
    inner edge to take from the quantiles, is the value's place in the column's range."""
    from google.protobuf import text_format

    from dataset_rows import DatasetRows
    from pipeline import datasets

    folder = tmp_path / "penguins-years"
    folder.mkdir()
    (folder / datasets.SCHEMA_FILE).write_text(text_format.MessageToString(PENGUINS.schema))
    spec_text = open(PENGUINS.spec_path, encoding="utf-8").read()
    (folder / datasets.SPEC_FILE).write_text(spec_text.replace(
        'year = { role = "integer", range = [2007, 2009]',
        f'year = {{ role = "integer", range = [2007, 2009], bins = {bins}', 1))
    dataset = DatasetRows(str(folder), PENGUINS.csv_path)
    [year] = [f for f in dataset.spec.features if f.column == "year"]
    names = [o.name for o in year.outputs()]
    assert [o.kind for o in year.outputs()] == [CATEGORY] + [FLOAT] * (2 + bins)
    assert names == [transformed_name(n) for n in (
        "year", "year_number", "year_number_missing",
        *(f"year_number_bin{i:02d}" for i in range(bins)))]
    rows = PENGUINS.read_rows()[::10]
    columns = unpacked(transform(rows, analyze(rows, str(tmp_path / "tft"), dataset), dataset),
                       dataset)
    years = np.array([int(r["year"]) for r in rows])
    assert columns[names[0]].tolist() == (years - 2007).tolist()
    number = columns[names[1]]
    # float32 statistics of values near 2008: equal to about 1e-5.
    np.testing.assert_allclose(number, (years - years.mean()) / years.std(), atol=1e-4)
    assert (columns[names[2]] == 0).all()
    passed = sum(columns[name] for name in names[3:])
    if bins == 1:
        # [2007, 2009] whole: 2008 has passed half of it.
        np.testing.assert_allclose(passed, (years - 2007) / 2, atol=1e-6)
    else:
        # Two bins over [2007, 2009] cut at the median year: 2007 has passed neither, 2009 both.
        assert passed[years == 2007].max() == 0 and (passed[years == 2009] == 2).all()


@pytest.mark.parametrize("kind, params, dtype", [
    ("zscore", {"bins": 16}, "float32"), ("log_zscore", {"bins": 0}, "float32"),
    ("datetime", {"format": "", "instant_buckets": 0}, "string")])
def test_each_statistic_of_a_column_is_one_analyzer(kind, params, dtype):
    """Mean and variance come from one analyzer, and so do min and max: every analyzer adds
    its own Beam transforms to Transform, whatever the data's size."""
    import tensorflow as tf
    from tensorflow_transform import analyzer_nodes

    from trainer_module.features import KINDS

    graph = tf.Graph()
    with graph.as_default():
        KINDS[kind].transform(tf.compat.v1.sparse_placeholder(dtype, [None, 1]), "c", params)
    analyzers = {id(sink.future.parent_operation)
                 for sink in graph.get_collection(analyzer_nodes.TENSOR_REPLACEMENTS)}
    # z-score, and with bins the quantiles and the range; a datetime's range and year z-score.
    assert len(analyzers) == {"zscore": 3, "log_zscore": 1, "datetime": 2}[kind]
