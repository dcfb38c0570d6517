"""The Evaluator's one-pass metrics against TFMA's own, on the same labels and predictions."""

import math

import numpy as np
import pandas as pd
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    metric_specs,
    metric_types,
)

from pipeline.components import eval_metrics

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
            elif name == "auc" and slice_key == (("kind", "none_positive"),):
                # One class: no ROC curve. TFMA says 0; ours says undefined (the report's n/a).
                assert value == 0.0 and math.isnan(ours[slice_key][name])
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
    assert {eval_metrics.metric_config(c).module for c in OURS} == {eval_metrics.__name__}
    assert eval_metrics.metric_config("BinaryAccuracy").module == ""


def _inputs(**values) -> metric_types.StandardMetricInputs:
    return metric_types.StandardMetricInputs(values)


def _arrays(label, prediction, weight=None) -> dict:
    values = {"labels": np.array([label]), "predictions": np.array([prediction], np.float32)}
    if weight is not None:
        values["example_weights"] = np.array([weight], np.float32)
    return values


# Example forms TFMA's extraction accepts: the plain ones the shared pass reads directly
# (one 0/1 label, one prediction, one weight, zero included) and the ones it hands to TFMA
# (fractional labels, dict-valued predictions, per-model dicts).
PLAIN = [_arrays(1, 0.5), _arrays(0, 0.50004), _arrays(1.0, 0.9, 3.0), _arrays(0, 0.2, 0.0),
         _arrays(1, 0.7, 0.5), _arrays(0, 0.1, 2.0), _arrays(1, 0.0),
         {"labels": np.array([[0.0]]), "predictions": np.array([[0.3]], np.float32)}]
OTHER = [_arrays(0.25, 0.6, 2.0), _arrays(0.5, 0.5),
         {"labels": np.array([1.0]), "predictions": {"prediction": np.array([0.8], np.float32)}}]


def _per_model(values: dict, model: str) -> dict:
    """The same example as TFMA holds it when a baseline is evaluated beside the candidate."""
    baseline = {k: 1 - v if k == "labels" else v + 1 for k, v in values.items()
                if k != "predictions"}  # anything read from here instead fails
    baseline["predictions"] = np.array([0.5], np.float32)
    return {k: {model: v, "baseline": baseline[k]} for k, v in values.items()}


def _outputs(combiners, examples: list[dict]) -> dict:
    result = {}
    for combiner in combiners:
        accumulator = combiner.create_accumulator()
        for example in examples:
            accumulator = combiner.add_input(accumulator, _inputs(**example))
        result.update(combiner.extract_output(
            combiner.merge_accumulators([accumulator, combiner.create_accumulator()])))
    return result


@pytest.mark.parametrize("model_name", ["", "candidate"])
@pytest.mark.parametrize("example_weighted", [False, True])
def test_shared_pass_extracts_every_example_as_tfma_does(model_name, example_weighted):
    """The shared combiner against TFMA's own histogram and matrix combiners, fed the same
    examples one by one: equal histogram buckets and matrices for every form of example."""
    specs = ([tfma.ModelSpec(name=model_name, prediction_key="prediction"),
              tfma.ModelSpec(name="baseline", prediction_key="prediction", is_baseline=True)]
             if model_name else [tfma.ModelSpec(prediction_key="prediction")])
    args = dict(eval_config=tfma.EvalConfig(model_specs=specs), model_name=model_name,
                example_weighted=example_weighted)
    [histogram] = calibration_histogram.calibration_histogram(**args)
    matrices = binary_confusion_matrices.binary_confusion_matrices(
        thresholds=[eval_metrics.THRESHOLD], use_histogram=False, **args)[0]
    ours = eval_metrics._one_pass(
        args["eval_config"], metric_types.MetricKey(name="any", model_name=model_name,
                                                     example_weighted=example_weighted),
        None, None, example_weighted).combiner

    def held(examples: list[dict]) -> list[dict]:
        return [_per_model(e, model_name) for e in examples] if model_name else examples

    assert all(ours._direct(_inputs(**e)) is not None for e in held(PLAIN))  # read directly
    assert all(ours._direct(_inputs(**e)) is None for e in held(OTHER))  # TFMA's extraction
    for examples in (PLAIN, OTHER, PLAIN + OTHER, PLAIN[3:4]):
        expected = _outputs([histogram.combiner, matrices.combiner], held(examples))
        assert _outputs([ours], held(examples)) == expected
        assert len(expected) == 2


def test_shared_pass_refuses_labels_tfma_refuses():
    ours = eval_metrics._one_pass(None, metric_types.MetricKey(name="any"), None, None,
                                  False).combiner
    for label in (2, -1, 1.5):
        with pytest.raises(ValueError, match="label must be within"):
            ours.add_input(ours.create_accumulator(), _inputs(**_arrays(label, 0.5)))
