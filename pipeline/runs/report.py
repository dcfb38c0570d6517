"""The run report: one HTML page (plus the PNGs it embeds) about the latest run of a pipeline.

    python -m pipeline.runs.report [--output-dir O] [--pipeline-name P]    (or `make report`)

Everything on the page is read back from what the run left behind: execution states and
durations from MLMD, training curves from the Trainer's TensorBoard logs, metrics, thresholds
and the blessing from the Evaluator's output, anomalies from ExampleValidator, and the pushed
model's signature from its saved_model.pb, and the data's changes that did not stop the run
(pipeline/runs/data_changes.py). `summary.json` beside the page holds the run for scripts.
`make run` writes both at the end of every run, also a failed one: then the page shows which
component failed and why the later ones did not run.
"""

import argparse
import dataclasses
import datetime
import glob
import html
import json
import math
import os
import sys
from typing import Any

from pipeline import names
from pipeline.env_settings import from_env
from pipeline.pipeline_config import ConfigError, PipelineConfig, configure
from pipeline.runs import data_changes, eval_results, run_summary, span_history
from trainer_module import keys

REPORT_DIR = "report"
SUMMARY_FILE = "summary.json"  # beside index.html: the run for scripts
CURVE_SPLITS = ("train", "validation")


@dataclasses.dataclass
class Threshold:
    metric: str
    slice: str
    rule: str
    value: float | None  # what TFMA measured for the rule (None: nothing to compare with)
    passed: bool | None  # TFMA's verdict (None: not checked, e.g. no baseline yet)
    bound: float | None = None  # a value threshold's bound, drawn on the slice chart


@dataclasses.dataclass
class Evaluation:
    uri: str
    slices: dict[str, dict[str, float]]  # "overall" or "feature=value" → metric → value
    thresholds: list[Threshold]
    failures: list[str]


@dataclasses.dataclass
class Signature:
    name: str
    inputs: dict[str, str]
    outputs: dict[str, str]


@dataclasses.dataclass
class ModelCard:
    """The pushed model in one place: what it takes and answers (its serving contract), the
    data it was trained on, and how it scored (per slice) against which thresholds."""

    model: str
    contract: dict
    data_source: str
    examples_uri: str
    span: int | None
    fingerprint: str
    examples_created: str
    split_rows: dict[str, int]


@dataclasses.dataclass
class ReportData:
    config: PipelineConfig
    summary: run_summary.RunSummary
    curves: dict[str, dict[str, list[tuple[int, float]]]]  # split → tag → [(epoch, value)]
    evaluation: Evaluation | None
    anomalies: list[str] | None  # None: ExampleValidator did not run
    unlabelled: dict[str, dict[str, int]]  # split → label column → rows without a value
    pushed_signatures: list[Signature]
    served_versions: list[str]
    card: ModelCard | None = None  # None: nothing pushed in this run
    training: Any = None  # the Trainer's early_stopping.TrainingRecord (None: not recorded)
    # split → datetime column → present values that did not parse (counted as missing)
    unparseable: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    spans: span_history.SpanHistory | None = None  # drift and blessed metric by span
    drifted: list[str] = dataclasses.field(default_factory=list)  # columns past a threshold
    changes: data_changes.DataChanges | None = None  # None: no statistics or schema recorded


class ReportError(RuntimeError):
    """There is no run to report on."""


# --- reading what the run left behind ---------------------------------------------------------

def training_curves(logs_dir: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Per-epoch scalars Keras' TensorBoard callback wrote (epoch_loss, epoch_auc, ...)."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_file_loader

    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for split in CURVE_SPLITS:
        for path in sorted(glob.glob(os.path.join(logs_dir, split, "events.out.tfevents.*"))):
            for event in event_file_loader.EventFileLoader(path).Load():
                for value in event.summary.value:
                    if not value.tag.startswith("epoch_"):
                        continue
                    number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                              else value.simple_value)
                    curves.setdefault(split, {}).setdefault(value.tag[len("epoch_"):], []).append(
                        (int(event.step), number))
    for tags in curves.values():
        for tag, points in tags.items():
            tags[tag] = sorted(dict(points).items())  # a resumed run rewrites epochs: last wins
    return curves


