"""The pipeline's one config object, validated before any component runs.

Runners build a `PipelineConfig` (from defaults, environment variables or flags: see
pipeline/env_settings.py) and pass it to `create_pipeline`. `validate()` checks every path and
number, the dataset spec against its schema, and the data against both, and names the setting,
the bad value and the expected form, so a typo fails in a second instead of minutes into a run.
"""

import dataclasses
import functools
import os
import re

from pipeline import csv_check, datasets
from pipeline.datasets import DEFAULT_DATASET, REPO_ROOT
from pipeline.errors import ConfigError
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec, Threshold, label_values_allowed
from trainer_module.missing import folded

DEFAULT_OUTPUT_DIR = os.path.join(REPO_ROOT, "output")
LOCK_FILE = os.path.join(REPO_ROOT, "requirements.lock")
DEFAULT_DATA_DIR = datasets.shipped_data_dir(DEFAULT_DATASET)

# Kubeflow Pipelines / Vertex AI accept only these names.
PIPELINE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
PIPELINE_NAME_SUFFIX = "-tpu"
# Under the output dir: artifacts, the ML Metadata store, pushed models.
PIPELINE_ROOT_DIR = "pipeline_root"
METADATA_FILE = os.path.join("metadata", "metadata.db")
SERVING_DIR = "serving_model"
PREDICTIONS_DIR = "predictions"  # make predict: one folder per run

# Local Beam steps run in-process below this much CSV, and in one worker process per core from
# it on: a worker costs seconds to start in every Beam step, which only larger data repays
# (docs/benchmarks.md has the measurements).
MULTI_PROCESSING_MIN_BYTES = 64 * 2**20


def local_beam_args(data_dir: str, cores: int | None = None) -> tuple[str, ...]:
    """DirectRunner's mode and workers for a local run, chosen by the size of the data."""
    cores = cores or os.cpu_count() or 1
    size = sum(csv_check.text_bytes(p) for p in csv_check.csv_files(data_dir))
    if cores > 1 and size >= MULTI_PROCESSING_MIN_BYTES:
        mode = ("--direct_running_mode=multi_processing", f"--direct_num_workers={cores}")
    else:
        mode = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
    # Without a dependency flag, each TFX Beam executor copies the whole TFX install (~41 MB)
    # into a new temp dir and builds an sdist of it for remote workers, in every Beam component
    # of every run, and the copies are never deleted (tfx/utils/dependency_utils.py).
    # DirectRunner's workers run this venv and stage nothing; naming the lock the pipeline runs
    # with tells TFX the dependencies are given.
    # Beam pickles every DoFn when a transform is applied and again when the pipeline is
    # translated; cloudpickle does it faster than dill (Beam's default). Beam's workers read
    # the choice from the pipeline options.
    return (*mode, "--pickle_library=cloudpickle", f"--requirements_file={LOCK_FILE}")


