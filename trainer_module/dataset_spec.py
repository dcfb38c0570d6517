"""A dataset spec: the label and task, each column's role, slices and the Evaluator's thresholds.

One spec per dataset, kept beside its curated schema (`schemas/<name>/spec.toml`). The pipeline
reads the file, checks it against the schema and passes it, as a plain dict, to Transform and
the Trainer through `custom_config`, so Transform's `preprocessing_fn`, the model, its head and
the serving signature are generated from the same reviewed text. This module needs no
TensorFlow: a bad spec fails before TensorFlow loads, naming the file, key, value and the
expected form.
"""

import dataclasses
from typing import Any

from trainer_module import numbers, tasks, tf_names
from trainer_module.config import ModelConfig, TrainerConfig, TrainerConfigError
from trainer_module.features import KINDS, NUMERIC_TYPES, PACKED_NAMES, Output, transformed_name
from trainer_module.keys import DATASET_SPEC_KEY

RULE_OPS = (">", ">=", "<", "<=")
MISSING_LABELS = ("stop", "drop")
SECTIONS = ("label", "features", "evaluation", "training", "model", "tpu", "csv", "spans",
            "drift")
CSV_KEYS = ("delimiter", "missing_values", "formats")
DRIFT_KEYS = ("thresholds", "warn_only")
# The span folder layouts a [spans] table may name (pipeline/spans/folders.py reads them).
SPAN_LAYOUTS = ("numbered", "dated")
# The delimiters a [csv] table may name.
DELIMITERS = (",", ";", "\t", "|")
# The budget's keys in [training] (whole numbers), and the Trainer settings a spec may give
# there (each checked by the Trainer's config itself).
BUDGET_KEYS = ("train_steps", "epochs", "per_replica_batch_size")
TRAINING_CONFIG_KEYS = ("learning_rate", "weight_decay", "early_stopping_patience",
                        "refit_factor", "refit_schedule", "lr_floor", "label_smoothing",
                        "validation_fraction", "validation_folds")
TRAINING_KEYS = (*BUDGET_KEYS, *TRAINING_CONFIG_KEYS, "window_spans")
# The network a spec may give ([model]): ModelConfig's settings of the same names.
MODEL_KEYS = ("hidden_units", "embedding_dim", "dropout", "l2", "cross_buckets",
              "ensemble_size", "ensemble_kind", "wide")


class SpecError(ValueError):
    """A dataset spec is malformed or does not fit its schema or data."""


@dataclasses.dataclass(frozen=True)
class LabelRule:
    """A binary label derived from numeric columns: `column op times × of`, or `column op value`.

    Taxi's big tipper is `tips > 0.2 × fare`; a late flight is `delay > 15`. `column` holds the
    answer, so it is never a feature and is absent when the model serves; `of` may be a feature
    (taxi's fare is one), else it is absent when serving too.
    """

    column: str
    op: str
    value: float | None = None
    of: str | None = None
    times: float = 1.0

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.column,) + ((self.of,) if self.of else ())

    def describe(self) -> str:
        right = (f"{self.times:g} × {self.of}" if self.of else f"{self.value:g}")
        return f"{self.column} {self.op} {right}"

    def apply(self, row: dict[str, Any]) -> float | None:
        """The rule on one raw row of numbers (None: a source is missing), outside TensorFlow:
        for baselines and checks that read CSV or tf.Example values."""
        left = row.get(self.column)
        right = row.get(self.of) if self.of else self.value
        if left in (None, "") or right in (None, ""):
            return None
        left, right = float(left), float(right) * (self.times if self.of else 1.0)
        return float({">": left > right, ">=": left >= right, "<": left < right,
                      "<=": left <= right}[self.op])


@dataclasses.dataclass(frozen=True)
class Feature:
    """One use of a raw column: its role (a kind in trainer_module/features.py) and parameters."""

    column: str
    role: str
    params: dict[str, Any]

    @property
    def kind(self):
        return KINDS[self.role]

    def outputs(self):
        return self.kind.outputs(self.column, self.params)


