"""Test helpers: a dataset's spec and schema, and its CSV rows as raw tf.Examples (as
CsvExampleGen writes them) and as TFT instance dicts.

TAXI and PENGUINS are the shipped datasets; fare_dataset() writes a regression spec (taxi's
fare) beside a copy of taxi's schema, the way a user's own dataset folder looks.
"""

import csv
import dataclasses
import functools
import os
import shutil

import numpy as np
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import datasets
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.missing import folded, is_missing


def write_csv(path, rows: list[dict[str, str]]) -> None:
    """`rows` as a CSV file with a header, as a user's export looks."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@dataclasses.dataclass(frozen=True)
class DatasetRows:
    dataset: str  # a name under schemas/ or a folder
    csv_path: str

    @property
    def spec_path(self) -> str:
        return os.path.join(datasets.dataset_dir(self.dataset), datasets.SPEC_FILE)

    @functools.cached_property
    def _loaded(self) -> tuple[DatasetSpec, schema_pb2.Schema]:
        """Read once per object: row helpers ask for types on every row."""
        return datasets.load_spec(self.dataset)

    @property
    def spec(self) -> DatasetSpec:
        return self._loaded[0]

    @property
    def schema(self) -> schema_pb2.Schema:
        """A copy: tests may edit it."""
        copy = schema_pb2.Schema()
        copy.CopyFrom(self._loaded[1])
        return copy

    def read_rows(self, n: int | None = None) -> list[dict[str, str]]:
        with open(self.csv_path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f, delimiter=self.spec.delimiter))
        return rows if n is None else rows[:n]

    @functools.cached_property
    def _type_of(self) -> dict[str, int]:
        return {f.name: f.type for f in self._loaded[1].feature}

    def to_example(self, row: dict[str, str], serving: bool = False) -> tf.train.Example:
        """A raw tf.Example: empty cells are absent features; serving=True leaves out the
        label and its sources, as a serving request does."""
        types = self._type_of
        drop = self.spec.label_sources if serving else ()
        example = tf.train.Example()
        markers = folded(self.spec.missing_values)
        for key, raw in row.items():
            if key in drop or raw == "" or (types[key] != schema_pb2.BYTES
                                            and is_missing(raw, markers)):
                continue
            feature = example.features.feature[key]
            if types[key] == schema_pb2.INT:
                feature.int64_list.value.append(int(float(raw)))
            elif types[key] == schema_pb2.FLOAT:
                feature.float_list.value.append(float(raw))
            else:
                feature.bytes_list.value.append(raw.encode("utf-8"))
        return example

    def serialized(self, rows, serving: bool = False) -> list[bytes]:
        return [self.to_example(r, serving).SerializeToString() for r in rows]

    def label(self, row: dict[str, str]) -> float:
        """The label the spec makes of a raw row (class id, 0/1, or the number)."""
        return self.spec.label_of(row)

    def quality(self, outputs: dict, rows, binary_auc: bool = False) -> float:
        """Accuracy (classification) or RMSE (regression) of serving outputs on raw rows;
        binary_auc=True scores a binary task by AUC, as the quality suite does."""
        labels = np.array([self.label(r) for r in rows])
        task = self.spec.task
        if task == "binary":
            probabilities = np.asarray(outputs["probabilities"])[:, 0]
            if binary_auc:
                from sklearn.metrics import roc_auc_score

                return float(roc_auc_score(labels, probabilities))
            return float(np.mean((probabilities > 0.5) == labels))
        if task == "multiclass":
            return float(np.mean(np.argmax(np.asarray(outputs["scores"]), axis=1) == labels))
        predictions = np.asarray(outputs["predictions"])[:, 0]
        return float(np.sqrt(np.mean((predictions - labels) ** 2)))

    def to_instance(self, row: dict[str, str]) -> dict[str, list]:
        """A TFT instance dict: dense features as one-element lists, optional ones possibly
        empty."""
        types = self._type_of
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


TAXI = DatasetRows("taxi", os.path.join(datasets.DATA_ROOT, "taxi", "taxi.csv"))
PENGUINS = DatasetRows("penguins", os.path.join(datasets.DATA_ROOT, "penguins", "penguins.csv"))

# Regression on taxi's fare (dollars); tips would leak the answer, so they are ignored. With
# taxi and penguins it covers every role on every column type it reads: here a vocabulary of
# integers (the weekday), quantiles of integers (the duration) and hashed strings (the company).
FARE_SPEC = """
[label]
column = "fare"
task = "regression"
loss = "huber"

[features]
trip_miles = ["log_zscore", { role = "quantile", buckets = 20 }]
trip_seconds = ["log_zscore", { role = "quantile", buckets = 10 }]
trip_start_timestamp = "zscore"
trip_start_hour = { role = "integer", range = [0, 23] }
trip_start_day = "vocabulary"
trip_start_month = { role = "integer", range = [0, 12] }
pickup_latitude = { role = "quantile", buckets = 16 }
pickup_longitude = { role = "quantile", buckets = 16 }
dropoff_latitude = { role = "quantile", buckets = 16 }
dropoff_longitude = { role = "quantile", buckets = 16 }
pickup_community_area = { role = "integer", range = [0, 77] }
dropoff_community_area = { role = "integer", range = [0, 77] }
pickup_census_tract = { role = "hashed", buckets = 256 }
dropoff_census_tract = { role = "hashed", buckets = 256 }
# No taxi column holds dates: every value is a gap here, which the datetime role must carry
# through the TPU step too (tests/test_roles.py parses real dates).
payment_type = ["vocabulary", { role = "datetime", format = "%Y-%m-%d" }]
company = [{ role = "hashed", buckets = 64 }, { role = "text", buckets = 512, max_tokens = 8 }]
tips = { role = "ignore", why = "paid with the fare: it would leak the answer" }

[evaluation]
slices = ["payment_type"]

[evaluation.thresholds]
rmse = { max = 100.0, allowed_change = 1.0 }
"""


def fare_dataset(folder: str) -> DatasetRows:
    """A regression dataset folder (spec.toml + taxi's schema) at `folder`/taxi-fare."""
    path = os.path.join(folder, "taxi-fare")
    os.makedirs(path, exist_ok=True)
    shutil.copy(os.path.join(datasets.dataset_dir("taxi"), datasets.SCHEMA_FILE), path)
    with open(os.path.join(path, datasets.SPEC_FILE), "w", encoding="utf-8") as f:
        f.write(FARE_SPEC)
    return DatasetRows(path, TAXI.csv_path)
