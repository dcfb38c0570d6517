"""The datetime and text roles: their formats, and their Transform outputs on known values."""

import math
import tempfile

import numpy as np
import pytest

from trainer_module import datetimes
from trainer_module.features import KINDS, transformed_name


@pytest.mark.parametrize("value, expected", [
    ("2016-07-02", {"Y": 2016, "m": 7, "d": 2, "H": 0}),
    ("2017-01-01T06:00:42Z", {"Y": 2017, "m": 1, "d": 1, "H": 6, "M": 0, "S": 42}),
    ("2017-01-01 06:00:42.250+05:30", {"H": 6, "S": 42.25, "sign": "+", "off_h": 5,
                                       "off_m": 30}),
    ("2017-01-01T23:59-0800", {"H": 23, "M": 59, "sign": "-", "off_h": 8}),
])
def test_iso_8601_values_parse_into_their_fields(value, expected):
    fields = datetimes.pattern(datetimes.ISO).fields(value)
    assert {k: fields[k] for k in expected} == expected


@pytest.mark.parametrize("value", ["2016-13-02", "2016-07-32", "07/02/2016", "soon", "2016-7-2"])
def test_values_that_are_no_iso_date_do_not_parse(value):
    assert datetimes.pattern(datetimes.ISO).fields(value) is None


def test_a_format_names_its_fields_and_a_bad_one_is_refused():
    fields = datetimes.pattern("%m/%d/%Y %H:%M:%S").fields("9/30/1990 0:00:00")
    assert (fields["Y"], fields["m"], fields["d"], fields["H"]) == (1990, 9, 30, 0)
    with pytest.raises(datetimes.FormatError, match="has no %d"):
        datetimes.pattern("%Y-%m")
    with pytest.raises(datetimes.FormatError, match="names %Y twice"):
        datetimes.pattern("%Y %Y-%m-%d")


def test_detect_takes_iso_first_then_the_first_common_format_that_fits():
    assert datetimes.detect(["2016-07-02", "2017-01-01T06:00:42Z"], 0.99) == datetimes.ISO
    assert datetimes.detect(["9/30/1990 0:00:00", "12/1/1991 13:05:00"], 0.99) == \
        "%m/%d/%Y %H:%M:%S"
    # Day first: 30/9 is no month/day, so the day-first layout is the one that fits.
    assert datetimes.detect(["30/09/1990", "01/12/1991"], 0.99) == "%d/%m/%Y"
    assert datetimes.detect(["2016-07-02", "n/a", "tomorrow"], 0.99) is None


def _transform(kind: str, column: str, params: dict, values: list[bytes]) -> dict:
    """The role's Transform outputs on these raw values (b"" is a missing cell), analysed and
    applied by tf.Transform on Beam."""
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    def preprocessing_fn(inputs):
        return KINDS[kind].transform(inputs[column], column, params)

    rows = [{column: [v]} if v else {column: []} for v in values]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(
        {column: tf.io.VarLenFeature(tf.string)}))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp()):
        (transformed, _), _ = ((rows, metadata)
                               | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn))
    return {k: np.array([row[k] for row in transformed]) for k in transformed[0]}


def test_datetime_becomes_calendar_parts_and_elapsed_time_with_gaps_marked():
    out = _transform("datetime", "when", {"format": "", "instant_buckets": 0},
                     [b"2016-07-02", b"2016-07-04T12:00:00Z", b"2016-07-03T12:00:00+12:00",
                      b"someday", b""])
    name = lambda part: transformed_name(f"when_{part}")  # noqa: E731
    np.testing.assert_array_equal(out[transformed_name("when_missing")], [0, 0, 0, 1, 1])
    # 2016-07-02 was a Saturday (weekday 5, Monday 0); July is month 7.
    assert out[name("weekday_sin")][0] == pytest.approx(math.sin(2 * math.pi * 5 / 7), abs=1e-5)
    assert out[name("month_cos")][0] == pytest.approx(math.cos(2 * math.pi * 6 / 12), abs=1e-5)
    assert out[name("hour_sin")][1] == pytest.approx(math.sin(math.pi), abs=1e-5)
    # Elapsed: the training span is 2016-07-02 00:00 .. 07-04 12:00 UTC (2.5 days); the third
    # value is 07-03 00:00 UTC once its +12:00 offset is taken off.
    np.testing.assert_allclose(out[name("elapsed")][:3], [0.0, 1.0, 0.4], atol=1e-5)
    for key, values in out.items():
        if key != transformed_name("when_missing"):
            np.testing.assert_array_equal(values[3:], 0.0)


def test_a_datetimes_instant_is_one_id_for_the_same_text_and_its_own_for_a_gap():
    params = {"format": "", "instant_buckets": 64}
    out = _transform("datetime", "when", params,
                     [b"2016-07-02T10:00:00Z", b" 2016-07-02T10:00:00Z", b"2016-07-02T10:00:01Z",
                      b""])
    ids = out[transformed_name("when_instant")]
    assert ids[0] == ids[1] and ids[0] != ids[2]
    assert ids[3] == 64 and ids[:3].max() < 64
    assert KINDS["datetime"].rows("when", params, None) == 65
    # The calendar parts are the same as without the id.
    plain = _transform("datetime", "when", {"format": "", "instant_buckets": 0},
                       [b"2016-07-02T10:00:00Z", b" 2016-07-02T10:00:00Z",
                        b"2016-07-02T10:00:01Z", b""])
    assert transformed_name("when_instant") not in plain
    for key, values in plain.items():
        np.testing.assert_array_equal(out[key], values)


def test_text_becomes_fixed_width_token_ids_with_padding():
    params = {"buckets": 1000, "max_tokens": 4, "dim": 8}
    out = _transform("text", "notes", params,
                     [b"Bird STRUCK, the windshield!", b"bird struck", b"",
                      b"one two three four five six"])
    ids = np.stack([out[transformed_name(f"notes_token{i:03d}")] for i in range(4)], axis=1)
    assert ids.shape == (4, 4) and ids.min() >= 0 and ids.max() <= 1000
    # Lowercased words without punctuation: "Bird STRUCK," and "bird struck" share tokens.
    np.testing.assert_array_equal(ids[0, :2], ids[1, :2])
    np.testing.assert_array_equal(ids[1, 2:], [0, 0])  # padding
    np.testing.assert_array_equal(ids[2], [0, 0, 0, 0])  # a missing text has no words
    assert (ids[3] > 0).all()  # cut to max_tokens


def test_token_mean_averages_only_the_words_present():
    import tensorflow as tf

    from trainer_module.model import TokenMean

    layer = TokenMean(5, 2, None)
    layer.build(None)
    layer.embeddings.assign(np.arange(10, dtype=np.float32).reshape(5, 2))
    ids = [tf.constant([1, 0]), tf.constant([3, 0]), tf.constant([0, 0])]
    np.testing.assert_allclose(layer(ids).numpy(), [[4.0, 5.0], [0.0, 0.0]])