@dataclasses.dataclass(frozen=True)
class Threshold:
    """A bound on an Evaluator metric (the task's own), overall, and the change allowed against
    the last blessed model (in the worse direction; None: not compared)."""

    metric: str
    bound: float
    allowed_change: float | None

    def eval_metric(self, task: str) -> tasks.EvalMetric:
        return tasks.TASKS[task].metrics[self.metric]


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """What a dataset is and how to learn it. See docs/dataset-spec.md for the file form.

    label: the label's name (a raw column, or the name given to a rule's result);
    classes: multiclass class names in id order (binary: optional, the second is positive);
    regression_loss: 'mse' or 'huber', on the standardized target;
    missing_labels: 'stop' (a row without a label stops the run, with the count) or 'drop'
      (such rows are left out of training and evaluation, and the report counts them);
    train_steps / epochs / per_replica_batch_size: defaults for this dataset's size (settings
      win): a budget in train steps, or in passes over the training rows.
    learning_rate / weight_decay / early_stopping_patience / refit_factor / refit_schedule /
      lr_floor / label_smoothing / validation_fraction / validation_folds: this dataset's Trainer
      settings of the same names (settings win); None: the Trainer's default.
    model: the network for this dataset ([model], MODEL_KEYS → value; settings win): sizes for
      its row count, and whether categories are paired; as (key, value) pairs.
    tpu_network: ([tpu]) the network settings a TPU trains in place of [model]'s (MODEL_KEYS →
      value; settings win): a TPU's step is input-bound, so more members or wider layers cost
      little there (ModelConfig.tpu_network).
    delimiter / missing_values: how the CSV files are written ([csv]): the field delimiter, and
      the words besides trainer_module/missing.py's that mean "no value" in a number column.
    number_formats: ([csv] formats) the number columns written with a cell format, as
      (column, format) pairs ("$#,##0": trainer_module/numbers.py).
    window_spans: ([training]) how many of the newest spans Transform and the Trainer read;
      1 is the chosen span alone.
    span_layout: ([spans] layout) the data dir's span folders, "numbered" (span-N/) or "dated"
      (YYYY-MM-DD/); "" for a flat folder. A local data dir is looked at; a gs:// one is
      compiled and checked (`make preflight`) with this.
    drift_thresholds: ([drift] thresholds) (column, distance) pairs: how far a span's values
      may move from the previous span's, and scored rows' from the training rows', before the
      run stops (pipeline/components/drift_gate.py) or `make predict` warns. The distance is
      TFDV's: L-infinity for a string column, Jensen-Shannon divergence for a number column.
    drift_warn_only: ([drift] warn_only) columns whose drift is reported but does not stop
      the run.
    """

    name: str
    task: str
    label: str
    features: tuple[Feature, ...]
    thresholds: tuple[Threshold, ...]
    classes: tuple[str, ...] = ()
    rule: LabelRule | None = None
    slices: tuple[str, ...] = ()
    regression_loss: str = "mse"
    missing_labels: str = "stop"
    train_steps: int | None = None
    epochs: int | None = None
    per_replica_batch_size: int | None = None
    learning_rate: float | None = None
    weight_decay: float | None = None
    early_stopping_patience: int | None = None
    refit_factor: float | None = None
    refit_schedule: str | None = None
    lr_floor: float | None = None
    label_smoothing: float | None = None
    validation_fraction: float | None = None
    validation_folds: int | None = None
    model: tuple[tuple[str, Any], ...] = ()
    tpu_network: tuple[tuple[str, Any], ...] = ()
    delimiter: str = ","
    missing_values: tuple[str, ...] = ()
    number_formats: tuple[tuple[str, str], ...] = ()
    window_spans: int | None = None
    span_layout: str = ""
    drift_thresholds: tuple[tuple[str, float], ...] = ()
    drift_warn_only: tuple[str, ...] = ()

    def number_format(self, column: str) -> numbers.NumberFormat | None:
        """The format `column`'s numbers are written in, or None (plain numbers)."""
        fmt = dict(self.number_formats).get(column)
        return numbers.parse_format(fmt) if fmt else None

    # --- derived names -----------------------------------------------------------------------

    @property
    def label_key(self) -> str:
        """The transformed label's name (what the Evaluator reads as label_key)."""
        return transformed_name(self.label)

    @property
    def label_weight_key(self) -> str:
        """1.0 for a row with a label, 0.0 for one without (missing_labels='drop')."""
        return transformed_name(self.label + "_present")

    @property
    def label_outputs(self) -> tuple[str, ...]:
        """Transform's outputs that carry the label: the label, and its weight when rows
        without a label are dropped."""
        weight = (self.label_weight_key,) if self.missing_labels == "drop" else ()
        return (self.label_key, *weight)

    @property
    def task_info(self) -> tasks.Task:
        return tasks.TASKS[self.task]

    @property
    def label_sources(self) -> tuple[str, ...]:
        """Raw columns that only make the label: never part of a serving request."""
        if not self.rule:
            return (self.label,)
        features = {f.column for f in self.features}
        return tuple(c for c in self.rule.sources if c not in features)

    @property
    def ignored_columns(self) -> tuple[str, ...]:
        """Raw columns whose only role is 'ignore': the model never reads them, so their
        values are no contract (ImportSchemaGen marks them DISABLED in the run's schema)."""
        read = {f.column for f in self.features if f.role != "ignore"}
        return tuple(dict.fromkeys(f.column for f in self.features if f.column not in read))

    @property
    def num_classes(self) -> int:
        return len(self.classes) if self.task == tasks.MULTICLASS else 1

    def label_of(self, row: dict[str, Any]) -> float | None:
        """The label of one raw row (values as text or numbers; None or '' missing), as
        Transform makes it: the rule's 0/1, the class id, or the number. None: no label."""
        if self.rule:
            return self.rule.apply(row)
        value = row.get(self.label)
        if value in (None, ""):
            return None
        if self.task == tasks.REGRESSION:
            return float(value)
        if self.classes:
            text = str(int(value)) if isinstance(value, int | float) else str(value)
            return float(self.classes.index(text))
        return float(int(float(value)))

    def model_outputs(self) -> tuple[Output, ...]:
        """Every transformed feature the model reads, in spec order."""
        return tuple(out for f in self.features for out in f.outputs())

    def packed_inputs(self) -> dict[str, tuple[Output, ...]]:
        """Transform's packed outputs: {name: the model inputs its vector holds, in order}.
        A kind without inputs has no vector.

        The order is by name, not the spec's: custom_config reaches Transform and the Trainer
        through JSON, which may reorder the features table, and a vector's layout must not
        depend on that."""
        packed = {name: tuple(sorted((o for o in self.model_outputs() if o.kind == kind),
                                     key=lambda o: o.name))
                  for kind, name in PACKED_NAMES.items()}
        return {name: outputs for name, outputs in packed.items() if outputs}

    def columns(self) -> tuple[str, ...]:
        """Every raw column the spec names (features, label or its sources)."""
        return tuple(dict.fromkeys([f.column for f in self.features] + list(self.label_sources)))

    # --- the dict form (TOML file, custom_config) -------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        label: dict[str, Any] = {"column": self.label, "task": self.task,
                                 "missing": self.missing_labels}
        if self.classes:
            label["classes"] = list(self.classes)
        if self.task == tasks.REGRESSION:
            label["loss"] = self.regression_loss
        if self.rule:
            label["rule"] = {k: v for k, v in dataclasses.asdict(self.rule).items()
                             if v is not None}
        features: dict[str, list[dict[str, Any]]] = {}
        for f in self.features:
            features.setdefault(f.column, []).append({"role": f.role, **f.params})
        thresholds = {}
        for t in self.thresholds:
            side = "min" if t.eval_metric(self.task).higher_is_better else "max"
            thresholds[t.metric] = {side: t.bound, **(
                {} if t.allowed_change is None else {"allowed_change": t.allowed_change})}
        training = {k: getattr(self, k) for k in TRAINING_KEYS if getattr(self, k) is not None}
        model, tpu = _network_table(self.model), _network_table(self.tpu_network)
        spans = {"layout": self.span_layout} if self.span_layout else {}
        drift = {**({"thresholds": dict(self.drift_thresholds)} if self.drift_thresholds
                    else {}),
                 **({"warn_only": list(self.drift_warn_only)} if self.drift_warn_only else {})}
        csv = {"delimiter": self.delimiter, "missing_values": list(self.missing_values),
               **({"formats": dict(self.number_formats)} if self.number_formats else {})}
        return {"name": self.name, "label": label, "features": features,
                "evaluation": {"slices": list(self.slices), "thresholds": thresholds},
                **({"training": training} if training else {}),
                **({"model": model} if model else {}), **({"tpu": tpu} if tpu else {}),
                "csv": csv,
                **({"spans": spans} if spans else {}), **({"drift": drift} if drift else {})}

    def to_custom_config(self) -> dict[str, Any]:
        """What Transform and the Trainer need: the label, the features and the CSV dialect
        (the export's contract carries it to `make predict`). Thresholds, slices and sizes are
        the Evaluator's and the runner's, so changing them re-runs neither."""
        values = self.to_dict()
        return {DATASET_SPEC_KEY: {k: values[k] for k in ("name", "label", "features", "csv")}}

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> "DatasetSpec":
        values = (custom_config or {}).get(DATASET_SPEC_KEY)
        if not values:
            raise SpecError(f"custom_config has no {DATASET_SPEC_KEY!r}: the pipeline passes "
                            "the dataset spec there (pipeline/dag.py)")
        return from_dict(values, source="custom_config", name=values.get("name", ""),
                         evaluation=False)


