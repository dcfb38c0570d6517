"""TFMA metrics of this project's own, for the Evaluator (named in MetricConfig with `module`).

TFMA runs one combiner per underlying computation, and each combiner extracts the label, the
prediction and the weight of every example again, in every slice. AUC already builds TFMA's
calibration histogram, whose buckets hold the weighted labels and predictions of every example;
calibration (the sum of weighted predictions over the sum of weighted labels) is those sums,
so it is derived from the histogram instead of a third pass over the examples.
"""

from typing import Any

import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import calibration_histogram, metric_types, metric_util

CALIBRATION_NAME = "calibration"  # the name TFMA's own Calibration reports under


def _calibration(
    name: str = CALIBRATION_NAME,
    eval_config: tfma.EvalConfig | None = None,
    model_name: str = "",
    output_name: str = "",
    sub_key: metric_types.SubKey | None = None,
    aggregation_type: metric_types.AggregationType | None = None,
    class_weights: dict[int, float] | None = None,
    example_weighted: bool = False,
) -> metric_types.MetricComputations:
    key = metric_types.MetricKey(name=name, model_name=model_name, output_name=output_name,
                                 sub_key=sub_key, example_weighted=example_weighted)
    # The same arguments as AUC's histogram (binary_confusion_matrices with num_thresholds),
    # so TFMA computes one histogram for both.
    computations = calibration_histogram.calibration_histogram(
        eval_config=eval_config, model_name=model_name, output_name=output_name,
        sub_key=sub_key, aggregation_type=aggregation_type, class_weights=class_weights,
        example_weighted=example_weighted)
    histogram_key = computations[-1].keys[-1]

    def result(metrics: dict[metric_types.MetricKey, Any]) -> dict[metric_types.MetricKey, Any]:
        buckets = metrics[histogram_key]
        labels = sum(b.weighted_labels for b in buckets)
        predictions = sum(b.weighted_predictions for b in buckets)
        # TFMA's Calibration: NaN where the slice holds no positive weight.
        return {key: float("nan") if np.isclose(labels, 0.0) else predictions / labels}

    computations.append(metric_types.DerivedMetricComputation(keys=[key], result=result))
    return computations


class HistogramCalibration(metric_types.Metric):
    """TFMA's Calibration (weighted predictions ÷ weighted labels), read off the calibration
    histogram that AUC computes anyway. Reported as `calibration`."""

    def __init__(self, name: str = CALIBRATION_NAME):
        super().__init__(metric_util.merge_per_key_computations(_calibration), name=name)


def module_of(class_name: str) -> str:
    """The MetricConfig `module` for a metric class: this module for its own, '' for TFMA's."""
    return __name__ if class_name in _OWN else ""


_OWN = frozenset({HistogramCalibration.__name__})
