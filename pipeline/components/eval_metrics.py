"""TFMA metrics of this project's own, for the Evaluator (named in MetricConfig with `module`).

TFMA runs one combiner per underlying computation, and each combiner extracts the label, the
prediction and the weight of every example again, in every slice: for a binary task, one for
BinaryAccuracy's confusion matrix at 0.5 and one for the 10,000-bucket calibration histogram AUC
is read from, so the Evaluator's time grows with the number of combiners. The metrics here
are TFMA's own (same computations, same derived values, same names), except that both
combiners are replaced by one that extracts each example once and feeds both
accumulators; calibration (weighted predictions ÷ weighted labels) is read off the histogram's
buckets instead of a third combiner.

The shared combiner reuses TFMA 0.47's combiners (their settings, accumulators and outputs);
tests/test_eval_metrics.py compares every value with TFMA's own classes, so a TFMA release that
changes them fails there rather than in a run.
"""

import math
import re
from collections.abc import Mapping
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    confusion_matrix_metrics,
    metric_types,
    metric_util,
)

CALIBRATION_NAME = "calibration"  # the name TFMA's own Calibration reports under
THRESHOLD = 0.5  # BinaryAccuracy's default threshold: the one the shared pass computes


def _label_key(eval_config: tfma.EvalConfig | None, model_name: str) -> str:
    """The label key TFMA's extraction looks a label dict up by, for `model_name`."""
    specs = eval_config.model_specs if eval_config else []
    for spec in specs:
        if (spec.name if len(specs) > 1 else "") == model_name:
            return spec.label_key
    return ""


class _OnePassCombiner(beam.CombineFn):
    """TFMA's calibration histogram and its confusion matrix at THRESHOLD, from one extraction
    of each example; accumulators, merging and outputs are TFMA's own combiners'.

    TFMA's generic extraction (`to_label_prediction_example_weight`) is the bulk of this
    pass's time on large data. An example with one 0/1 label, one float prediction
    and one finite weight, for the key's model and no output name, sub key, aggregation or
    class weights, extracts to exactly (label, prediction, weight), or to nothing at weight 0
    (fractional labels split off a 0-weight half, which TFMA drops): `_direct` reads those
    examples; every other example, and every other key, goes through TFMA's extraction.
    """

    def __init__(self, histogram: Any, matrices: Any):
        self._histogram = histogram  # calibration_histogram._CalibrationHistogramCombiner
        self._matrices = matrices  # binary_confusion_matrices._BinaryConfusionMatrixCombiner
        key = histogram._key
        self._model_name = key.model_name
        self._label_key = _label_key(histogram._eval_config, key.model_name)
        self._direct_key = (not key.output_name and key.sub_key is None
                            and histogram._aggregation_type is None
                            and not histogram._class_weights)

    def create_accumulator(self) -> tuple:
        return self._histogram.create_accumulator(), self._matrices.create_accumulator()

    def _of_model(self, value: Any) -> Any:
        """`value`, or its entry for the key's model when TFMA keys it by model name; None
        when TFMA's extraction would look further (or fail)."""
        if not isinstance(value, Mapping):
            return value
        key = self._label_key
        if key and any(k == key or k.startswith(f"{key}/") for k in value):
            return None  # TFMA looks the label key up first
        return value.get(self._model_name) if self._model_name else None

    def _direct(self, element: metric_types.StandardMetricInputs
                ) -> list[tuple[float, float, float]] | None:
        """What TFMA's extraction yields for a plain example, or None for any other."""
        if not self._direct_key:
            return None
        label = self._of_model(element.label)
        prediction = element.prediction
        if self._model_name:  # TFMA requires the prediction keyed by the model's name
            if not isinstance(prediction, Mapping) or self._model_name not in prediction:
                return None
            prediction = prediction[self._model_name]
        weight = 1.0
        if self._histogram._example_weighted and element.example_weight is not None:
            value = self._of_model(element.example_weight)
            if not isinstance(value, np.ndarray) or value.size != 1:
                return None
            weight = float(value.item())
        if not (isinstance(label, np.ndarray) and label.size == 1 and label.dtype.kind in "iuf"
                and isinstance(prediction, np.ndarray) and prediction.size == 1
                and prediction.dtype.kind == "f" and math.isfinite(weight)):
            return None
        label_value = float(label.item())
        if label_value not in (0.0, 1.0):  # fractional, or out of [0, 1] (TFMA raises)
            return None
        if math.isclose(weight, 0.0):
            return []
        return [(label_value, float(prediction.item()), weight)]

    def add_input(self, accumulator: tuple, element: metric_types.StandardMetricInputs) -> tuple:
        histogram, matrices = accumulator
        h = self._histogram
        extracted = self._direct(element)
        if extracted is None:
            extracted = [
                (float(label), float(prediction), float(weight))
                for label, prediction, weight in metric_util.to_label_prediction_example_weight(
                    element, eval_config=h._eval_config, model_name=h._key.model_name,
                    output_name=h._key.output_name, sub_key=h._key.sub_key,
                    fractional_labels=True, flatten=True, aggregation_type=h._aggregation_type,
                    class_weights=h._class_weights, example_weighted=h._example_weighted)]
        labels, predictions, weights = [], [], []
        for label, prediction, weight in extracted:
            index = h._bucket_index(prediction)
            bucket = histogram.get(index)
            if bucket is None:
                histogram[index] = calibration_histogram.Bucket(
                    index, label * weight, prediction * weight, weight)
            else:
                bucket.weighted_labels += label * weight
                bucket.weighted_predictions += prediction * weight
                bucket.weighted_examples += weight
            labels.append(label)
            predictions.append(prediction)
            weights.append(weight)
        matrices = self._matrices._binary_confusion_matrices.add_input(
            accumulator=matrices, labels=labels, predictions=predictions,
            example_weights=weights, example_id=None)
        return histogram, matrices

    def merge_accumulators(self, accumulators) -> tuple:
        histograms, matrices = zip(*accumulators, strict=True)
        return (self._histogram.merge_accumulators(histograms),
                self._matrices.merge_accumulators(matrices))

    def extract_output(self, accumulator: tuple) -> dict:
        histogram, matrices = accumulator
        return {**self._histogram.extract_output(histogram),
                **self._matrices.extract_output(matrices)}


