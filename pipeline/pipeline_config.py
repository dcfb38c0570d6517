"""The pipeline's one config object, built once and validated once before any component runs.

Settings flow one way: environment variables and flags become typed `Settings`
(pipeline/env_settings.py); `configure` reads the dataset spec and its schema once and merges
the spec's defaults under those settings into a `PipelineConfig`; `validate()` checks every
path and number, and the data against the spec and schema it holds, naming the setting, the bad
value and the expected form, so a typo fails in a second instead of minutes into a run.
Building a `PipelineConfig` itself reads nothing.
"""

import dataclasses
import os
import re
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import REPO_ROOT, csv_check, datasets
from pipeline.datasets import DEFAULT_DATASET
from pipeline.errors import ConfigError
from pipeline.spans import folders as span_folders
from trainer_module import tasks
from trainer_module.config import TrainerConfig, TrainerConfigError
from trainer_module.dataset_spec import (
    TRAINING_CONFIG_KEYS,
    DatasetSpec,
    Threshold,
    label_values_allowed,
)
from trainer_module.missing import folded

DEFAULT_OUTPUT_DIR = os.path.join(REPO_ROOT, "output")
LOCK_FILE = os.path.join(REPO_ROOT, "requirements.lock")
DEFAULT_DATA_DIR = datasets.shipped_data_dir(DEFAULT_DATASET)

# Kubeflow Pipelines / Vertex AI accept only these names.
PIPELINE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
# Under the output dir: artifacts, the ML Metadata store, pushed models.
PIPELINE_ROOT_DIR = "pipeline_root"
# Under the pipeline root, for runs whose older spans no resolver can find (compiled specs):
# each span's training statistics, for the drift gate (pipeline/spans/drift_validator.py),
# and a record of each span's Examples, for the window (pipeline/spans/span_window.py).
SPAN_STORE_DIR = "span-store"
METADATA_FILE = os.path.join("metadata", "metadata.db")
SERVING_DIR = "serving_model"
PREDICTIONS_DIR = "predictions"  # make predict: one folder per run

# Local Beam steps run in-process below this much CSV, and in one worker process per core from
# it on: a worker costs seconds to start in every Beam step, which only larger data repays
# (docs/benchmarks.md has the measurements).
MULTI_PROCESSING_MIN_BYTES = 64 * 2**20


def local_beam_workers(data_dir: str, cores: int | None = None) -> int:
    """DirectRunner's workers for the CSV files of `data_dir`: one per core from
    MULTI_PROCESSING_MIN_BYTES of text on, else 1 (in the step's own process)."""
    cores = cores or os.cpu_count() or 1
    size = sum(csv_check.text_bytes(p) for p in csv_check.csv_files(data_dir))
    return cores if size >= MULTI_PROCESSING_MIN_BYTES else 1


def direct_runner_args(workers: int | None) -> tuple[str, str]:
    """DirectRunner's mode for `workers` worker processes: 1 runs a step in its own process
    (in_memory), more run it in that many processes, None in one per core of the machine."""
    if workers == 1:
        return ("--direct_running_mode=in_memory", "--direct_num_workers=1")
    return ("--direct_running_mode=multi_processing", f"--direct_num_workers={workers or 0}")


def local_beam_args(data_dir: str, cores: int | None = None) -> tuple[str, ...]:
    """DirectRunner's mode and workers for a local run, chosen by the size of the data."""
    mode = direct_runner_args(local_beam_workers(data_dir, cores))
    # Without a dependency flag, each TFX Beam executor copies the whole TFX install
    # into a new temp dir and builds an sdist of it for remote workers, in every Beam component
    # of every run, and the copies are never deleted (tfx/utils/dependency_utils.py).
    # DirectRunner's workers run this venv and stage nothing; naming the lock the pipeline runs
    # with tells TFX the dependencies are given.
    # Beam pickles every DoFn when a transform is applied and again when the pipeline is
    # translated; cloudpickle does it faster than dill (Beam's default). Beam's workers read
    # the choice from the pipeline options.
    return (*mode, "--pickle_library=cloudpickle", f"--requirements_file={LOCK_FILE}")


__all__ = ["REPO_ROOT", "ConfigError", "PipelineConfig", "Settings", "configure",
           "is_remote"]  # what runners import


