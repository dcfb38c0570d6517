"""What the Evaluator found, read back from its output: metrics per slice, and each failed
threshold in words.

The run summary, the report and the bench read the same files through these functions, so a
threshold is worded, and a metric found, one way everywhere.
"""

import dataclasses

CANDIDATE = "candidate"  # TFMA's model name for the new model when a baseline is compared


def slice_label(pairs) -> str:
    """'overall' or 'feature=value, ...' for (feature, value) pairs of a TFMA slice."""
    return ", ".join(f"{k}={v.decode('utf-8', 'replace') if isinstance(v, bytes) else v}"
                     for k, v in pairs) or "overall"


def slice_metrics(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """Every slice's metrics of a TFMA evaluation (slice label → name → value), for the
    candidate model when a baseline was compared; 'overall' first."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.writers import eval_config_writer

    eval_config = eval_config_writer.load_eval_run(evaluation_uri)[0]
    names = {spec.name for spec in eval_config.model_specs} if eval_config else set()
    result = tfma.load_eval_result(evaluation_uri,
                                   model_name=CANDIDATE if CANDIDATE in names else None)
    slices = {}
    for slice_key, metrics in result.slicing_metrics:
        values = metrics.get("", {}).get("", {})  # the model's one output, no sub-key
        slices[slice_label(slice_key)] = {
            k: float(v["doubleValue"]) for k, v in values.items() if "doubleValue" in v}
    return dict(sorted(slices.items(), key=lambda kv: (kv[0] != "overall", kv[0])))


def overall_metrics(evaluation_uri: str) -> dict[str, float]:
    """Overall-slice metrics of a TFMA evaluation (name → value)."""
    return slice_metrics(evaluation_uri).get("overall", {})


@dataclasses.dataclass(frozen=True)
class Failure:
    """One threshold TFMA found failed."""

    metric: str
    slice: str
    is_change: bool  # a change threshold against the baseline (else a value threshold)
    text: str


def threshold_failures(evaluation_uri: str) -> list[Failure]:
    """Why the Evaluator did not bless: each failed threshold, from TFMA's validation result."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(evaluation_uri)
    failures = []
    for per_slice in result.metric_validations_per_slice:
        where = slice_label((k.column, _slice_value(k))
                            for k in per_slice.slice_key.single_slice_keys)
        for failure in per_slice.failures:
            failures.append(Failure(failure.metric_key.name, where,
                                    failure.metric_threshold.HasField("change_threshold"),
                                    f"{where}: {_describe_failure(failure)}"))
    if not failures and not result.validation_ok:
        failures.append(Failure("", "", False, "TFMA reports missing slices or thresholds; "
                                               f"see {evaluation_uri}"))
    return failures


def validation_failures(evaluation_uri: str) -> list[str]:
    """Why the Evaluator did not bless: one line per failed threshold and slice."""
    return [f.text for f in threshold_failures(evaluation_uri)]


def _slice_value(key) -> str:
    kind = key.WhichOneof("kind")
    value = getattr(key, kind) if kind else ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def value_rule(bounds) -> str:
    """A GenericValueThreshold in words: '>= 0.8500', '>= 0.1000 and <= 0.9000'."""
    limits = []
    if bounds.HasField("lower_bound"):
        limits.append(f">= {bounds.lower_bound.value:.4f}")
    if bounds.HasField("upper_bound"):
        limits.append(f"<= {bounds.upper_bound.value:.4f}")
    return " and ".join(limits)


def change_rule(change) -> str:
    """A GenericChangeThreshold in words, in its direction: 'no drop', 'a drop of at most …'."""
    from tensorflow_model_analysis.proto import config_pb2

    allowed = change.absolute.value if change.HasField("absolute") else 0.0
    if change.direction == config_pb2.MetricDirection.LOWER_IS_BETTER:
        return f"a rise of at most {allowed:.4f}" if allowed > 1e-6 else "no rise"
    return f"a drop of at most {-allowed:.4f}" if allowed < -1e-6 else "no drop"


def _describe_failure(failure) -> str:
    name = failure.metric_key.name
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    if threshold.HasField("change_threshold"):
        return (f"{name} changed by {value:+.4f} against the last blessed model "
                f"(threshold: {change_rule(threshold.change_threshold)})")
    return f"{name} = {value:.4f} (threshold: {value_rule(threshold.value_threshold)})"
