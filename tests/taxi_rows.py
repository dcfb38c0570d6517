"""Test helpers: rows of the shipped CSV as raw tf.Examples and as TFT instance dicts."""

import csv
import os

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline.pipeline_config import DEFAULT_DATA_DIR, DEFAULT_SCHEMA_PATH, load_schema

SHIPPED_CSV = os.path.join(DEFAULT_DATA_DIR, "taxi.csv")


def schema() -> schema_pb2.Schema:
    return load_schema(DEFAULT_SCHEMA_PATH)


def read_rows(n: int | None = None, path: str = SHIPPED_CSV) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return rows if n is None else rows[:n]


def _types() -> dict[str, int]:
    return {f.name: f.type for f in schema().feature}


def to_example(row: dict[str, str], drop: tuple[str, ...] = ()) -> tf.train.Example:
    """A raw tf.Example as CsvExampleGen writes it: empty cells are absent features."""
    types = _types()
    example = tf.train.Example()
    for key, raw in row.items():
        if key in drop or raw == "":
            continue
        feature = example.features.feature[key]
        if types[key] == schema_pb2.INT:
            feature.int64_list.value.append(int(float(raw)))
        elif types[key] == schema_pb2.FLOAT:
            feature.float_list.value.append(float(raw))
        else:
            feature.bytes_list.value.append(raw.encode("utf-8"))
    return example


def to_instance(row: dict[str, str]) -> dict[str, list]:
    """A TFT instance dict: dense features as one-element lists, optional ones possibly empty."""
    types = _types()
    instance = {}
    for key, raw in row.items():
        if raw == "":
            instance[key] = []
        elif types[key] == schema_pb2.INT:
            instance[key] = [int(float(raw))]
        elif types[key] == schema_pb2.FLOAT:
            instance[key] = [float(raw)]
        else:
            instance[key] = [raw.encode("utf-8")]
    return instance