@dataclasses.dataclass(frozen=True)
class Settings:
    """Typed settings, before the dataset spec's defaults apply (pipeline/env_settings.py
    reads them from the environment; the cloud config builds them from its own fields).

    pipeline: PipelineConfig fields by name (dataset, data_dir, train_steps, ...).
    trainer: TrainerConfig settings by name (epochs, learning_rate, strategy, ...).
    """

    pipeline: Mapping[str, object] = dataclasses.field(default_factory=dict)
    trainer: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """Everything that varies between runs of the DAG; `configure` builds it.

    dataset: a name under schemas/ (its spec.toml and schema.pbtxt) or such a folder.
    spec / schema: that dataset's spec (with this config's threshold overrides applied) and
      schema, read once by `configure`.
    pipeline_name: by default '<dataset>-tpu'. data_dir: by default data/<dataset>.
    min_eval_accuracy / max_accuracy_regression: when set, they replace the spec's accuracy
      threshold and its allowed drop (classification tasks only); `spec` holds the result.
    bigquery_query: when set (cloud runs only), BigQueryExampleGen reads the examples with this
      query instead of CsvExampleGen reading data_dir.
    Outputs all go under `output_dir`: the pipeline root (artifacts), the SQLite MLMD store and
    the serving dir the Pusher writes blessed models to.
    """

    dataset: str
    spec: DatasetSpec
    schema: schema_pb2.Schema = dataclasses.field(compare=False, repr=False)
    pipeline_name: str
    data_dir: str
    span: int | None = None  # the span a run reads when data_dir holds span folders
    spans: span_folders.Spans | None = dataclasses.field(default=None, compare=False,
                                                         repr=False)
    bigquery_query: str = ""
    output_dir: str = DEFAULT_OUTPUT_DIR
    train_steps: int | None = None  # None: a budget of trainer.training.epochs passes
    eval_steps: int | None = None  # None: one full pass over the validation slice per epoch
    min_eval_accuracy: float | None = None
    max_accuracy_regression: float | None = None  # allowed drop vs. the last blessed model
    enable_cache: bool = True
    tune: bool = False  # a Tuner step searches the network and learning rate first
    tune_trials: int = 10
    beam_pipeline_args: tuple[str, ...] = ()
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)

    @property
    def dataset_dir(self) -> str:
        return datasets.dataset_dir(self.dataset)

    @property
    def schema_path(self) -> str:
        return os.path.join(self.dataset_dir, datasets.SCHEMA_FILE)

    @property
    def spec_path(self) -> str:
        return os.path.join(self.dataset_dir, datasets.SPEC_FILE)

    @property
    def data_folder(self) -> str:
        """The folder of CSV files this run reads: the chosen span's, or data_dir itself."""
        return self.spans.folders[self.span] if self.spans else self.data_dir

    @property
    def window(self) -> tuple[int, ...]:
        """The spans Transform and the Trainer read, oldest first: the chosen span and up to
        `[training] window_spans` - 1 before it. Empty when the spans are not known here (a
        flat folder, or a gs:// data dir whose newest span TFX picks where it runs)."""
        if not self.spans:
            return ()
        known = sorted(s for s in self.spans.folders if s <= self.span)
        return tuple(known[-(self.spec.window_spans or 1):])

    @property
    def previous_span(self) -> int | None:
        """The span before the chosen one, which the drift gate compares it with."""
        if not self.spans:
            return None
        earlier = [s for s in self.spans.folders if s < self.span]
        return max(earlier) if earlier else None

    @property
    def span_pattern(self) -> str | None:
        """CsvExampleGen's split pattern over span folders, or None for a flat folder: from
        the folders found here, else (a gs:// data dir) from the spec's [spans] layout."""
        if self.spans:
            return self.spans.pattern
        if self.spec.span_layout:
            return span_folders.pattern(self.spec.span_layout)
        return None

    @property
    def pipeline_root(self) -> str:
        return os.path.join(self.output_dir, PIPELINE_ROOT_DIR)

    @property
    def span_statistics_store(self) -> str:
        return os.path.join(self.pipeline_root, SPAN_STORE_DIR, "statistics")

    @property
    def span_examples_store(self) -> str:
        return os.path.join(self.pipeline_root, SPAN_STORE_DIR, "examples")

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.output_dir, METADATA_FILE)

    @property
    def serving_model_dir(self) -> str:
        """Each pipeline (each dataset) pushes into its own folder: models of two datasets
        sharing an output dir never land side by side."""
        return os.path.join(self.output_dir, SERVING_DIR, self.pipeline_name)

    def validate(self) -> "PipelineConfig":
        """Checks every setting, then the data against the spec and schema this config holds.

        Returns:
          self, when every check passes.

        Raises:
          ConfigError: for the first bad setting, naming it, its value and the expected form.
        """
        if not isinstance(self.pipeline_name, str) or not PIPELINE_NAME_RE.match(
            self.pipeline_name
        ):
            raise ConfigError(
                f"pipeline_name={self.pipeline_name!r}: expected lowercase letters, digits and "
                "'-', starting with a letter or digit, at most 128 characters (the form "
                "Kubeflow Pipelines and Vertex AI accept), e.g. 'taxi-tpu'"
            )
        if self.train_steps is not None:
            _positive_int("train_steps", self.train_steps)
        if self.eval_steps is not None:
            _positive_int("eval_steps", self.eval_steps)
        _positive_int("tune_trials", self.tune_trials)
        if not isinstance(self.tune, bool):
            raise ConfigError(f"tune={self.tune!r}: expected true or false")
        if not isinstance(self.trainer, TrainerConfig):
            raise ConfigError(f"trainer={self.trainer!r}: expected a TrainerConfig")
        profile = self.trainer.runtime.profile_steps
        if profile and self.train_steps and profile[1] > self.train_steps:
            raise ConfigError(f"profile_steps={profile!r} (PROFILE_STEPS): the run has only "
                              f"train_steps={self.train_steps}; profile steps within "
                              f"1..{self.train_steps}")
        if self.bigquery_query:
            pass  # BigQuery checks the query where it runs; the gate checks what it returns
        elif is_remote(self.data_dir):
            # Not reachable from here: CsvExampleGen reads and checks it where it runs.
            if not self.data_dir.startswith("gs://"):
                raise ConfigError(f"data_dir={self.data_dir!r}: expected a local folder or a "
                                  "gs:// folder of CSV files")
        else:
            found = self.spans.layout if self.spans else ""
            if self.spec.span_layout and found != self.spec.span_layout:
                raise ConfigError(
                    f"data_dir={self.data_dir!r} holds "
                    + (f"{found} span folders" if found else "no span folders")
                    + f", but {self.spec_path} says [spans] layout = "
                    f"{self.spec.span_layout!r}: move the CSV files into "
                    f"{span_folders.FOLDER_PATTERN[self.spec.span_layout]}/ folders, or "
                    "change the layout in the spec")
            if self.spans:
                span_folders.check(self.spans)
            csv_check.check_data_dir(
                self.data_folder, [f.name for f in self.schema.feature], self.schema_path,
                label_check(self.spec, self.schema), self.spec.delimiter,
                folded(self.spec.missing_values),
                {f.name: self.spec.number_format(f.name) for f in self.schema.feature
                 if f.type in (schema_pb2.INT, schema_pb2.FLOAT)})
        return self