def _spec_label(spec) -> str:
    return eval_results.slice_label(
        [(key, "*") for key in spec.feature_keys] + list(spec.feature_values.items()))


def evaluation(uri: str) -> Evaluation:
    """Metrics per slice, and every configured threshold with TFMA's verdict on it."""
    from tensorflow_model_analysis.writers import eval_config_writer

    from pipeline.components import eval_metrics

    eval_config = eval_config_writer.load_eval_run(uri)[0]
    slices = eval_results.slice_metrics(uri)
    failures = eval_results.threshold_failures(uri)
    failed = {(f.metric, f.slice, f.is_change) for f in failures}
    thresholds = []
    for metrics_spec in eval_config.metrics_specs:
        for metric in metrics_spec.metrics:
            name = eval_metrics.metric_name(metric.class_name)
            rules = [(metric.threshold, ["overall"])] if metric.HasField("threshold") else []
            rules += [(t.threshold, [_spec_label(s) for s in t.slicing_specs])
                      for t in metric.per_slice_thresholds]
            for threshold, where in rules:
                for label in where:
                    thresholds.extend(_thresholds(name, label, threshold, slices.get(label, {}),
                                                  failed))
    return Evaluation(uri, slices, thresholds, [f.text for f in failures])


def _thresholds(name: str, label: str, threshold, values: dict[str, float],
                failed: set[tuple[str, str, bool]]) -> list[Threshold]:
    rows = []
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        value = values.get(name)
        rows.append(Threshold(
            name, label, eval_results.value_rule(bounds), value,
            None if value is None else (name, label, False) not in failed,
            bounds.lower_bound.value if bounds.HasField("lower_bound")
            else bounds.upper_bound.value if bounds.HasField("upper_bound") else None))
    if threshold.HasField("change_threshold"):
        diff = values.get(f"{name}_diff")  # absent when there was no baseline to compare with
        rows.append(Threshold(
            name, label, f"{eval_results.change_rule(threshold.change_threshold)} vs. the last "
            "blessed model", diff, None if diff is None else (name, label, True) not in failed))
    return rows


