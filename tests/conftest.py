"""Shared fixtures: a real tf.Transform run over a slice of the shipped data."""

import dataclasses
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import taxi_rows  # noqa: E402


@dataclasses.dataclass(frozen=True)
class TransformedData:
    transform_dir: str
    train_files: str
    eval_files: str
    train_rows: int
    eval_rows: int


def analyze(rows: list[dict[str, str]], workdir: str) -> str:
    """Runs the project's preprocessing_fn analyzers with tf.Transform on Beam (DirectRunner).

    Returns the transform_fn directory, as Transform's `transform_graph` output lays it out.
    """
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from trainer_module.preprocessing import preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(
        schema_utils.schema_as_feature_spec(taxi_rows.schema()).feature_spec)
    transform_dir = os.path.join(workdir, "transform_fn")
    # The TF1 graph path, as the pipeline's Transform runs it (pipeline/dag.py).
    context = tft_beam.Context(temp_dir=os.path.join(workdir, "tmp"), force_tf_compat_v1=True)
    with beam.Pipeline() as p, context:
        raw = p | "Rows" >> beam.Create([taxi_rows.to_instance(r) for r in rows])
        transform_fn = (raw, metadata) | tft_beam.AnalyzeDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(transform_dir)
        _ = metadata | tft_beam.WriteMetadata(
            os.path.join(transform_dir, tft.TFTransformOutput.RAW_METADATA_DIR), p)
    return transform_dir


def transform(rows: list[dict[str, str]], transform_dir: str) -> dict:
    """Transformed features of `rows`, in order, through the saved Transform graph."""
    import tensorflow as tf
    import tensorflow_transform as tft

    output = tft.TFTransformOutput(transform_dir)
    serialized = [taxi_rows.to_example(r).SerializeToString() for r in rows]
    raw = tf.io.parse_example(serialized, output.raw_feature_spec())
    return {k: v.numpy() for k, v in output.transform_features_layer()(raw).items()}


def write_transformed(columns: dict, path: str) -> None:
    """Writes transformed columns as GZIP tf.Examples, the format Transform materializes."""
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = len(next(iter(columns.values())))
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for i in range(n):
            example = tf.train.Example()
            for name, values in columns.items():
                feature = example.features.feature[name]
                if values.dtype.kind == "f":
                    feature.float_list.value.append(float(values[i]))
                else:
                    feature.int64_list.value.append(int(values[i]))
            writer.write(example.SerializeToString())


@pytest.fixture(scope="session")
def transformed_data(tmp_path_factory) -> TransformedData:
    """1,500 shipped rows analyzed and transformed, written as GZIP TFRecords like Transform's."""
    workdir = str(tmp_path_factory.mktemp("tft"))
    rows = taxi_rows.read_rows(1500)
    split = 1000
    transform_dir = analyze(rows[:split], workdir)
    paths = {}
    for name, part in (("train", rows[:split]), ("eval", rows[split:])):
        paths[name] = os.path.join(workdir, name, "part-00000.gz")
        write_transformed(transform(part, transform_dir), paths[name])
    return TransformedData(transform_dir, paths["train"], paths["eval"], split, len(rows) - split)