def configure(settings: Settings | None = None, *, trainer: TrainerConfig | None = None,
              **fields: object) -> PipelineConfig:
    """The one merge of defaults, the dataset spec and the settings, in that order of rank.

    The spec's [training] and [model] sections are the Trainer's defaults (a spec written for
    300 rows sizes its own batch, budget and network); `settings` and then `fields` win over
    them. The spec and schema are read here, once, and the config holds both.

    Args:
      settings: typed settings (e.g. `env_settings.from_env()`); None: none.
      trainer: a whole TrainerConfig to use as it is, instead of merging one.
      **fields: PipelineConfig fields, over the settings' (runner flags, cloud values).

    Returns:
      The PipelineConfig, not yet validated: `validate()` checks it and the data.

    Raises:
      ConfigError: naming the setting or the spec's file and key, the value and the form.
    """
    settings = settings or Settings()
    values = {**settings.pipeline, **fields}
    dataset = values.setdefault("dataset", DEFAULT_DATASET)
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError(f"dataset={dataset!r}: expected a dataset name under schemas/ (e.g. "
                          "'taxi') or a folder with spec.toml and schema.pbtxt")
    spec, schema = datasets.load_spec(dataset)
    values["pipeline_name"] = values.get("pipeline_name") or datasets.pipeline_name(dataset)
    values["data_dir"] = values.get("data_dir") or datasets.shipped_data_dir(dataset)
    values.update(_span_choice(str(values["data_dir"]), values.get("span")))
    if not values.get("beam_pipeline_args"):
        found = values.get("spans")
        values["beam_pipeline_args"] = local_beam_args(
            found.folders[values["span"]] if found else str(values["data_dir"]))
    try:
        values["trainer"] = trainer or TrainerConfig.create(
            **_trainer_settings(spec, values, settings.trainer))
        # The spec's budget in steps, unless a setting gives one in steps or in epochs.
        if spec.train_steps and "epochs" not in settings.trainer:
            values.setdefault("train_steps", spec.train_steps)
    except TrainerConfigError as e:
        raise ConfigError(f"trainer setting {e}") from e
    smoothing = values["trainer"].training.label_smoothing
    if smoothing and spec.task == tasks.REGRESSION:
        raise ConfigError(f"label_smoothing={smoothing!r} (LABEL_SMOOTHING, or [training] in "
                          f"the spec of {spec.name!r}): a regression label has no classes to "
                          "smooth toward; use 0 or leave it unset")
    spec = _with_accuracy_overrides(spec, values)
    return PipelineConfig(spec=spec, schema=schema, **values)