def signatures(saved_model_dir: str) -> list[Signature]:
    """Serving signatures read from saved_model.pb (the graph itself is not loaded)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())

    def describe(tensor) -> str:
        dims = ["?" if d.size < 0 else str(d.size) for d in tensor.tensor_shape.dim]
        return f"{tf.dtypes.as_dtype(tensor.dtype).name} [{', '.join(dims)}]"

    found = []
    for name, signature in sorted(saved_model.meta_graphs[0].signature_def.items()):
        if name.startswith("__"):
            continue
        found.append(Signature(name, {k: describe(v) for k, v in sorted(signature.inputs.items())},
                               {k: describe(v) for k, v in sorted(signature.outputs.items())}))
    return found


def collect(config: PipelineConfig) -> ReportData:
    summary = run_summary.latest_run(config.metadata_path, config.pipeline_name)
    if summary is None:
        raise ReportError(
            f"no run of pipeline {config.pipeline_name!r} is recorded in {config.metadata_path}: "
            "run the pipeline first (`make run`), or pass the --output-dir it used")
    # TensorFlow and TFX load only once there is a run to read.
    from tfx.types import artifact_utils

    from pipeline.components import anomaly_gate
    from trainer_module import early_stopping

    curves, training = {}, None
    model_run = summary.output(names.TRAINER, names.MODEL_RUN)
    if model_run is not None:
        curves = training_curves(os.path.join(model_run.uri, "logs"))
        training = early_stopping.read_record(model_run.uri)

    anomalies = None
    unlabelled: dict[str, dict[str, int]] = {}
    found = summary.output(names.EXAMPLE_VALIDATOR, names.ANOMALIES)
    statistics = summary.output(names.STATISTICS_GEN, names.STATISTICS)
    def splits(artifact) -> list[str]:
        return artifact_utils.decode_split_names(artifact.properties["split_names"].string_value)

    by_split = (anomaly_gate.split_statistics(statistics.uri, splits(statistics))
                if statistics is not None else None)
    if found is not None and by_split is not None:
        anomalies = (anomaly_gate.empty_splits(by_split)
                     + anomaly_gate.describe_anomalies(found.uri, splits(found)))
        spec = config.spec
        if spec.missing_labels == "drop":
            unlabelled = anomaly_gate.unlabelled_rows(
                by_split,
                list(spec.rule.sources if spec.rule else (spec.label,)))

    drift = summary.output(names.DRIFT_VALIDATOR, names.DRIFT_REPORT)
    drifted = ([d.describe() for d in anomaly_gate.drifted(drift.uri)[1]]
               if drift is not None else [])

    examples = summary.output(names.CSV_EXAMPLE_GEN, names.EXAMPLES)
    unparseable = (unparseable_dates(examples.uri, splits(examples), config.spec)
                   if examples is not None else {})
    pushed = summary.pushed_destination
    card = model_card(config, summary, pushed, by_split or {}) if pushed else None
    served_versions = (sorted(os.listdir(config.serving_model_dir))
                       if os.path.isdir(config.serving_model_dir) else [])
    return ReportData(
        config=config,
        summary=summary,
        curves=curves,
        evaluation=evaluation(summary.evaluation_uri) if summary.evaluation_uri else None,
        anomalies=anomalies,
        drifted=drifted,
        unlabelled=unlabelled,
        pushed_signatures=signatures(pushed) if pushed else [],
        served_versions=served_versions,
        card=card,
        training=training,
        unparseable=unparseable,
        spans=span_history.read(config.metadata_path, config.pipeline_name,
                                config.spec.task_info.metrics[
                                    config.spec.task_info.headline].tfma_name),
        changes=data_changes.read(summary, by_split),
    )


def unparseable_dates(examples_uri: str, split_names: list[str],
                      spec: Any) -> dict[str, dict[str, int]]:
    """Per split, per datetime column: the values present that its format does not parse
    (Transform counts them as missing)."""
    import tensorflow as tf

    from trainer_module import datetimes

    columns = {f.column: datetimes.pattern(f.params["format"]) for f in spec.features
               if f.role == "datetime"}
    if not columns:
        return {}
    parsing = {c: tf.io.VarLenFeature(tf.string) for c in columns}
    counts: dict[str, dict[str, int]] = {}
    for split in split_names:
        files = tf.io.gfile.glob(os.path.join(examples_uri, keys.split_dir(split), "*"))
        found = dict.fromkeys(columns, 0)
        batches = (tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096)
                   .map(lambda r: {c: v.values for c, v in tf.io.parse_example(r, parsing)
                                   .items()}))
        for batch in batches.as_numpy_iterator():
            for column, pattern in columns.items():
                found[column] += sum(pattern.fields(v.decode("utf-8", "replace")) is None
                                     for v in batch[column])
        counts[split] = found
    return counts


def model_card(config: PipelineConfig, summary: run_summary.RunSummary, pushed: str,
               by_split: dict) -> ModelCard | None:
    """The card of the model pushed to `pushed` (None when it holds no serving contract);
    `by_split`: StatisticsGen's statistics per split ({} when there are none)."""
    from pipeline.components import anomaly_gate
    from trainer_module.feature_signature import read_contract

    try:
        contract, _ = read_contract(pushed)
    except FileNotFoundError:
        return None
    examples = summary.output(names.CSV_EXAMPLE_GEN, names.EXAMPLES)
    created = ""
    if examples is not None and examples.create_time_since_epoch:
        created = datetime.datetime.fromtimestamp(
            examples.create_time_since_epoch / 1000).astimezone().strftime("%Y-%m-%d %H:%M %Z")
    custom = examples.custom_properties if examples is not None else {}
    # ExampleGen records the span it read and a fingerprint of the input files (count, bytes,
    # checksums): together they say which data the model saw.
    span = custom["span"].int_value if "span" in custom else None
    fingerprint = custom["input_fingerprint"].string_value if "input_fingerprint" in custom else ""
    return ModelCard(
        model=pushed, contract=contract,
        data_source=config.bigquery_query or config.data_dir,
        examples_uri=examples.uri if examples is not None else "",
        span=span, fingerprint=fingerprint, examples_created=created,
        split_rows=anomaly_gate.example_counts(by_split))