def _one_pass(eval_config: tfma.EvalConfig | None, key: metric_types.MetricKey,
              aggregation_type: Any, class_weights: Any,
              example_weighted: bool) -> metric_types.MetricComputation:
    """The shared computation for one model/output/sub key: both keys, one combiner."""
    args = dict(eval_config=eval_config, model_name=key.model_name, output_name=key.output_name,
                sub_key=key.sub_key, aggregation_type=aggregation_type,
                class_weights=class_weights, example_weighted=example_weighted)
    [histogram] = calibration_histogram.calibration_histogram(**args)
    matrices = binary_confusion_matrices.binary_confusion_matrices(
        thresholds=[THRESHOLD], use_histogram=False, **args)[0]
    return metric_types.MetricComputation(
        keys=[*histogram.keys, *matrices.keys], preprocessors=None,
        combiner=_OnePassCombiner(histogram.combiner, matrices.combiner))


def _shareable(combiner: Any) -> bool:
    """TFMA's default histogram, or its confusion matrix at THRESHOLD with nothing sampled:
    what _OnePassCombiner reproduces exactly."""
    if isinstance(combiner, calibration_histogram._CalibrationHistogramCombiner):
        return (combiner._num_buckets == calibration_histogram.DEFAULT_NUM_BUCKETS
                and combiner._left == 0.0 and combiner._range == 1.0
                and combiner._prediction_based_bucketing and combiner._fractional_labels)
    if isinstance(combiner, binary_confusion_matrices._BinaryConfusionMatrixCombiner):
        return (combiner._binary_confusion_matrices._thresholds == [THRESHOLD]
                and combiner._example_id_key is None and combiner._enable_fractional_labels
                and combiner._extract_label_prediction_and_weight
                is metric_util.to_label_prediction_example_weight)
    return False


def _share_passes(computations: metric_types.MetricComputations
                  ) -> metric_types.MetricComputations:
    """TFMA's computations, with its histogram and threshold combiners swapped for the shared
    one (TFMA runs a computation once however many metrics list it)."""
    shared = []
    for computation in computations:
        combiner = getattr(computation, "combiner", None)
        if (isinstance(computation, metric_types.MetricComputation)
                and not computation.preprocessors and _shareable(combiner)):
            computation = _one_pass(combiner._eval_config, combiner._key,
                                    combiner._aggregation_type, combiner._class_weights,
                                    combiner._example_weighted)
        shared.append(computation)
    return shared


