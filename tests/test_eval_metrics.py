"""The Evaluator's own metrics against TFMA's, on the same labels and predictions."""

import math

import numpy as np
import pandas as pd
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_specs, metric_types

from pipeline import eval_metrics

CALIBRATIONS = {
    "tfma": tfma.MetricConfig(class_name="Calibration"),
    "ours": tfma.MetricConfig(class_name="HistogramCalibration",
                              module=eval_metrics.module_of("HistogramCalibration")),
}


def _eval_config(metric: tfma.MetricConfig, weight_key: str = "") -> tfma.EvalConfig:
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key="label", prediction_key="prediction",
                                    example_weight_key=weight_key)],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["kind"])],
        metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="AUC"), metric])])


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 800
    frame = pd.DataFrame({"label": rng.integers(0, 2, n).astype(float),
                          "prediction": rng.random(n),
                          "weight": rng.choice([0.0, 0.5, 1.0, 3.0], n),
                          "kind": rng.choice(["a", "b", "none_positive"], n)})
    frame.loc[frame.kind == "none_positive", "label"] = 0.0
    return frame


def _metrics(frame: pd.DataFrame, config: tfma.EvalConfig, tmp_path) -> dict:
    result = tfma.analyze_raw_data(frame, config, str(tmp_path))
    return {key: {name: float(value["doubleValue"]) for name, value in metrics[""][""].items()}
            for key, metrics in result.slicing_metrics}


@pytest.mark.parametrize("weight_key", ["", "weight"])
def test_calibration_equals_tfma_in_every_slice(frame, tmp_path, weight_key):
    tfma_metrics = _metrics(frame, _eval_config(CALIBRATIONS["tfma"], weight_key), tmp_path / "a")
    ours = _metrics(frame, _eval_config(CALIBRATIONS["ours"], weight_key), tmp_path / "b")
    assert set(ours) == set(tfma_metrics) and len(ours) == 4  # overall and 3 kinds
    for slice_key, metrics in tfma_metrics.items():
        assert set(ours[slice_key]) == set(metrics) and "calibration" in metrics
        for name, value in metrics.items():
            if math.isnan(value):  # no positive label in the slice
                assert math.isnan(ours[slice_key][name])
                assert slice_key == (("kind", "none_positive"),)
            else:
                assert ours[slice_key][name] == pytest.approx(value, rel=1e-9), (slice_key, name)


def test_calibration_reuses_the_histogram_auc_computes():
    """One combiner pass over the examples serves AUC and calibration; TFMA's own Calibration
    adds a second."""
    def combiners(metric: tfma.MetricConfig) -> int:
        config = _eval_config(metric)
        computations = metric_specs.to_computations(config.metrics_specs, config)
        return len({c for c in computations if isinstance(c, metric_types.MetricComputation)})

    assert combiners(CALIBRATIONS["tfma"]) == 2
    assert combiners(CALIBRATIONS["ours"]) == 1


def test_module_names_only_its_own_metrics():
    assert eval_metrics.module_of("HistogramCalibration") == "pipeline.eval_metrics"
    assert eval_metrics.module_of("BinaryAccuracy") == ""