# --- charts ------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    return plt


def plot_curves(curves, path: str) -> None:
    plt = _pyplot()
    tags = sorted({tag for split in curves.values() for tag in split},
                  key=lambda t: (t != "loss", t))
    fig, axes = plt.subplots(1, len(tags), figsize=(4.2 * len(tags), 3.2), squeeze=False)
    for ax, tag in zip(axes[0], tags, strict=True):
        for split in CURVE_SPLITS:
            points = curves.get(split, {}).get(tag)
            if points:
                epochs, values = zip(*points, strict=True)
                ax.plot([e + 1 for e in epochs], values, marker="o", label=split)
        ax.set_title(tag)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_slices(evaluation: Evaluation, metric: str, path: str, unit_range: bool) -> None:
    plt = _pyplot()
    labels = [s for s, m in evaluation.slices.items() if metric in m]
    values = [evaluation.slices[s][metric] for s in labels]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.2))
    ax.barh(labels, values, color=["#1f6feb" if s == "overall" else "#8cb4f0" for s in labels])
    for threshold in evaluation.thresholds:
        if threshold.metric == metric and threshold.bound is not None:
            ax.axvline(threshold.bound, color="#d1242f", linestyle="--",
                       label=f"threshold ({threshold.slice}) {threshold.bound:.2f}")
            ax.legend(loc="lower right")
    ax.invert_yaxis()
    if unit_range:
        ax.set_xlim(0, 1)
    ax.set_xlabel(metric)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_spans(history: span_history.SpanHistory, metric: str, path: str) -> None:
    """Left: each column's drift from the previous span, as a share of its threshold (past 1
    stops the run). Right: the headline metric of each blessed model by its span."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    spans = sorted(history.drift)
    for column in sorted({c for d in history.drift.values() for c in d}):
        points = [(s, history.drift[s][column]) for s in spans if column in history.drift[s]]
        left.plot([s for s, _ in points], [d / t for _, (d, t) in points], marker="o",
                  label=column)
    left.axhline(1.0, color="#d1242f", linestyle="--", label="threshold")
    left.set_xlabel("span")
    left.set_ylabel("distance / threshold")
    left.set_title("drift from the previous span")
    left.legend(fontsize=7, ncol=2)
    if history.blessed:
        right.plot(*zip(*history.blessed, strict=True), marker="o", color="#1f6feb")
    right.set_xlabel("span evaluated on")
    right.set_title(f"blessed models' {metric}")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _spans_section(data: ReportData, image: str | None) -> str:
    history = data.spans
    if history is None or not history.several_spans:
        return "<p>One span so far: nothing to compare across spans.</p>"
    columns = sorted({c for d in history.drift.values() for c in d})
    rows = [[span, *(f"{d[c][0]:.4f} / {d[c][1]:g}" if c in d else "" for c in columns)]
            for span, d in sorted(history.drift.items())]
    return ((f'<img src="{image}" alt="drift and blessed metric by span">' if image else "")
            + "<p>Drift from the previous span (distance / threshold):</p>"
            + _table("drift", ["span", *columns], rows)
            + _table("blessed-by-span", ["span", "metric"],
                     [[s, _num(v)] for s, v in history.blessed]))


def plot_durations(summary: run_summary.RunSummary, path: str) -> None:
    plt = _pyplot()
    nodes = list(summary.nodes.values())
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(nodes) + 1.2))
    colors = {"COMPLETE": "#2da44e", "CACHED": "#8c959f", "FAILED": "#d1242f"}
    ax.barh([n.node_id for n in nodes], [n.seconds for n in nodes],
            color=[colors.get(n.state, "#bf8700") for n in nodes])
    ax.invert_yaxis()
    ax.set_xlabel("seconds (MLMD: execution registered → last update)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- the page ----------------------------------------------------------------------------------

def _e(value: object) -> str:
    return html.escape(str(value))


def _table(table_id: str, header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _num(value: float | None, digits: int = 4) -> str:
    """A metric's value; "n/a" where it is undefined on the slice (NaN: AUC or calibration
    where the slice holds one class), "—" where it was not computed."""
    if value is None:
        return "—"
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def _blessing_section(data: ReportData) -> str:
    summary, evaluation = data.summary, data.evaluation
    if summary.blessed is None:
        return ('<p id="blessing">Not evaluated: the Evaluator did not run in this run '
                f'(stopped at {_e(", ".join(summary.failed_nodes) or "an earlier component")}).'
                "</p>")
    skipped = (f'<p id="baseline">Baseline: skipped — {_e(summary.baseline_skipped)}.</p>'
               if summary.baseline_skipped else "")
    if summary.blessed:
        verdict = "<p id=\"blessing\" class=\"ok\">Blessed: yes — every threshold passed.</p>"
    else:
        reasons = "".join(f"<li>{_e(r)}</li>" for r in evaluation.failures)
        verdict = (f'<p id="blessing" class="bad">Blessed: no — the model failed the '
                   f"Evaluator's thresholds:</p><ul id=\"why-not-blessed\">{reasons}</ul>")
    return verdict + skipped + _thresholds_table("thresholds", evaluation)


def _thresholds_table(table_id: str, evaluation: Evaluation) -> str:
    rows = [[t.metric, t.slice, t.rule,
             _num(t.value) if t.value is not None else "no baseline yet: not checked",
             {True: "pass", False: "FAIL", None: "—"}[t.passed]] for t in evaluation.thresholds]
    return _table(table_id, ["metric", "slice", "threshold", "value", "result"], rows)


def _push_section(data: ReportData) -> str:
    pushed = data.summary.pushed_destination
    served = (f"<p>Serving dir {_e(data.config.serving_model_dir)} holds versions: "
              f"{_e(', '.join(data.served_versions) or 'none')}.</p>")
    if not pushed:
        why = ("the model was not blessed" if data.summary.blessed is False
               else "the Pusher did not run")
        return f'<p id="pushed">Pushed: nothing in this run ({_e(why)}).</p>' + served
    parts = [f'<p id="pushed">Pushed: <code>{_e(pushed)}</code></p>']
    for signature in data.pushed_signatures:
        rows = ([["input", k, v] for k, v in signature.inputs.items()]
                + [["output", k, v] for k, v in signature.outputs.items()])
        table = _table(f"signature-{signature.name}", ["tensor", "name", "dtype [shape]"], rows)
        parts.append(f"<h3>Signature {_e(signature.name)}</h3>{table}"
                     if signature.name == keys.SERVING_SIGNATURE else
                     f"<details><summary>Signature {_e(signature.name)}</summary>{table}</details>")
    return "".join(parts) + served


def _card_section(data: ReportData) -> str:
    card = data.card
    if card is None:
        return ('<p id="card">No model card: nothing was pushed in this run (or the pushed '
                "model carries no serving contract).</p>")
    contract = card.contract
    parts = [f'<p id="card">Model <code>{_e(card.model)}</code> · dataset '
             f'{_e(contract["dataset"])} · task {_e(contract["task"])} · label '
             f'{_e(contract["label"])}</p>',
             f'<h3>Inputs (signature {_e(contract["signature"])}; serving_default takes the '
             "same features as tf.Examples)</h3>",
             _table("card-inputs", ["feature", "input", "type", "JSON value", "required",
                                    "missing value"],
                    [[i["name"], i.get("key", i["name"]), i["type"], i["dtype"],
                      "yes" if i["required"] else "no", i["missing"]]
                     for i in contract["inputs"]]),
             "<h3>Outputs</h3>",
             _table("card-outputs", ["output", "meaning"],
                    [[o["name"], o["meaning"]] for o in contract["outputs"]]),
             "<h3>Training data</h3>",
             _table("card-data", ["source", "examples", "span", "read at"]
                    + [f"{split} rows" for split in card.split_rows],
                    [[card.data_source, card.examples_uri,
                      "—" if card.span is None else card.span, card.examples_created or "—"]
                     + list(card.split_rows.values())]),
             f'<p id="card-fingerprint">Input files: <code>{_e(card.fingerprint or "—")}'
             "</code></p>"]
    evaluation = data.evaluation
    if evaluation is not None:
        task = data.config.spec.task_info
        metrics = ["example_count"] + [m.tfma_name for m in task.metrics.values()]
        parts += ["<h3>Metrics per slice (eval split)</h3>",
                  _table("card-metrics", ["slice"] + metrics,
                         [[label] + [_num(values.get(m), 0 if m == "example_count" else 4)
                                     for m in metrics]
                          for label, values in evaluation.slices.items()]),
                  "<h3>Thresholds</h3>", _thresholds_table("card-thresholds", evaluation)]
    return "".join(parts)


def _anomalies_section(data: ReportData) -> str:
    unlabelled = "".join(
        f'<p class="unlabelled">Split {_e(split)}: {count} row(s) without a value in '
        f"{_e(column)}, left out of training and evaluation (missing = \"drop\").</p>"
        for split, counts in data.unlabelled.items() for column, count in counts.items())
    unlabelled += "".join(
        f'<p class="unparseable">Split {_e(split)}: {count} value(s) of {_e(column)} are no '
        f"date its format parses; they count as missing.</p>"
        for split, counts in data.unparseable.items() for column, count in counts.items()
        if count)
    drifted = ("<p>Drift from the previous span, past its threshold (the gate stops on it):</p>"
               '<ul id="drifted" class="bad">'
               + "".join(f"<li>{_e(d)}</li>" for d in data.drifted) + "</ul>"
               if data.drifted else "")
    if data.anomalies is None:
        return drifted + '<p id="anomalies">ExampleValidator did not run in this run.</p>'
    if not data.anomalies:
        return (drifted + '<p id="anomalies" class="ok">None: every split matches the '
                "schema.</p>" + unlabelled)
    items = "".join(f"<li>{_e(a)}</li>" for a in data.anomalies)
    return drifted + f'<ul id="anomalies" class="bad">{items}</ul>' + unlabelled


def _changes_section(data: ReportData) -> str:
    if data.changes is None:
        return '<p id="changes">No statistics of this run to compare with the schema.</p>'
    lines = data.changes.lines()
    if not lines:
        return ('<p id="changes" class="ok">None: every category value is in its domain, and '
                "no ignored column changed.</p>")
    return ('<ul id="changes">' + "".join(f"<li>{_e(line)}</li>" for line in lines)
            + "</ul>")


def _budget(record) -> str:
    """The training record as one sentence."""
    if record is None:
        return ""
    kept = (f"kept epoch {record.best_epoch} (validation loss {record.best_val_loss:.4f})"
            if record.best_epoch else "kept the last epoch (no validation slice)")
    stop = "stopped early" if record.stopped_early else "ran its whole budget"
    rows = record.fit_rows + record.validation_rows
    refit = ""
    if record.refit_epochs and (record.refit_kept or record.refit_val_loss is None):
        refit = (f" The exported model is a refit on all {rows:,} training rows for "
                 f"{record.refit_epochs} epochs.")
    elif record.refit_epochs:
        refit = (f" A refit on all {rows:,} training rows for {record.refit_epochs} epochs scored "
                 f"a validation loss of {record.refit_val_loss:.4f}, above the kept epoch's: it "
                 "was discarded, and the kept epoch's model is the one exported.")
    learning = (" The budget ended while the validation loss was still falling: the model was "
                "still learning, and a larger budget would likely train a better one."
                if record.still_learning else "")
    folds = (f" This is the first of {record.folds} models, each trained holding out a slice "
             "of its own (validation_folds); the exported model answers the mean of theirs, "
             "and each fold's record and curves are in its fold_<i> folder of the model run."
             if record.folds > 1 else "")
    return (f'<p id="budget">Budget: {_e(record.budget)}; trained {record.epochs_run} of '
            f"{record.epochs_budget} epochs ({stop}), {kept}; {record.fit_rows:,} training "
            f"rows, {record.validation_rows:,} in the validation slice.{refit}{learning}"
            f"{folds}</p>")


def _no_output(summary: run_summary.RunSummary, node_id: str, what: str) -> str:
    """Why `node_id` left nothing to show: it failed, it never started, or it logged nothing."""
    node = summary.nodes.get(node_id)
    if node is not None and node.state not in run_summary.OK_STATES:
        return (f"<p>The {what} failed in this run ({_e(node.state)}): the run's console and "
                "its log under OUTPUT_DIR/logs/ hold its error.</p>")
    if node is None:
        stopped = ", ".join(summary.failed_nodes) or "an earlier component"
        return f"<p>The {what} did not run in this run (stopped at {_e(stopped)}).</p>"
    return f"<p>The {what} ran but recorded nothing to show here.</p>"


def _training_section(data: ReportData, image: str | None) -> str:
    if not data.curves:
        return _no_output(data.summary, names.TRAINER, "Trainer")
    tags = sorted({t for s in data.curves.values() for t in s}, key=lambda t: (t != "loss", t))
    rows = []
    for split in CURVE_SPLITS:
        if split in data.curves:
            last = {t: data.curves[split][t][-1][1] for t in tags if t in data.curves[split]}
            epochs = max(len(points) for points in data.curves[split].values())
            rows.append([split, epochs] + [_num(last.get(t)) for t in tags])
    return (_budget(data.training) + f'<img src="{image}" alt="training curves">'
            + _table("training", ["split", "epochs"] + [f"final {t}" for t in tags], rows))


def _evaluation_section(data: ReportData, image: str | None) -> str:
    if data.evaluation is None:
        return _no_output(data.summary, names.EVALUATOR, "Evaluator")
    metrics = sorted({m for values in data.evaluation.slices.values() for m in values
                      if not m.endswith("_diff")}, key=lambda m: (m != "example_count", m))
    rows = [[label] + [_num(values.get(m), 0 if m == "example_count" else 4) for m in metrics]
            for label, values in data.evaluation.slices.items()]
    return (f'<p>Evaluation: <code>{_e(data.evaluation.uri)}</code></p>'
            + (f'<img src="{image}" alt="metric per slice">' if image else "")
            + _table("metrics", ["slice"] + metrics, rows))


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #1f2328; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; }
th, td { border: 1px solid #d0d7de; padding: 3px 9px; text-align: left; }
th { background: #f6f8fa; }
.ok { color: #1a7f37; } .bad { color: #d1242f; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
code { background: #f6f8fa; padding: 1px 4px; }
"""


