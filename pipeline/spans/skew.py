"""What `make predict` says about scored rows that differ from the training rows.

Two checks, neither of which refuses a row:
- skew: the scored rows' statistics against those of the rows the model trained on (shipped
  inside the model, trainer_module/feature_signature.py TRAINING_STATISTICS_FILE), by TFDV's
  skew comparison with the spec's `[drift] thresholds` (pipeline/spans/drift.py);
- unseen values, per column the model reads: a category the training rows never held (when
  the training statistics list every category), an integer category id outside the trained
  range, a date that does not parse with the column's format.
"""

import dataclasses
import os

from pipeline.spans import changes, drift
from trainer_module import datetimes, missing, numbers
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.feature_signature import TRAINING_STATISTICS_FILE
from trainer_module.missing import is_missing

# Fewer scored rows than this: their distributions are too noisy to compare; the unseen values
# are still counted.
SKEW_MIN_ROWS = 100
# The scored rows whose statistics are compared: the first this many (memory stays flat).
SKEW_SAMPLE_ROWS = 100_000


@dataclasses.dataclass
class _Column:
    """What the training rows held in one column."""

    categories: frozenset[str] | None = None  # every category, when the statistics list all
    low: float | None = None  # an integer column's trained range
    high: float | None = None
    date: datetimes.Pattern | None = None  # a datetime column's format


class SkewCheck:
    """Fed the scored chunks (`add`), then `summary()`; `warnings()` names what to look at."""

    def __init__(self, model_dir: str, spec: DatasetSpec, schema) -> None:
        import tensorflow as tf
        import tensorflow_data_validation as tfdv

        self._spec, self._schema = spec, schema
        path = os.path.join(model_dir, TRAINING_STATISTICS_FILE)
        self._training = tfdv.load_stats_binary(path) if tf.io.gfile.exists(path) else None
        self._columns = self._trained_columns(spec)
        self._unseen = {name: 0 for name in self._columns}
        self._sample: list = []
        self._sampled = 0

    def _trained_columns(self, spec: DatasetSpec) -> dict[str, _Column]:
        columns: dict[str, _Column] = {}
        for feature in spec.features:
            if feature.role == "datetime":
                columns[feature.column] = _Column(date=datetimes.pattern(
                    feature.params.get("format", datetimes.ISO)))
        if self._training is None:
            return columns
        # A value matters where the model reads it as a category: a string the model reads,
        # or an integer read as a category id. A number read as a number only extrapolates
        # past the trained range, as it does from any eval row, and an ignored column is read
        # by nothing.
        read = {f.column for f in spec.features} - set(spec.ignored_columns)
        integer_ids = {f.column for f in spec.features if f.role == "integer"}
        for name, stats in changes.features_by_name(self._training).items():
            if name not in read or name in columns:
                continue
            if stats.HasField("string_stats"):
                buckets = stats.string_stats.rank_histogram.buckets
                if buckets and len(buckets) >= stats.string_stats.unique:
                    columns[name] = _Column(categories=frozenset(b.label for b in buckets))
            elif (stats.type == stats.INT and stats.HasField("num_stats")
                  and name in integer_ids):
                columns[name] = _Column(low=stats.num_stats.min, high=stats.num_stats.max)
        return columns

    def add(self, frame) -> None:
        """Counts one chunk's unseen values and keeps rows for the statistics."""
        for name, column in self._columns.items():
            if name not in frame:
                continue
            values = [v for v in frame[name] if not is_missing(v)]
            if column.date is not None:
                self._unseen[name] += sum(column.date.fields(v) is None for v in values)
            elif column.categories is not None:
                self._unseen[name] += sum(v not in column.categories for v in values)
            else:
                for v in values:
                    try:
                        number = numbers.parse(v, self._spec.number_format(name))
                    except ValueError:
                        continue  # not a number: the scorer rejects the row, with the reason
                    self._unseen[name] += not column.low <= number <= column.high
        if self._sampled < SKEW_SAMPLE_ROWS:
            part = frame.iloc[:SKEW_SAMPLE_ROWS - self._sampled]
            self._sample.append(part)
            self._sampled += len(part)

    def _distances(self) -> list[drift.Distance]:
        import pandas as pd
        import tensorflow_data_validation as tfdv

        frame = pd.concat(self._sample)
        columns = [f for f in self._schema.feature if f.name in frame.columns]
        typed = pd.DataFrame({f.name: as_examples_hold(frame[f.name], f.type, self._spec)
                              for f in columns})
        scored = tfdv.generate_statistics_from_dataframe(typed)
        return drift.distances(scored, self._training, self._schema,
                               dict(self._spec.drift_thresholds), drift.SKEW)

    def summary(self) -> dict:
        """For summary.json: per column its skew distance and threshold, and unseen counts."""
        result: dict = {"unseen": {n: c for n, c in self._unseen.items() if c}}
        if self._training is None:
            result["skew"] = {"compared": False, "why": "the model carries no training "
                              "statistics: train and push it again"}
        elif not self._spec.drift_thresholds:
            result["skew"] = {"compared": False, "why": "the spec sets no [drift] thresholds"}
        elif self._sampled < SKEW_MIN_ROWS:
            result["skew"] = {"compared": False, "why": f"{self._sampled} rows: fewer than "
                              f"{SKEW_MIN_ROWS} are too few to compare distributions"}
        else:
            result["skew"] = {"compared": True, "rows": self._sampled, "columns": {
                d.column: {"distance": round(d.distance, 6), "threshold": d.threshold,
                           "method": d.method, "past": d.past} for d in self._distances()}}
        return result


def warnings(summary: dict) -> list[str]:
    """One line per column past its skew threshold or with unseen values."""
    lines = [f"{name}: {info['method']} {info['distance']:.4f} from the training rows, past "
             f"its threshold {info['threshold']:g}"
             for name, info in summary["skew"].get("columns", {}).items() if info["past"]]
    lines += [f"{name}: {count} value(s) the model never saw in training (scored anyway)"
              for name, count in summary["unseen"].items()]
    return lines


def as_examples_hold(cells, feature_type: int, spec: DatasetSpec):
    """A column of CSV cells (text, as `make predict` reads them) as CsvExampleGen writes it
    into the Examples whose statistics the model carries: an empty cell has no value in any
    column; in a number column a missing marker (trainer_module/missing.py, and the spec's
    own) has none either, and a formatted number is its value. So a gap is a gap on both
    sides of the comparison, never a category or a zero of its own."""
    import pandas as pd
    from tensorflow_metadata.proto.v0 import schema_pb2

    if feature_type == schema_pb2.BYTES:
        return cells.map(lambda cell: None if cell == "" else cell)
    fmt, markers = spec.number_format(cells.name), missing.folded(spec.missing_values)

    def number(cell: str) -> float | None:
        if is_missing(cell, markers):
            return None
        try:
            return numbers.parse(cell, fmt)
        except ValueError:
            return None  # not a number: the scorer rejects the row, with the reason

    return pd.to_numeric(cells.map(number), errors="coerce")
