"""The Evaluator's one-pass metrics against TFMA's own, on the same labels and predictions."""

import math

import numpy as np
import pandas as pd
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_specs, metric_types

from pipeline import eval_metrics

TFMA_CLASSES = ("BinaryAccuracy", "AUC", "Calibration")
OURS = ("OnePassBinaryAccuracy", "OnePassAUC", "OnePassCalibration")


def _eval_config(classes: tuple[str, ...], weight_key: str = "") -> tfma.EvalConfig:
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key="label", prediction_key="prediction",
                                    example_weight_key=weight_key)],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["kind"])],
        metrics_specs=[tfma.MetricsSpec(metrics=[eval_metrics.metric_config(c)
                                                 for c in ("ExampleCount", *classes)])])


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 800
    frame = pd.DataFrame({"label": rng.integers(0, 2, n).astype(float),
                          "prediction": rng.random(n),
                          "weight": rng.choice([0.0, 0.5, 1.0, 3.0], n),
                          "kind": rng.choice(["a", "b", "none_positive"], n)})
    frame.loc[frame.kind == "none_positive", "label"] = 0.0
    # On the threshold, and inside the histogram bucket that starts there: accuracy counts
    # 0.5 as negative and 0.50004 as positive, which no histogram bucket tells apart.
    frame.loc[:29, "prediction"] = 0.5
    frame.loc[30:59, "prediction"] = 0.50004
    return frame


def _metrics(frame: pd.DataFrame, config: tfma.EvalConfig, tmp_path) -> dict:
    result = tfma.analyze_raw_data(frame, config, str(tmp_path))
    return {key: {name: float(value["doubleValue"]) for name, value in metrics[""][""].items()}
            for key, metrics in result.slicing_metrics}


@pytest.mark.parametrize("weight_key", ["", "weight"])
def test_every_metric_equals_tfma_in_every_slice(frame, tmp_path, weight_key):
    expected = _metrics(frame, _eval_config(TFMA_CLASSES, weight_key), tmp_path / "tfma")
    ours = _metrics(frame, _eval_config(OURS, weight_key), tmp_path / "ours")
    assert set(ours) == set(expected) and len(ours) == 4  # overall and 3 kinds
    for slice_key, metrics in expected.items():
        assert {"binary_accuracy", "auc", "calibration"} <= set(metrics)
        assert set(ours[slice_key]) == set(metrics)
        for name, value in metrics.items():
            if math.isnan(value):  # calibration without a positive label in the slice
                assert math.isnan(ours[slice_key][name])
                assert slice_key == (("kind", "none_positive"),)
            else:
                assert ours[slice_key][name] == pytest.approx(value, rel=1e-9), (slice_key, name)


def _combiners(classes: tuple[str, ...]) -> int:
    config = _eval_config(classes)
    computations = metric_specs.to_computations(config.metrics_specs, config)
    return len({c for c in computations if isinstance(c, metric_types.MetricComputation)})


def test_one_combiner_serves_accuracy_auc_and_calibration():
    """TFMA's classes run three combiners over the examples besides ExampleCount's (confusion
    matrix, histogram, weighted sums); ours run one."""
    assert _combiners(TFMA_CLASSES) == 1 + 3
    assert _combiners(OURS) == 1 + 1


def test_other_thresholds_keep_tfma_own_computation():
    """A threshold other than 0.5 is not what the shared pass computes: TFMA's combiner stays."""
    instance = metric_specs.metric_instance(
        eval_metrics.metric_config("OnePassBinaryAccuracy", config='{"threshold": 0.3}'))
    combiners = [type(c.combiner).__name__ for c in instance.computations()
                 if isinstance(c, metric_types.MetricComputation)]
    assert combiners == ["_BinaryConfusionMatrixCombiner"]


def test_names_and_modules():
    assert [eval_metrics.metric_name(c) for c in OURS] == ["binary_accuracy", "auc",
                                                          "calibration"]
    assert eval_metrics.metric_name("MeanSquaredError") == "mean_squared_error"
    assert {eval_metrics.metric_config(c).module for c in OURS} == {"pipeline.eval_metrics"}
    assert eval_metrics.metric_config("BinaryAccuracy").module == ""