def render(data: ReportData, images: dict[str, str]) -> str:
    summary = data.summary
    status = ("succeeded" if summary.succeeded
              else f"FAILED at {', '.join(summary.failed_nodes)}")
    durations = [[n.node_id, n.state, f"{n.seconds:.1f}"] for n in summary.nodes.values()]
    durations.append(["component time", "", f"{summary.component_seconds:.1f}"])
    sections = [
        ("Outcome", f'<p id="status" class="{"ok" if summary.succeeded else "bad"}">Run '
                    f"{_e(summary.run_id)} {_e(status)}.</p>" + _blessing_section(data)),
        ("Pushed model", _push_section(data)),
        ("Model card", _card_section(data)),
        ("Data anomalies and drift (ExampleValidator, DriftValidator)",
         _anomalies_section(data)),
        ("Data changes that do not stop a run", _changes_section(data)),
        ("Training (Trainer's TensorBoard logs)",
         _training_section(data, images.get("training"))),
        ("Evaluation (Evaluator)", _evaluation_section(data, images.get("slices"))),
        ("Spans (DriftValidator, blessed models)", _spans_section(data, images.get("spans"))),
        ("Component durations (MLMD)",
         f'<img src="{images["durations"]}" alt="component durations">'
         + _table("durations", ["component", "state", "seconds"], durations)),
    ]
    generated = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    body = "".join(f"<h2>{_e(title)}</h2>{content}" for title, content in sections)
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Run report: {_e(data.config.pipeline_name)}</title>"
            f"<style>{_STYLE}</style></head><body>"
            f"<h1>Run report: {_e(data.config.pipeline_name)}</h1>"
            f"<p>Dataset: <code>{_e(data.config.dataset)}</code> "
            f"({_e(data.config.spec.task)}) · data: "
            f"<code>{_e(data.config.data_dir)}</code> · outputs: "
            f"<code>{_e(data.config.output_dir)}</code> · written {_e(generated)}</p>"
            f"{body}</body></html>")