__all__ = ["REPO_ROOT", "ConfigError", "PipelineConfig", "is_remote"]  # what runners import


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything that varies between runs of the DAG.

    dataset: a name under schemas/ (its spec.toml and schema.pbtxt) or such a folder.
    pipeline_name: '' → '<dataset>-tpu'. data_dir: '' → data/<dataset> (the shipped data).
    min_eval_accuracy / max_accuracy_regression: when set, they replace the spec's accuracy
      threshold and its allowed drop (classification tasks only).
    bigquery_query: when set (cloud runs only), BigQueryExampleGen reads the examples with this
      query instead of CsvExampleGen reading data_dir.
    Outputs all go under `output_dir`: the pipeline root (artifacts), the SQLite MLMD store and
    the serving dir the Pusher writes blessed models to.
    """

    dataset: str = DEFAULT_DATASET
    pipeline_name: str = ""
    data_dir: str = ""
    bigquery_query: str = ""
    output_dir: str = DEFAULT_OUTPUT_DIR
    train_steps: int | None = None  # None: a budget of trainer.training.epochs passes
    eval_steps: int | None = None  # None: one full pass over the validation slice per epoch
    min_eval_accuracy: float | None = None
    max_accuracy_regression: float | None = None  # allowed drop vs. the last blessed model
    enable_cache: bool = True
    tune: bool = False  # a Tuner step searches the network and learning rate first
    tune_trials: int = 10
    beam_pipeline_args: tuple[str, ...] = ()  # empty: local_beam_args(data_dir)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ConfigError(f"dataset={self.dataset!r}: expected a dataset name under "
                              "schemas/ (e.g. 'taxi') or a folder with spec.toml and schema.pbtxt")
        if not self.pipeline_name:
            object.__setattr__(self, "pipeline_name",
                               datasets.dataset_name(self.dataset) + PIPELINE_NAME_SUFFIX)
        if not self.data_dir:
            object.__setattr__(self, "data_dir", datasets.shipped_data_dir(self.dataset))
        if not self.beam_pipeline_args:
            object.__setattr__(self, "beam_pipeline_args", local_beam_args(self.data_dir))

    @property
    def dataset_dir(self) -> str:
        return datasets.dataset_dir(self.dataset)

    @property
    def schema_path(self) -> str:
        return os.path.join(self.dataset_dir, datasets.SCHEMA_FILE)

    @property
    def spec_path(self) -> str:
        return os.path.join(self.dataset_dir, datasets.SPEC_FILE)

    def dataset_spec(self) -> DatasetSpec:
        """The dataset's spec, checked against its schema, with this config's threshold
        overrides applied. Raises ConfigError naming the file, key and value."""
        spec = _load_spec(self.dataset, *_spec_stamp(self.spec_path, self.schema_path))
        if self.min_eval_accuracy is None and self.max_accuracy_regression is None:
            return spec
        if "accuracy" not in spec.task_info.metrics:
            raise ConfigError(
                f"MIN_EVAL_ACCURACY / MAX_ACCURACY_REGRESSION: the {spec.task} task of dataset "
                f"{spec.name!r} has no accuracy; set its thresholds under "
                f"[evaluation.thresholds] in {self.spec_path}")
        current = next((t for t in spec.thresholds if t.metric == "accuracy"), None)
        bound = self.min_eval_accuracy if self.min_eval_accuracy is not None else (
            current.bound if current else 0.0)
        change = self.max_accuracy_regression if self.max_accuracy_regression is not None else (
            current.allowed_change if current else None)
        others = tuple(t for t in spec.thresholds if t.metric != "accuracy")
        return dataclasses.replace(spec, thresholds=(Threshold("accuracy", bound, change),)
                                   + others)

    @property
    def pipeline_root(self) -> str:
        return os.path.join(self.output_dir, PIPELINE_ROOT_DIR)

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.output_dir, METADATA_FILE)

    @property
    def serving_model_dir(self) -> str:
        """Each pipeline (each dataset) pushes into its own folder: models of two datasets
        sharing an output dir never land side by side."""
        return os.path.join(self.output_dir, SERVING_DIR, self.pipeline_name)

    def validate(self) -> "PipelineConfig":
        """Raises ConfigError for the first bad setting; returns self when all are good."""
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
        for name in ("min_eval_accuracy", "max_accuracy_regression"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not 0 <= value <= 1):
                raise ConfigError(f"{name}={value!r}: expected a number between 0 and 1")
        if not isinstance(self.trainer, TrainerConfig):
            raise ConfigError(f"trainer={self.trainer!r}: expected a TrainerConfig")
        profile = self.trainer.runtime.profile_steps
        if profile and self.train_steps and profile[1] > self.train_steps:
            raise ConfigError(f"profile_steps={profile!r} (PROFILE_STEPS): the run has only "
                              f"train_steps={self.train_steps}; profile steps within "
                              f"1..{self.train_steps}")
        spec = self.dataset_spec()
        schema = datasets.load_schema(self.schema_path)
        if self.bigquery_query:
            pass  # BigQuery checks the query where it runs; the gate checks what it returns
        elif is_remote(self.data_dir):
            # Not reachable from here: CsvExampleGen reads and checks it where it runs.
            if not self.data_dir.startswith("gs://"):
                raise ConfigError(f"data_dir={self.data_dir!r}: expected a local folder or a "
                                  "gs:// folder of CSV files")
        else:
            csv_check.check_data_dir(self.data_dir, [f.name for f in schema.feature],
                                     self.schema_path, label_check(spec, schema),
                                     spec.delimiter, folded(spec.missing_values))
        return self


def label_check(spec: DatasetSpec, schema) -> csv_check.LabelCheck:
    """What the CSV check asks of the label column (a rule's result is checked by the gate)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    types = {f.name: f.type for f in schema.feature}
    column = spec.rule.column if spec.rule else spec.label
    return csv_check.LabelCheck(
        column=column, allowed=label_values_allowed(spec),
        missing_allowed=spec.missing_labels == "drop",
        integer=types.get(column) == schema_pb2.INT)


def _spec_stamp(*paths: str) -> tuple[tuple[int, int], ...]:
    """(size, mtime) of each file: an edited spec or schema is read again."""
    stamps = []
    for path in paths:
        try:
            stat = os.stat(path)
            stamps.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            stamps.append((-1, -1))
    return tuple(stamps)


@functools.lru_cache(maxsize=16)
def _load_spec(dataset: str, *stamps: tuple[int, int]) -> DatasetSpec:
    return datasets.load_spec(dataset)[0]


def is_remote(path: str) -> bool:
    """A URL (gs://, s3://, ...) rather than a path on this machine."""
    return "://" in path


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name}={value!r}: expected a whole number > 0")