# --- parsing --------------------------------------------------------------------------------

class _Reader:
    """Names the file and key of every error."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, value: Any, expected: str) -> SpecError:
        return SpecError(f"{self.source}: {key} = {value!r}: expected {expected}")

    def table(self, values: Any, key: str, required: bool = True) -> dict[str, Any]:
        if values is None and not required:
            return {}
        if not isinstance(values, dict):
            raise self.fail(key, values, "a table ([" + key + "])")
        return values

    def unknown(self, values: dict, key: str, known: tuple[str, ...]) -> None:
        extra = sorted(set(values) - set(known))
        if extra:
            raise self.fail(f"{key}.{extra[0]}" if key else extra[0], values[extra[0]],
                            f"only the keys {', '.join(known)}" + (f" in [{key}]" if key else ""))

    def string(self, values: dict, key: str, where: str, choices: tuple[str, ...] = ()) -> str:
        value = values.get(key)
        if not isinstance(value, str) or not value or (choices and value not in choices):
            raise self.fail(f"{where}.{key}", value,
                            f"one of {', '.join(choices)}" if choices else "a non-empty string")
        return value

    def number(self, values: dict, key: str, where: str, default: Any = None,
               minimum: float | None = None) -> float | None:
        value = values.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                minimum is not None and value < minimum):
            raise self.fail(f"{where}.{key}", value, "a number" + (
                f" >= {minimum:g}" if minimum is not None else ""))
        return float(value)


def from_dict(values: Any, source: str, name: str, evaluation: bool = True) -> DatasetSpec:
    """Builds and checks a spec from its dict form (a parsed spec.toml, or custom_config).

    Args:
      values: the spec's tables: label, features, evaluation and optionally training.
      source: what to name in errors (the file's path).
      name: the dataset's name (its folder under schemas/).
      evaluation: the [evaluation] table is required (False: the label and features alone,
        as Transform and the Trainer receive them).

    Returns:
      The checked DatasetSpec.

    Raises:
      SpecError: naming the source, the key, the value and the expected form.
    """
    r = _Reader(source)
    if not isinstance(values, dict) or not any(values.get(s) for s in SECTIONS):
        raise SpecError(f"{source}: the spec is empty: expected the tables [label] (column, "
                        "task), [features] (a role per column) and [evaluation] (thresholds)")
    r.unknown(values, "", SECTIONS + ("name",))
    label = _label_section(r, r.table(values.get("label"), "label"))
    features = _features(r, r.table(values.get("features"), "features"))
    answer = label["rule"].column if label["rule"] else label["label"]
    for f in features:
        if f.column in (answer, label["label"]):
            raise r.fail(f"features.{f.column}", f.role,
                         "no role: it holds the label, which is absent when the model serves")
    slices, thresholds = _evaluation_section(
        r, r.table(values.get("evaluation"), "evaluation", required=evaluation), features,
        label["task"], evaluation)
    spec = DatasetSpec(
        name=name, features=features, thresholds=thresholds, slices=slices, **label,
        model=_model_settings(r, r.table(values.get("model"), "model", required=False)),
        tpu_network=_model_settings(r, r.table(values.get("tpu"), "tpu", required=False),
                                    "tpu"),
        **_training_section(r, r.table(values.get("training"), "training", required=False)),
        **_csv_section(r, r.table(values.get("csv"), "csv", required=False)),
        **_spans_section(r, r.table(values.get("spans"), "spans", required=False)),
        **_drift_section(r, r.table(values.get("drift"), "drift", required=False)))
    _check_outputs(r, spec)
    return spec


def _label_section(r: _Reader, label: dict) -> dict[str, Any]:
    """[label]: the DatasetSpec fields it sets (task, label, classes, rule, loss, missing)."""
    r.unknown(label, "label", ("column", "task", "classes", "rule", "loss", "missing"))
    task = r.string(label, "task", "label", tuple(tasks.TASKS))
    regression_loss = "mse"
    if task == tasks.REGRESSION:
        regression_loss = label.get("loss", "mse")
        if regression_loss not in tasks.REGRESSION_LOSSES:
            raise r.fail("label.loss", regression_loss,
                         f"one of {', '.join(tasks.REGRESSION_LOSSES)}")
    elif "loss" in label:
        raise r.fail("label.loss", label["loss"], "no loss: only regression chooses one")
    missing = label.get("missing", "stop")
    if missing not in MISSING_LABELS:
        raise r.fail("label.missing", missing, f"one of {', '.join(MISSING_LABELS)}")
    return {"task": task, "label": r.string(label, "column", "label"),
            "classes": _classes(r, label, task), "rule": _rule(r, label.get("rule"), task),
            "regression_loss": regression_loss, "missing_labels": missing}


def _evaluation_section(r: _Reader, table: dict, features: tuple[Feature, ...], task: str,
                        evaluation: bool) -> tuple[tuple[str, ...], tuple[Threshold, ...]]:
    """[evaluation]: (slices, thresholds); a slice must be a column the model reads."""
    r.unknown(table, "evaluation", ("slices", "thresholds"))
    slices = table.get("slices", [])
    if not isinstance(slices, list) or not all(isinstance(s, str) and s for s in slices):
        raise r.fail("evaluation.slices", slices, "a list of column names")
    used = {f.column for f in features if f.role != "ignore"}
    for s in slices:
        if s not in used:
            raise r.fail("evaluation.slices", s, "columns the model reads (a feature whose role "
                         "is not 'ignore'), so the Evaluator finds them in each example")
    thresholds = _thresholds(r, r.table(table.get("thresholds"), "evaluation.thresholds"),
                             task) if evaluation else ()
    return tuple(slices), thresholds


def _training_section(r: _Reader, training: dict) -> dict[str, Any]:
    """[training]: the Trainer settings and the budget it sets."""
    r.unknown(training, "training", TRAINING_KEYS)
    budget = {}
    for key in TRAINING_CONFIG_KEYS:
        if key in training:
            try:
                TrainerConfig.create(**{key: training[key]})
            except TrainerConfigError as e:
                raise r.fail(f"training.{key}", training[key],
                             str(e).split(": expected ", 1)[-1]) from e
            budget[key] = training[key]
    for key in (*BUDGET_KEYS, "window_spans"):
        value = training.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise r.fail(f"training.{key}", value, "a whole number >= 1")
        budget[key] = value
    return budget


def _csv_section(r: _Reader, dialect: dict) -> dict[str, Any]:
    """[csv]: the delimiter and the extra words that mean "no value"."""
    r.unknown(dialect, "csv", CSV_KEYS)
    delimiter = dialect.get("delimiter", ",")
    if delimiter not in DELIMITERS:
        raise r.fail("csv.delimiter", delimiter, "one of " + ", ".join(
            repr(d) for d in DELIMITERS))
    markers = dialect.get("missing_values", [])
    if not isinstance(markers, list) or not all(isinstance(m, str) and m.strip()
                                                for m in markers):
        raise r.fail("csv.missing_values", markers, 'a list of words, e.g. ["?", "-"]')
    formats = r.table(dialect.get("formats"), "csv.formats", required=False)
    for column, fmt in formats.items():
        try:
            numbers.parse_format(fmt)
        except ValueError:
            raise r.fail(f"csv.formats.{column}", fmt, "a number format: text around a digit "
                         "pattern, e.g. \"$#,##0\", \"0%\" or \"#,##0 €\"") from None
    return {"delimiter": delimiter, "missing_values": tuple(markers),
            "number_formats": tuple(sorted(formats.items()))}


def _spans_section(r: _Reader, spans: dict) -> dict[str, Any]:
    """[spans]: the span folder layout."""
    r.unknown(spans, "spans", ("layout",))
    layout = spans.get("layout", "")
    if layout and layout not in SPAN_LAYOUTS:
        raise r.fail("spans.layout", layout, f"one of {', '.join(SPAN_LAYOUTS)}")
    return {"span_layout": layout}


def _drift_section(r: _Reader, drift: dict) -> dict[str, Any]:
    """[drift]: each column's distance threshold, and the columns whose drift only warns (that
    each is a column the spec names is checked against the schema, once the label and the
    features are known to be right)."""
    r.unknown(drift, "drift", DRIFT_KEYS)
    thresholds = r.table(drift.get("thresholds"), "drift.thresholds", required=False)
    for column, value in thresholds.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise r.fail(f"drift.thresholds.{column}", value, "a distance in (0, 1], e.g. 0.2")
    warn = drift.get("warn_only", [])
    if not isinstance(warn, list) or not all(isinstance(c, str) for c in warn):
        raise r.fail("drift.warn_only", warn, 'a list of column names, e.g. ["fare"]')
    unthresholded = [c for c in warn if c not in thresholds]
    if unthresholded:
        raise r.fail("drift.warn_only", unthresholded[0], "a column with a threshold under "
                     "[drift] thresholds")
    return {"drift_thresholds": tuple(sorted((c, float(v)) for c, v in thresholds.items())),
            "drift_warn_only": tuple(warn)}


def _check_outputs(r: _Reader, spec: DatasetSpec) -> None:
    """Each transformed feature is written once, some feature is read, and the label's
    transformed name is not one of the packed model inputs'."""
    names = [o.name for o in spec.model_outputs()]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise r.fail("features", duplicate, "each role of a column at most once (two entries "
                     f"write the transformed feature {duplicate!r})")
    if not names:
        raise r.fail("features", {}, "at least one column with a role other than 'ignore'")
    taken = set(spec.label_outputs) & set(PACKED_NAMES.values())
    if taken:
        raise r.fail("label.column", spec.label, f"a column whose transformed label is not "
                     f"{taken.pop()!r}, the name of Transform's packed model inputs: rename "
                     "the column in the CSV and the schema")


