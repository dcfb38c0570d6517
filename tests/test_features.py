"""The feature module and the curated schema describe the same columns."""

import taxi_rows
from pipeline.pipeline_config import DEFAULT_DATA_DIR, DEFAULT_SCHEMA_PATH, check_data_dir
from trainer_module import features


def test_feature_groups_cover_the_schema_exactly():
    schema_columns = {f.name for f in taxi_rows.schema().feature}
    assert set(features.all_raw_columns()) == schema_columns
    assert len(features.all_raw_columns()) == len(set(features.all_raw_columns()))


def test_label_source_is_absent_at_serving_time():
    schema = taxi_rows.schema()
    for feature in schema.feature:
        in_serving = "SERVING" not in feature.not_in_environment
        assert in_serving == (feature.name not in features.LABEL_SOURCE_FEATURES), feature.name


def test_shipped_csv_has_every_schema_column():
    check_data_dir(DEFAULT_DATA_DIR, taxi_rows.schema(), DEFAULT_SCHEMA_PATH)
    assert len(taxi_rows.read_rows()) == 15002


def test_transformed_outputs_are_named_once():
    outputs = features.dense_float_outputs() + features.categorical_outputs()
    assert len(outputs) == len(set(outputs))
    assert features.LABEL_KEY not in outputs