class OnePassBinaryAccuracy(confusion_matrix_metrics.BinaryAccuracy):
    """TFMA's BinaryAccuracy (prediction > 0.5), reported as `binary_accuracy`, its matrix
    built in the pass it shares with OnePassAUC and OnePassCalibration."""

    def computations(self, *args, **kwargs) -> metric_types.MetricComputations:
        return _share_passes(super().computations(*args, **kwargs))


class OnePassAUC(confusion_matrix_metrics.AUC):
    """TFMA's AUC (ROC, 10,000 thresholds), reported as `auc`, its histogram built in the shared
    pass; NaN (undefined) on a slice that holds one class only, where TFMA reports 0."""

    def computations(self, *args, **kwargs) -> metric_types.MetricComputations:
        computations = _share_passes(super().computations(*args, **kwargs))
        return _undefined_with_one_class(computations, self.name)


def _undefined_with_one_class(computations: metric_types.MetricComputations,
                              name: str) -> metric_types.MetricComputations:
    """The computations, with metric `name` NaN where its histogram (same model, output and
    sub key) holds no positive or no negative weight: a ROC curve needs both."""

    def where(key: metric_types.MetricKey) -> tuple:
        return key.model_name, key.output_name, key.sub_key, key.example_weighted

    histograms = {where(k): k for c in computations
                  if isinstance(c, metric_types.MetricComputation) for k in c.keys
                  if k.name.startswith(calibration_histogram.CALIBRATION_HISTOGRAM_NAME)}

    def guarded(derived: metric_types.DerivedMetricComputation
                ) -> metric_types.DerivedMetricComputation:
        def result(metrics: dict[metric_types.MetricKey, Any]
                   ) -> dict[metric_types.MetricKey, Any]:
            values = derived.result(metrics)
            for key in [k for k in values if k.name == name and where(k) in histograms]:
                buckets = metrics[histograms[where(key)]]
                positives = sum(b.weighted_labels for b in buckets)
                negatives = sum(b.weighted_examples for b in buckets) - positives
                if np.isclose(positives, 0.0) or np.isclose(negatives, 0.0):
                    values[key] = float("nan")
            return values

        return metric_types.DerivedMetricComputation(keys=derived.keys, result=result)

    return [guarded(c) if isinstance(c, metric_types.DerivedMetricComputation)
            and any(k.name == name for k in c.keys) else c for c in computations]


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
    computation = _one_pass(eval_config, key, aggregation_type, class_weights, example_weighted)
    histogram_key = computation.keys[0]

    def result(metrics: dict[metric_types.MetricKey, Any]) -> dict[metric_types.MetricKey, Any]:
        buckets = metrics[histogram_key]
        labels = sum(b.weighted_labels for b in buckets)
        predictions = sum(b.weighted_predictions for b in buckets)
        # TFMA's Calibration: NaN where the slice holds no positive weight.
        return {key: float("nan") if np.isclose(labels, 0.0) else predictions / labels}

    return [computation, metric_types.DerivedMetricComputation(keys=[key], result=result)]


class OnePassCalibration(metric_types.Metric):
    """TFMA's Calibration (weighted predictions ÷ weighted labels), reported as `calibration`,
    summed from the shared pass's histogram buckets."""

    def __init__(self, name: str = CALIBRATION_NAME):
        super().__init__(metric_util.merge_per_key_computations(_calibration), name=name)


_OWN = {cls.__name__: cls for cls in (OnePassBinaryAccuracy, OnePassAUC, OnePassCalibration)}


def metric_config(class_name: str, **fields: Any) -> tfma.MetricConfig:
    """A MetricConfig for a metric class of this module's or of TFMA's (its `module` is this
    module for its own classes: TFMA finds its registered ones by name alone)."""
    return tfma.MetricConfig(class_name=class_name, module=__name__ if class_name in _OWN else "",
                             **fields)


def metric_name(class_name: str) -> str:
    """The name a MetricConfig class reports its metric under: BinaryAccuracy and
    OnePassBinaryAccuracy → binary_accuracy."""
    if class_name in _OWN:
        return _OWN[class_name]().name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", class_name).lower()