def write_report(config: PipelineConfig, data: ReportData | None = None) -> str:
    """Writes <output_dir>/report/index.html, its charts and summary.json from `data` (else
    what `collect` reads); returns the page's path."""
    data = data or collect(config)
    out = os.path.join(config.output_dir, REPORT_DIR)
    os.makedirs(out, exist_ok=True)
    images = {"durations": "durations.png"}
    plot_durations(data.summary, os.path.join(out, images["durations"]))
    if data.curves:
        images["training"] = "training.png"
        plot_curves(data.curves, os.path.join(out, images["training"]))
    task = config.spec.task_info
    headline = task.metrics[task.headline].tfma_name
    if data.evaluation and any(headline in m for m in data.evaluation.slices.values()):
        images["slices"] = "slices.png"
        plot_slices(data.evaluation, headline, os.path.join(out, images["slices"]),
                    unit_range=task.metrics[task.headline].higher_is_better)
    if data.spans and data.spans.several_spans:
        images["spans"] = "spans.png"
        plot_spans(data.spans, headline, os.path.join(out, images["spans"]))
    for stale in {"training.png", "slices.png", "spans.png"} - set(images.values()):
        if os.path.exists(os.path.join(out, stale)):
            os.remove(os.path.join(out, stale))
    page = os.path.join(out, "index.html")
    with open(page + ".tmp", "w", encoding="utf-8") as f:
        f.write(render(data, images))
    os.replace(page + ".tmp", page)
    _write_json(os.path.join(out, SUMMARY_FILE), summary_dict(data))
    return page


