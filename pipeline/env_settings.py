"""Settings from the environment: `make run DATASET=… TRAIN_STEPS=…` and the runners' flags.

Each variable is parsed here, naming the variable, the raw value and the expected form; the
result is a PipelineConfig, which validates the rest.
"""

import os
from collections.abc import Mapping

from pipeline.datasets import DEFAULT_DATASET
from pipeline.errors import ConfigError
from pipeline.pipeline_config import PipelineConfig, is_remote
from trainer_module.config import TrainerConfig, TrainerConfigError
from trainer_module.dataset_spec import TRAINING_CONFIG_KEYS

# Variable → PipelineConfig field, by how the value is read.
_ENV_NAMES = {"DATASET": "dataset", "PIPELINE_NAME": "pipeline_name", "DATA_DIR": "data_dir",
              "OUTPUT_DIR": "output_dir"}
_ENV_INTS = {"TRAIN_STEPS": "train_steps", "EVAL_STEPS": "eval_steps",
             "TUNE_TRIALS": "tune_trials"}
_ENV_BOOLS = {"TUNE": "tune"}
_ENV_FLOATS = {
    "MIN_EVAL_ACCURACY": "min_eval_accuracy",
    "MAX_ACCURACY_REGRESSION": "max_accuracy_regression",
}


def from_env(env: Mapping[str, str] | None = None, **overrides: object) -> PipelineConfig:
    """Config from defaults, the dataset spec's [training], environment variables, then keyword
    overrides.

    Variables: DATASET, PIPELINE_NAME, DATA_DIR, OUTPUT_DIR, TRAIN_STEPS, EVAL_STEPS, TUNE,
    TUNE_TRIALS, MIN_EVAL_ACCURACY, MAX_ACCURACY_REGRESSION, and the trainer settings of
    TRAINER_VARIABLES.
    Empty variables count as unset (so `make run DATA_DIR=` keeps the default).

    Raises:
      ConfigError: naming the variable or setting, its value and the expected form.
    """
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    trainer: dict[str, object] = {}
    for var, field in _ENV_NAMES.items():
        if env.get(var):
            keep = field in ("pipeline_name", "dataset") or is_remote(env[var])
            values[field] = env[var] if keep else os.path.abspath(env[var])
    for var, field in _ENV_INTS.items():
        if env.get(var):
            values[field] = _env_int(var, env[var])
    for var, field in _ENV_FLOATS.items():
        if env.get(var):
            values[field] = _env_float(var, env[var])
    for var, field in _ENV_BOOLS.items():
        if env.get(var):
            values[field] = _env_bool(var, env[var])
    for var, (setting, parse) in TRAINER_VARIABLES.items():
        if env.get(var):
            trainer[setting] = parse(var, env[var])
    trainer_overrides = overrides.pop("trainer", None)
    values.update(overrides)
    # The dataset's own sizes (budget, batch, network) come first among the defaults: a spec
    # for 300 rows says so.
    spec = PipelineConfig(dataset=str(values.get("dataset", DEFAULT_DATASET))).dataset_spec()
    if "train_steps" in values and "epochs" in trainer:
        raise ConfigError(f"TRAIN_STEPS={values['train_steps']} and EPOCHS={trainer['epochs']}: "
                          "set one training budget, in steps or in passes over the data")
    # The spec's budget, in steps or epochs, unless a setting gives one.
    if spec.train_steps and "train_steps" not in values and "epochs" not in trainer:
        values["train_steps"] = spec.train_steps
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
    try:
        values["trainer"] = trainer_overrides or TrainerConfig.create(**trainer)
        return PipelineConfig(**values)
    except TrainerConfigError as e:
        raise ConfigError(f"trainer setting {e}") from e


def for_output_dir(dataset: str | None, output_dir: str | None) -> PipelineConfig:
    """The config of the tools that read a finished run (tpu-check, predict): from the
    environment, with the --dataset and --output-dir flags when given.

    Raises:
      ConfigError: as `from_env`.
    """
    overrides = {k: v for k, v in (("dataset", dataset),
                                   ("output_dir", output_dir and os.path.abspath(output_dir)))
                 if v}
    return from_env(**overrides)


def _env_int(var: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a whole number") from None


def _env_float(var: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a number") from None


def _env_str(var: str, raw: str) -> str:
    return raw


def _env_steps(var: str, raw: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in raw.split(","))
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected train steps 'first,last', e.g. "
                          "100,120") from None


# The words a true/false setting accepts, in any case.
BOOL_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _env_bool(var: str, raw: str) -> bool:
    value = BOOL_WORDS.get(raw.strip().lower())
    if value is None:
        raise ConfigError(f"{var}={raw!r}: expected true/false (or 1/0)")
    return value


# Trainer settings `make run` takes from the environment: variable → (setting, parser).
TRAINER_VARIABLES = {
    "PER_REPLICA_BATCH_SIZE": ("per_replica_batch_size", _env_int),
    "GLOBAL_BATCH_SIZE": ("global_batch_size", _env_int),
    "CACHE": ("cache", _env_str),
    "LEARNING_RATE": ("learning_rate", _env_float),
    "REFERENCE_BATCH_SIZE": ("reference_batch_size", _env_int),
    "LR_SCALING": ("lr_scaling", _env_str),
    "LR_DECAY": ("lr_decay", _env_str),
    "EPOCHS": ("epochs", _env_int),
    "EARLY_STOPPING_PATIENCE": ("early_stopping_patience", _env_int),
    "REFIT_FACTOR": ("refit_factor", _env_float),
    "VALIDATION_FRACTION": ("validation_fraction", _env_float),
    "SEED": ("seed", _env_int),
    "WARM_START": ("warm_start", _env_bool),
    "STRATEGY": ("strategy", _env_str),
    "TPU_ADDRESS": ("tpu_address", _env_str),
    "STEPS_PER_EXECUTION": ("steps_per_execution", _env_int),
    "PROFILE_STEPS": ("profile_steps", _env_steps),
}