def _span_choice(data_dir: str, span: object) -> dict[str, object]:
    """The `spans` and `span` fields: the data dir's span folders and the one a run reads (the
    newest unless `span` names one), or none for a flat folder."""
    found = span_folders.find(data_dir)
    if found:
        return {"spans": found, "span": found.choose(span)}
    if span not in (None, ""):
        raise ConfigError(f"SPAN={span!r}: data_dir={data_dir!r} has no span folders here "
                          "(span-N/ or YYYY-MM-DD/); a flat folder is one span: unset SPAN")
    return {"span": None}


def _trainer_settings(spec: DatasetSpec, values: Mapping[str, object],
                      given: Mapping[str, object]) -> dict[str, object]:
    """The Trainer's settings: the spec's [training] and [model] under the given ones."""
    trainer = dict(given)
    if "train_steps" in values and "epochs" in trainer:
        raise ConfigError(f"TRAIN_STEPS={values['train_steps']} and EPOCHS={trainer['epochs']}: "
                          "set one training budget, in steps or in passes over the data")
    if spec.epochs:
        trainer.setdefault("epochs", spec.epochs)
    for setting in TRAINING_CONFIG_KEYS:
        if getattr(spec, setting) is not None:
            trainer.setdefault(setting, getattr(spec, setting))
    if spec.per_replica_batch_size:
        # The spec's batch is the one its learning rate was tuned at (one replica).
        trainer.setdefault("per_replica_batch_size", spec.per_replica_batch_size)
        trainer.setdefault("reference_batch_size", spec.per_replica_batch_size)
    for setting, value in spec.model:
        trainer.setdefault(setting, value)
    if spec.tpu_network and "tpu_network" not in trainer:
        # A setting given to the run wins on a TPU too.
        trainer["tpu_network"] = tuple((k, v) for k, v in spec.tpu_network if k not in given)
    return trainer


def _with_accuracy_overrides(spec: DatasetSpec, values: Mapping[str, object]) -> DatasetSpec:
    """The spec with MIN_EVAL_ACCURACY / MAX_ACCURACY_REGRESSION in its accuracy threshold."""
    minimum, change = values.get("min_eval_accuracy"), values.get("max_accuracy_regression")
    if minimum is None and change is None:
        return spec
    for name, value in (("min_eval_accuracy", minimum), ("max_accuracy_regression", change)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not 0 <= value <= 1):
            raise ConfigError(f"{name}={value!r}: expected a number between 0 and 1")
    if "accuracy" not in spec.task_info.metrics:
        raise ConfigError(
            f"MIN_EVAL_ACCURACY / MAX_ACCURACY_REGRESSION: the {spec.task} task of dataset "
            f"{spec.name!r} has no accuracy; set its thresholds under "
            f"[evaluation.thresholds] in its spec.toml")
    current = next((t for t in spec.thresholds if t.metric == "accuracy"), None)
    bound = minimum if minimum is not None else (current.bound if current else 0.0)
    allowed = change if change is not None else (current.allowed_change if current else None)
    others = tuple(t for t in spec.thresholds if t.metric != "accuracy")
    return dataclasses.replace(spec, thresholds=(Threshold("accuracy", bound, allowed),)
                               + others)


def label_check(spec: DatasetSpec, schema) -> csv_check.LabelCheck:
    """What the CSV check asks of the label column (a rule's result is checked by the gate)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    types = {f.name: f.type for f in schema.feature}
    column = spec.rule.column if spec.rule else spec.label
    return csv_check.LabelCheck(
        column=column, allowed=label_values_allowed(spec),
        missing_allowed=spec.missing_labels == "drop",
        integer=types.get(column) == schema_pb2.INT)


def is_remote(path: str) -> bool:
    """A URL (gs://, s3://, ...) rather than a path on this machine."""
    return "://" in path


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name}={value!r}: expected a whole number > 0")