def _classes(r: _Reader, label: dict, task: str) -> tuple[str, ...]:
    classes = label.get("classes")
    if classes is None:
        if task == tasks.MULTICLASS:
            raise r.fail("label.classes", None, "the class names, a list of two or more "
                         "strings, e.g. [\"Adelie\", \"Chinstrap\", \"Gentoo\"]")
        return ()
    if task == tasks.REGRESSION:
        raise r.fail("label.classes", classes, "no classes: a regression label is a number")
    count = 2 if task == tasks.BINARY else None
    if (not isinstance(classes, list) or len(classes) < 2 or (count and len(classes) != count)
            or not all(isinstance(c, str) and c for c in classes)
            or len(set(classes)) != len(classes)):
        raise r.fail("label.classes", classes,
                     "two distinct strings, negative then positive" if count
                     else "two or more distinct non-empty strings")
    return tuple(classes)


def _rule(r: _Reader, rule: Any, task: str) -> LabelRule | None:
    if rule is None:
        return None
    if task != tasks.BINARY:
        raise r.fail("label.rule", rule, "no rule: only a binary label is derived by a rule")
    rule = r.table(rule, "label.rule")
    r.unknown(rule, "label.rule", ("column", "op", "value", "of", "times"))
    column = r.string(rule, "column", "label.rule")
    op = r.string(rule, "op", "label.rule", RULE_OPS)
    value = r.number(rule, "value", "label.rule")
    of = rule.get("of")
    if (value is None) == (of is None):
        raise r.fail("label.rule", rule, "either value = <number> (column > value) or of = "
                     "<column> with an optional times = <number> (column > times × of)")
    if of is not None:
        of = r.string(rule, "of", "label.rule")
    elif "times" in rule:
        raise r.fail("label.rule.times", rule["times"], "times only together with of")
    times = r.number(rule, "times", "label.rule", default=1.0)
    return LabelRule(column, op, value, of, times)