def summary_dict(data: ReportData) -> dict:
    """The run in a form a script reads: its states, outcome, metrics, push and the data's
    changes (what the page shows in words)."""
    summary = data.summary
    return {
        "run": summary.run_id,
        "pipeline": data.config.pipeline_name,
        "data_dir": data.config.data_dir,
        "span": data.config.span,
        "succeeded": summary.succeeded,
        "failed": summary.failed_nodes,
        "states": {n.node_id: n.state for n in summary.nodes.values()},
        "metrics": (eval_results.overall_metrics(summary.evaluation_uri)
                    if summary.evaluation_uri else {}),
        "blessed": summary.blessed,
        "pushed": summary.pushed_destination,
        "anomalies": data.anomalies,
        "drifted": data.drifted,
        "changes": data.changes.as_dict() if data.changes else None,
    }


def _write_json(path: str, value: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
    os.replace(path + ".tmp", path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Write the HTML report of the latest run.")
    parser.add_argument("--dataset", help="a name under schemas/ (default: taxi)")
    parser.add_argument("--output-dir", help="the run's output dir (default: output/)")
    parser.add_argument("--pipeline-name")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("dataset", args.dataset), ("output_dir", args.output_dir),
                                   ("pipeline_name", args.pipeline_name)) if v is not None}
    try:
        config = configure(from_env(), **overrides)
        print(f"Run report: {write_report(config)}")
    except (ConfigError, ReportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
