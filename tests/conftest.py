"""Shared fixtures: real tf.Transform runs over slices of each task's data.

`transformed_data` is taxi (binary), `penguins_data` multiclass, `fare_data` regression
(taxi's fare); `task_data` is each of the three in turn.
"""

import dataclasses
import functools
import os
import random
import socket
import sys
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from cloud_settings import CLOUD  # noqa: E402

from dataset_rows import PENGUINS, TAXI, DatasetRows, fare_dataset  # noqa: E402


@dataclasses.dataclass(frozen=True)
class TransformedData:
    rows: DatasetRows
    transform_dir: str
    train_files: str
    eval_files: str
    train_rows: int
    eval_rows: int
    eval_csv_rows: tuple  # the eval split's raw CSV rows, in file order
    raw_eval_files: str  # those rows as raw GZIP tf.Examples, the form ExampleGen writes

    @property
    def spec(self):
        return self.rows.spec


def analyze(rows: list[dict[str, str]], workdir: str, dataset: DatasetRows = TAXI) -> str:
    """Runs the spec's preprocessing_fn analyzers with tf.Transform on Beam (DirectRunner).

    Returns the transform_fn directory, as Transform's `transform_graph` output lays it out.
    """
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from trainer_module.preprocessing import preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(
        schema_utils.schema_as_feature_spec(dataset.schema).feature_spec)
    transform_dir = os.path.join(workdir, "transform_fn")
    fn = functools.partial(preprocessing_fn, custom_config=dataset.spec.to_custom_config())
    # The TF1 graph path, as the pipeline's Transform runs it (pipeline/dag.py).
    context = tft_beam.Context(temp_dir=os.path.join(workdir, "tmp"), force_tf_compat_v1=True)
    with beam.Pipeline() as p, context:
        raw = p | "Rows" >> beam.Create([dataset.to_instance(r) for r in rows])
        transform_fn = (raw, metadata) | tft_beam.AnalyzeDataset(fn)
        _ = transform_fn | tft_beam.WriteTransformFn(transform_dir)
        _ = metadata | tft_beam.WriteMetadata(
            os.path.join(transform_dir, tft.TFTransformOutput.RAW_METADATA_DIR), p)
    return transform_dir


def transform(rows: list[dict[str, str]], transform_dir: str,
              dataset: DatasetRows = TAXI) -> dict:
    """Transformed features of `rows`, in order, through the saved Transform graph, as
    Transform materializes them (the model's inputs packed, see features.PACKED_NAMES)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    output = tft.TFTransformOutput(transform_dir)
    raw = tf.io.parse_example(dataset.serialized(rows), output.raw_feature_spec())
    return {k: v.numpy() for k, v in output.transform_features_layer()(raw).items()}


def float_input(inputs: dict, name: str, spec) -> Any:
    """One float output of a batch of model inputs: its column of the packed float vector."""
    from trainer_module.features import FLOAT, PACKED_NAMES

    packed = [o.name for o in spec.packed_inputs()[PACKED_NAMES[FLOAT]]]
    return inputs[PACKED_NAMES[FLOAT]][:, packed.index(name)]


def unpacked(columns: dict, dataset: DatasetRows = TAXI) -> dict:
    """`transform`'s columns split into one array per model output (by name), through the
    model's own `model_inputs`; the label columns as they are."""
    from trainer_module.features import FLOAT, PACKED_NAMES
    from trainer_module.model import model_inputs

    inputs = {k: v.numpy() for k, v in model_inputs(columns, dataset.spec).items()}
    floats = {o.name: float_input(inputs, o.name, dataset.spec)
              for o in dataset.spec.model_outputs() if o.kind == FLOAT}
    inputs.pop(PACKED_NAMES[FLOAT], None)
    return {**inputs, **floats, **{k: columns[k] for k in dataset.spec.label_outputs}}


def write_transformed(columns: dict, path: str) -> None:
    """Writes transformed columns as GZIP tf.Examples, the format Transform materializes."""
    import numpy as np
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = len(next(iter(columns.values())))
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for i in range(n):
            example = tf.train.Example()
            for name, values in columns.items():
                feature = example.features.feature[name]
                kind = feature.float_list if values.dtype.kind == "f" else feature.int64_list
                kind.value.extend(np.ravel(values[i]).tolist())
            writer.write(example.SerializeToString())


def make_transformed(dataset: DatasetRows, workdir: str, total: int, train: int,
                     shuffle: bool = False) -> TransformedData:
    rows = dataset.read_rows(total)
    if shuffle:  # a file sorted by the label: both splits need every class
        random.Random(0).shuffle(rows)
    transform_dir = analyze(rows[:train], workdir, dataset)
    paths = {}
    for name, part in (("train", rows[:train]), ("eval", rows[train:])):
        paths[name] = os.path.join(workdir, name, "part-00000.gz")
        write_transformed(transform(part, transform_dir, dataset), paths[name])
    raw_eval = os.path.join(workdir, "raw", "Split-eval", "data_tfrecord-00000-of-00001.gz")
    write_raw(dataset, rows[train:], raw_eval)
    return TransformedData(dataset, transform_dir, paths["train"], paths["eval"], train,
                           len(rows) - train, tuple(rows[train:]), raw_eval)


def write_raw(dataset: DatasetRows, rows: list[dict[str, str]], path: str) -> None:
    """Raw rows as GZIP tf.Examples, label included."""
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for record in dataset.serialized(rows):
            writer.write(record)


# The markers of the tests that take minutes: they are collected first.
LONG_MARKERS = ("e2e", "long")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that take minutes come first, in file order, and the rest after them.
    `make test` hands tests to its workers one at a time in this order, so no worker is left
    running a long test alone at the end while the other waits."""
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in LONG_MARKERS))


@pytest.fixture(scope="session")
def transformed_data(tmp_path_factory) -> TransformedData:
    """1,500 shipped taxi rows analyzed and transformed, written as GZIP TFRecords."""
    return make_transformed(TAXI, str(tmp_path_factory.mktemp("tft")), 1500, 1000)


@pytest.fixture(scope="session")
def penguins_data(tmp_path_factory) -> TransformedData:
    """Every penguin (multiclass): 240 to train, 104 to evaluate."""
    return make_transformed(PENGUINS, str(tmp_path_factory.mktemp("penguins")), 344, 240,
                            shuffle=True)


@pytest.fixture(scope="session")
def fare_data(tmp_path_factory) -> TransformedData:
    """Taxi's fare as a regression label, on the same 1,500 rows."""
    folder = str(tmp_path_factory.mktemp("fare"))
    return make_transformed(fare_dataset(folder), os.path.join(folder, "tft"), 1500, 1000)


def tree_hashes(directory) -> dict[str, str]:
    """relative path → sha256 of every file under `directory` ({} if it does not exist)."""
    import hashlib

    hashes = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                hashes[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return hashes


TASK_FIXTURES = ("transformed_data", "penguins_data", "fare_data")


@pytest.fixture(params=TASK_FIXTURES, ids=("binary", "multiclass", "regression"))
def task_data(request) -> TransformedData:
    return request.getfixturevalue(request.param)


@pytest.fixture
def cloud_env(monkeypatch):
    """The cloud settings of cloud_settings.CLOUD as environment variables, and no other."""
    from pipeline.cloud import settings

    for var in (*settings.ENV_VARS, "CLOUD_CONFIG", "TARGET"):
        monkeypatch.delenv(var, raising=False)
    for var, value in CLOUD.items():
        monkeypatch.setenv(var, value)
    return monkeypatch


def _refuse(*args, **kwargs):
    raise AssertionError(f"network call attempted: {args[1:]}")


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