def _features(r: _Reader, table: dict) -> tuple[Feature, ...]:
    features = []
    for column, entries in table.items():
        for entry in entries if isinstance(entries, list) else [entries]:
            key = f"features.{column}"
            if isinstance(entry, str):
                entry = {"role": entry}
            if not isinstance(entry, dict):
                raise r.fail(key, entry, "a role name or a table { role = ..., <params> }")
            role = entry.get("role")
            if role not in KINDS:
                raise r.fail(f"{key}.role", role, f"one of {', '.join(KINDS)}")
            kind = KINDS[role]
            r.unknown(entry, key, ("role", "why") + tuple(kind.params))
            params = {}
            for name, param in kind.params.items():
                value = entry.get(name, param.default)
                if isinstance(value, list):
                    value = tuple(value)
                if value is None or not param.check(value):
                    raise r.fail(f"{key}.{name}", entry.get(name),
                                 f"{param.expected} (role {role!r})")
                params[name] = list(value) if isinstance(value, tuple) else value
            features.append(Feature(column, role, params))
    return tuple(features)


def _thresholds(r: _Reader, table: dict, task: str) -> tuple[Threshold, ...]:
    metrics = tasks.TASKS[task].metrics
    if not table:
        raise r.fail("evaluation.thresholds", table, f"at least one of {', '.join(metrics)} "
                     f"for a {task} task, e.g. {{ min = 0.8, allowed_change = 0.0 }}")
    thresholds = []
    for metric, bounds in table.items():
        key = f"evaluation.thresholds.{metric}"
        if metric not in metrics:
            raise r.fail(key, bounds, f"a threshold on the {task} task's metrics: "
                         f"{', '.join(metrics)}")
        side = "min" if metrics[metric].higher_is_better else "max"
        bounds = r.table(bounds, key)
        r.unknown(bounds, key, (side, "allowed_change"))
        bound = r.number(bounds, side, key)
        if bound is None:
            raise r.fail(f"{key}.{side}", None, f"a number: the {metric} the model must "
                         f"{'reach' if side == 'min' else 'stay under'}")
        change = r.number(bounds, "allowed_change", key, minimum=0.0)
        thresholds.append(Threshold(metric, bound, change))
    return tuple(thresholds)


