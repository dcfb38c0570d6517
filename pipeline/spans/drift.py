"""How far one set of rows' values moved from another's, by TFDV's own comparators.

A spec's `[drift] thresholds` give each column the distance it may move. TFDV measures it from
two statistics protos: L-infinity between the value shares of a string column, Jensen–Shannon
divergence between the histograms of a number column; both lie in [0, 1].

Which of TFDV's two histograms a number column is compared on follows its type. A standard
histogram has ten equal-width buckets from the column's smallest to its largest value: on a
long-tailed measurement (taxi fares up to $700) nearly every row lands in the first bucket,
and two random halves of the same rows differ as much as fares tripled do, whichever half
holds the largest fare. A quantile histogram's buckets follow the rows, but on a column of few
distinct values (an hour, a day of the week, an area code) its boundaries fall on the same
values and the divergence swings from one sample to the next. So fractional numbers are
compared on quantiles and integers, most often codes, counts and calendar fields, on the
standard histogram. On the shipped taxi rows cut into 900-row spans, the largest distance
between consecutive spans falls from 0.51 to 0.34 for fares (tripled fares: 0.42 to 0.57)
and from 0.31 to 0.07 for the day of the week.

The same thresholds serve two comparisons: a new span against the previous span
(`tfdv.validate_statistics(..., previous_statistics=...)`, the drift gate) and scored rows
against the model's training rows (`serving_statistics=...`, `make predict`'s skew report).
"""

import dataclasses
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

DRIFT, SKEW = "drift", "skew"
_COMPARATOR = {DRIFT: "drift_comparator", SKEW: "skew_comparator"}
_MEASUREMENTS = {DRIFT: "drift_measurements", SKEW: "skew_measurements"}
# The histogram a number column's Jensen-Shannon divergence is computed on, by its type.
HISTOGRAM = {schema_pb2.FLOAT: schema_pb2.HistogramSelection.QUANTILES,
             schema_pb2.INT: schema_pb2.HistogramSelection.STANDARD}
METHOD = {anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: "L-infinity",
          anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE:
          "Jensen-Shannon divergence"}


@dataclasses.dataclass(frozen=True)
class Distance:
    """One column's distance between two sets of rows, and its threshold."""

    column: str
    distance: float
    threshold: float
    method: str

    @property
    def past(self) -> bool:
        return self.distance > self.threshold

    def describe(self) -> str:
        return (f"{self.column}: {self.method} {self.distance:.4f} "
                f"{'>' if self.past else '<='} threshold {self.threshold:g}")


def comparator_schema(schema: schema_pb2.Schema, thresholds: Mapping[str, float],
                      kind: str) -> schema_pb2.Schema:
    """A copy of `schema` whose thresholded columns carry TFDV's drift (or skew) comparator:
    L-infinity for a string column, Jensen–Shannon divergence for a number column."""
    result = schema_pb2.Schema()
    result.CopyFrom(schema)
    for feature in result.feature:
        if feature.name not in thresholds:
            continue
        comparator = getattr(feature, _COMPARATOR[kind])
        if feature.type == schema_pb2.BYTES:
            comparator.infinity_norm.threshold = thresholds[feature.name]
        else:
            divergence = comparator.jensen_shannon_divergence
            divergence.threshold = thresholds[feature.name]
            divergence.source.type = HISTOGRAM[feature.type]
    return result


def distances(statistics: statistics_pb2.DatasetFeatureStatisticsList,
              other: statistics_pb2.DatasetFeatureStatisticsList, schema: schema_pb2.Schema,
              thresholds: Mapping[str, float], kind: str) -> list[Distance]:
    """Each thresholded column's distance from `other` (the previous span's statistics for
    DRIFT, the training rows' for SKEW) to `statistics`, by column name."""
    import tensorflow_data_validation as tfdv  # loads TensorFlow: only when comparing

    with_comparators = comparator_schema(schema, thresholds, kind)
    if kind == DRIFT:
        anomalies = tfdv.validate_statistics(statistics, with_comparators,
                                             previous_statistics=other)
    else:
        anomalies = tfdv.validate_statistics(other, with_comparators,
                                             serving_statistics=statistics)
    found = []
    for info in anomalies.drift_skew_info:
        for measurement in getattr(info, _MEASUREMENTS[kind]):
            found.append(Distance(info.path.step[0], float(measurement.value),
                                  float(measurement.threshold),
                                  METHOD.get(measurement.type, "distance")))
    return sorted(found, key=lambda d: d.column)
