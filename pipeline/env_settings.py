"""Settings from the environment: `make run DATASET=… TRAIN_STEPS=…` and the runners' flags.

This module only maps variables to typed values, naming the variable, the raw value and the
expected form when one does not parse. What the values mean together (the dataset spec's
defaults, the checks) is `pipeline_config.configure`'s.
"""

import os
from collections.abc import Mapping

from pipeline.errors import ConfigError
from pipeline.pipeline_config import PipelineConfig, Settings, configure, is_remote


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """The settings the environment sets.

    Variables: DATASET, PIPELINE_NAME, DATA_DIR, SPAN, OUTPUT_DIR, TRAIN_STEPS, EVAL_STEPS, TUNE,
    TUNE_TRIALS, MIN_EVAL_ACCURACY, MAX_ACCURACY_REGRESSION, and the trainer settings of
    TRAINER_VARIABLES. Empty variables count as unset (so `make run DATA_DIR=` keeps the
    default).

    Raises:
      ConfigError: naming the variable, its value and the expected form.
    """
    env = os.environ if env is None else env
    given = {var: raw for var, raw in env.items() if raw}
    pipeline: dict[str, object] = {}
    for var, (field, parse) in PIPELINE_VARIABLES.items():
        if var in given:
            pipeline[field] = parse(var, given[var])
    trainer = {setting: parse(var, given[var])
               for var, (setting, parse) in TRAINER_VARIABLES.items() if var in given}
    return Settings(pipeline, trainer)


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


def _env_path(var: str, raw: str) -> str:
    """A folder on this machine (made absolute) or a URL (kept)."""
    return raw if is_remote(raw) else os.path.abspath(raw)


def _env_span(var: str, raw: str) -> str:
    """A span number or date, checked against the data dir's spans by `configure`."""
    return raw.strip()


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


# PipelineConfig fields `make run` takes from the environment: variable → (field, parser).
PIPELINE_VARIABLES = {
    "DATASET": ("dataset", _env_str),
    "PIPELINE_NAME": ("pipeline_name", _env_str),
    "DATA_DIR": ("data_dir", _env_path),
    "SPAN": ("span", _env_span),
    "OUTPUT_DIR": ("output_dir", _env_path),
    "TRAIN_STEPS": ("train_steps", _env_int),
    "EVAL_STEPS": ("eval_steps", _env_int),
    "TUNE": ("tune", _env_bool),
    "TUNE_TRIALS": ("tune_trials", _env_int),
    "MIN_EVAL_ACCURACY": ("min_eval_accuracy", _env_float),
    "MAX_ACCURACY_REGRESSION": ("max_accuracy_regression", _env_float),
}

# Trainer settings `make run` takes from the environment: variable → (setting, parser).
TRAINER_VARIABLES = {
    "PER_REPLICA_BATCH_SIZE": ("per_replica_batch_size", _env_int),
    "GLOBAL_BATCH_SIZE": ("global_batch_size", _env_int),
    "CACHE": ("cache", _env_str),
    "LEARNING_RATE": ("learning_rate", _env_float),
    "REFERENCE_BATCH_SIZE": ("reference_batch_size", _env_int),
    "LR_SCALING": ("lr_scaling", _env_str),
    "LR_DECAY": ("lr_decay", _env_str),
    "LR_FLOOR": ("lr_floor", _env_float),
    "WEIGHT_DECAY": ("weight_decay", _env_float),
    "EPOCHS": ("epochs", _env_int),
    "EARLY_STOPPING_PATIENCE": ("early_stopping_patience", _env_int),
    "REFIT_FACTOR": ("refit_factor", _env_float),
    "REFIT_SCHEDULE": ("refit_schedule", _env_str),
    "LABEL_SMOOTHING": ("label_smoothing", _env_float),
    "VALIDATION_FRACTION": ("validation_fraction", _env_float),
    "VALIDATION_FOLDS": ("validation_folds", _env_int),
    "ENSEMBLE_SIZE": ("ensemble_size", _env_int),
    "ENSEMBLE_KIND": ("ensemble_kind", _env_str),
    "WIDE": ("wide", _env_bool),
    "SEED": ("seed", _env_int),
    "WARM_START": ("warm_start", _env_bool),
    "STRATEGY": ("strategy", _env_str),
    "TPU_ADDRESS": ("tpu_address", _env_str),
    "STEPS_PER_EXECUTION": ("steps_per_execution", _env_int),
    "MIXED_PRECISION": ("mixed_precision", _env_str),
    "EXPORT_PARITY_TOLERANCE": ("export_parity_tolerance", _env_float),
    "PROFILE_STEPS": ("profile_steps", _env_steps),
}


def for_output_dir(dataset: str | None, output_dir: str | None) -> PipelineConfig:
    """The config of the tools that read a finished run (tpu-check, predict, report): the
    environment's settings, with the --dataset and --output-dir flags when given.

    Raises:
      ConfigError: as `from_env` and `configure`.
    """
    flags = {k: v for k, v in (("dataset", dataset),
                               ("output_dir", output_dir and os.path.abspath(output_dir))) if v}
    return configure(from_env(), **flags)