# --- against the schema ---------------------------------------------------------------------

def check_against_schema(spec: DatasetSpec, schema: Any, source: str, schema_path: str) -> None:
    """The spec fits the curated schema: every column it names exists with a type its role
    reads, every schema column has a role (or is the label or one of its sources), and every
    drift threshold is a column the spec names.

    Raises:
      SpecError: naming the spec file, the key, the value and the expected form.
    """
    from tensorflow_metadata.proto.v0 import schema_pb2

    r = _Reader(source)
    types = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    clash = tf_names.clashing(types)
    if clash:
        raise SpecError(f"{schema_path}: columns {clash[0]!r} and {clash[1]!r} differ only in "
                        "case, which TensorFlow cannot tell apart in a model's inputs: rename "
                        "one in the CSV header (and here)")
    for column, fmt in spec.number_formats:
        if types.get(column) != "FLOAT":
            raise r.fail(f"csv.formats.{column}", fmt, f"a FLOAT column of the schema "
                         f"{schema_path}: a formatted number is read as one; {column!r} is "
                         f"{types.get(column, 'not in the schema')}")
    for column in (f.column for f in spec.features):
        if column not in types:
            raise r.fail(f"features.{column}", column,
                         f"a column of the schema {schema_path} ({', '.join(types)})")
    for f in spec.features:
        if types[f.column] not in f.kind.types:
            raise r.fail(f"features.{f.column}.role", f.role, "a role that reads a "
                         f"{types[f.column]} column: {_roles_for(types[f.column])}")
    if spec.rule:
        for column in spec.rule.sources:
            if types.get(column) not in NUMERIC_TYPES:
                raise r.fail("label.rule", spec.rule.describe(),
                             f"numeric columns of the schema {schema_path}; {column!r} is "
                             f"{types.get(column, 'not in the schema')}")
    else:
        label_type = types.get(spec.label)
        if label_type is None:
            raise r.fail("label.column", spec.label,
                         f"a column of the schema {schema_path} ({', '.join(types)}), or a "
                         "[label.rule] that derives it")
        if spec.task == tasks.REGRESSION and label_type not in NUMERIC_TYPES:
            raise r.fail("label.column", spec.label, f"a numeric column for a regression task; "
                         f"it is {label_type} in {schema_path}: use task = \"multiclass\" "
                         "with its classes, or pick a numeric label")
        if label_type == "FLOAT" and spec.task != tasks.REGRESSION:
            raise r.fail("label.column", spec.label, f"an INT or BYTES column for a {spec.task} "
                         f"task; it is FLOAT in {schema_path}")
        if label_type == "BYTES" and not spec.classes:
            raise r.fail("label.classes", None, f"the class names of the string label "
                         f"{spec.label!r}, e.g. classes = [\"no\", \"yes\"]")
    covered = set(spec.columns())
    uncovered = [c for c in types if c not in covered]
    if uncovered:
        raise r.fail(f"features.{uncovered[0]}", None,
                     "a role for every schema column: add it with a role, or role = \"ignore\"")
    named = set(spec.columns()) | {spec.label}
    for column, threshold in spec.drift_thresholds:
        if column not in named:
            raise r.fail(f"drift.thresholds.{column}", threshold, "a column the spec names (a "
                         "feature or the label)")


def _roles_for(type_name: str) -> str:
    return ", ".join(name for name, kind in KINDS.items() if type_name in kind.types)


def label_values_allowed(spec: DatasetSpec) -> tuple[str, ...] | None:
    """The label's allowed raw values as CSV text (None: any number)."""
    if spec.rule or spec.task == tasks.REGRESSION:
        return None
    return spec.classes or ("0", "1")


def _model_settings(r: _Reader, table: dict[str, Any], section: str = "model"
                    ) -> tuple[tuple[str, Any], ...]:
    """The [model] (or [tpu]) table's settings, each checked by ModelConfig itself (one rule
    per setting)."""
    r.unknown(table, section, MODEL_KEYS)
    settings = []
    for key in MODEL_KEYS:
        if key not in table:
            continue
        value = table[key]
        if key == "hidden_units":
            if not isinstance(value, list):
                raise r.fail(f"{section}.hidden_units", value,
                             "a list of widths, e.g. [256, 128]")
            value = tuple(value)
        try:
            ModelConfig(**{key: value})
        except TrainerConfigError as e:
            raise r.fail(f"{section}.{key}", table[key],
                         str(e).split(": expected ", 1)[-1]) from e
        settings.append((key, value))
    return tuple(settings)


def _network_table(pairs: tuple) -> dict[str, Any]:
    """A spec's network settings (name, value) pairs as the TOML table they were read from."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in pairs}
