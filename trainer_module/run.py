"""The Trainer's `run_fn`: plan → data → model → fit → float32 export → export parity gate."""

import os
import time
from collections.abc import Callable

import tf_keras
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import (
    early_stopping,
    export,
    host_threads,
    model,
    parity,
    tuning,
    warm_start,
)
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.executor import RAW_EVAL_FILES_KEY
from trainer_module.plan import RunInputs, run_inputs


def check_tpu_paths(fn_args: FnArgs) -> None:
    """A TPU's workers read and write through GCS only: local paths fail there, late and vaguely."""
    for name in ("model_run_dir", "serving_model_dir"):
        path = getattr(fn_args, name)
        if not str(path).startswith("gs://"):
            raise ValueError(
                f"{name}={path!r}: training on a TPU needs a gs:// path (TPU workers cannot "
                "reach this machine's disk); set the pipeline root to a gs:// bucket"
            )


def _raw_eval_files(fn_args: FnArgs) -> list[str]:
    files = (fn_args.custom_config or {}).get(RAW_EVAL_FILES_KEY)
    if not files:
        raise ValueError(
            f"custom_config has no {RAW_EVAL_FILES_KEY!r}: the export parity gate needs the raw "
            "eval examples; run the Trainer as trainer_module.executor.Executor with a "
            "raw_examples input (pipeline/components/trainer.py does)")
    return files


class _EpochLog(tf_keras.callbacks.Callback):
    """One log record per finished epoch, "Epoch n/N finished: metrics" (what a console shows
    as the Trainer's progress), in place of Keras' printed lines."""

    def __init__(self, epochs: int) -> None:
        super().__init__()
        self._epochs = epochs

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        metrics = ", ".join(f"{k}={float(v):.4f}" for k, v in sorted((logs or {}).items()))
        logging.info("Epoch %d/%d finished: %s", epoch + 1, self._epochs, metrics)


# Where a refit keeps its TensorBoard logs and its preemption backup, beside the first fit's.
REFIT_DIR = "refit"
# The preemption backup's folder in a fit's run dir.
BACKUP_DIR = "backup"


class SpacedBackup(tf_keras.callbacks.BackupAndRestore):
    """Keras' BackupAndRestore (restored at the start of training, written at an epoch's end,
    deleted when training ends), written only at the end of an epoch that ends `seconds` or
    more after the last backup (or the start of training).

    A backup is a checkpoint of the weights and the optimizer's slots. Small data trains
    hundreds of epochs of a few steps, and a backup after each was a large share of the
    Trainer's time (docs/trainer-and-tpu.md, "Preemption backups"); on a TPU the steps are
    faster and the checkpoints go to GCS. `clock` is the seam a test replaces."""

    def __init__(self, backup_dir: str, seconds: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(backup_dir=backup_dir)
        self._seconds, self._clock = seconds, clock
        self._last = 0.0

    def on_train_begin(self, logs: dict | None = None) -> None:
        super().on_train_begin(logs)
        self._last = self._clock()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._clock() - self._last >= self._seconds:
            super().on_epoch_end(epoch, logs)
            self._last = self._clock()


def _callbacks(run_dir: str, epochs: int, *extra: tf_keras.callbacks.Callback,
               backup_seconds: int,
               profile_batch: tuple[int, int] | int = 0) -> list[tf_keras.callbacks.Callback]:
    return [
        *extra,  # before the log: early stopping adds the loss it compares to it
        _EpochLog(epochs),
        # The logs hold the epochs' scalars and any profile, not the train step's graph: under
        # MirroredStrategy that graph holds a copy of the step per replica, and writing it
        # kept taxi's 160-step fit on 8 CPU replicas running 109 s instead of 38 s. The
        # model's own graph is in the exported SavedModel.
        tf_keras.callbacks.TensorBoard(
            log_dir=os.path.join(run_dir, "logs"), update_freq="epoch",
            profile_batch=profile_batch, write_graph=False),
        # A preempted (killed and restarted) Trainer resumes after the epoch of its last
        # backup instead of step 0.
        SpacedBackup(os.path.join(run_dir, BACKUP_DIR), backup_seconds),
    ]


def _refit_holds(refitted: tf_keras.Model, record: early_stopping.TrainingRecord,
                 validation, steps: int, task: str) -> bool:
    """Whether the refit replaces the kept epoch's model: its loss on the same validation
    rows, the ones early stopping scored, is not above the kept epoch's. The refit trained on
    those rows too, so it has the advantage; one that still scores worse has gone wrong (a
    schedule that never reached what early stopping measured, a diverged run) and is not
    exported."""
    loss = early_stopping.selection_loss(
        refitted.evaluate(validation, steps=steps, verbose=0, return_dict=True)["loss"],
        refitted, task)
    record.refit_val_loss = loss
    record.refit_kept = loss <= record.best_val_loss
    if record.refit_kept:
        logging.info("Refit kept: validation loss %.5f, the kept epoch's %.5f", loss,
                     record.best_val_loss)
    else:
        logging.warning("Refit discarded: its validation loss %.5f is above the kept epoch's "
                        "%.5f on the same rows; the kept epoch's model is exported", loss,
                        record.best_val_loss)
    return record.refit_kept


def _fit(inputs: RunInputs, spec: DatasetSpec, fn_args: FnArgs) -> tf_keras.Model:
    """One network trained on the plan's fit rows, early-stopped (and refitted) on its fold's
    validation slice; its record and logs go to the model run dir (fold 0) or a fold_<i>
    folder in it."""
    plan, tf_transform_output, label_scale = (inputs.plan, inputs.tf_transform_output,
                                              inputs.label_scale)
    config = plan.config
    fold, folds = plan.fold, config.training.validation_folds
    run_dir = fold_dir(fn_args.model_run_dir, fold)
    if plan.tpu:
        check_tpu_paths(fn_args)
    if config.training.warm_start and not fn_args.base_model:
        logging.warning("warm_start=true, but there is no blessed model yet (the pipeline's "
                        "first blessing is still to come): this model trains from scratch")

    logging.info("Training %s%s", f"fold {fold + 1} of {folds}: " if folds > 1 else "",
                 plan.describe())
    if inputs.validation is None:
        logging.warning(
            "No validation slice (validation_fraction=%g leaves %d rows for %d replicas): "
            "every epoch of the budget trains and the last weights are kept",
            config.data.validation_fraction, plan.validation_examples, plan.replicas)
    record = inputs.new_record()
    best = early_stopping.BestEpoch(record, config.training.early_stopping_patience,
                                    spec.task)

    keras_model = plan.compiled_model(tf_transform_output, label_scale)
    if config.training.warm_start and fn_args.base_model:
        warm_start.restore(keras_model, fn_args.base_model,
                           warm_start.vocabularies(spec, tf_transform_output))
    validation_steps = (min(fn_args.eval_steps or plan.validation_steps, plan.validation_steps)
                         if inputs.validation is not None else None)
    keras_model.fit(
        inputs.train,
        epochs=plan.epochs,
        steps_per_epoch=plan.steps_per_epoch,
        validation_data=inputs.validation,
        validation_steps=validation_steps,
        callbacks=_callbacks(run_dir, plan.epochs, best,
                             backup_seconds=config.runtime.backup_seconds,
                             profile_batch=plan.profile_executions() if not fold else 0),
        verbose=0,
    )
    if config.training.refit_factor and record.best_epoch:
        refitted, record.refit_epochs = plan.refit(
            inputs, record.best_epoch, fn_args.train_files,
            lambda epochs: _callbacks(os.path.join(run_dir, REFIT_DIR), epochs,
                                      backup_seconds=config.runtime.backup_seconds),
            fn_args.base_model)
        if _refit_holds(refitted, record, inputs.validation, validation_steps, spec.task):
            keras_model = refitted
    record.write(run_dir)
    return keras_model


def fold_dir(model_run_dir: str, fold: int) -> str:
    """Where fold `fold`'s record, TensorBoard logs and preemption backup go: the model run
    dir itself for the first (what the run report reads), fold_<i> in it for the others."""
    return os.path.join(model_run_dir, f"fold_{fold}") if fold else model_run_dir


def run_fn(fn_args: FnArgs) -> None:
    """TFX Trainer entry point (GenericExecutor).

    Args:
      fn_args: TFX's FnArgs; custom_config carries the trainer settings, the dataset spec and
        the raw eval files (trainer_module/executor.py); base_model the latest blessed model
        when warm_start is on; hyperparameters the Tuner's best values when TUNE is on.

    Raises:
      ValueError: settings that make no plan on this strategy, local paths on a TPU, or no
        raw eval examples.
      warm_start.WarmStartError: the blessed model's shapes do not fit the new model.
      parity.ExportParityError: the export does not answer as the trained model does.
    """
    given = tuning.apply(TrainerConfig.from_custom_config(fn_args.custom_config),
                         fn_args.hyperparameters)
    host_threads.apply(given)
    spec = DatasetSpec.from_custom_config(fn_args.custom_config)
    raw_eval_files = _raw_eval_files(fn_args)
    folds = given.training.validation_folds
    started = time.monotonic()
    networks, planning = [], 0.0
    for fold in range(folds):
        seeded = given.replace(seed=given.training.seed + fold) if fold else given
        planned = time.monotonic()
        inputs = run_inputs(seeded, spec, fn_args, fold=fold)
        planning += time.monotonic() - planned
        if inputs.validation is None and folds > 1:
            logging.warning(
                "validation_folds=%d needs a validation slice, and this run has none: one "
                "model trains on every row instead of %d on folds", folds, folds)
        networks.append(_fit(inputs, spec, fn_args))
        if inputs.validation is None:
            break
    trained = time.monotonic()
    # From here on the last plan's settings are the run's (a plan may drop a validation slice
    # too small to score): Transform's output and the label's scale are every fold's.
    config = inputs.plan.config.replace(validation_folds=len(networks),
                                        seed=given.training.seed)
    tf_transform_output, label_scale = inputs.tf_transform_output, inputs.label_scale
    keras_model = networks[0] if len(networks) == 1 else model.fold_mean(networks)
    level = logging.get_absl_logger().level
    to_model_inputs = export.export_serving_model(keras_model, config, spec, tf_transform_output,
                                                  fn_args.serving_model_dir, label_scale)
    # Saving leaves absl's logger at WARNING, which would hide the lines below.
    logging.get_absl_logger().setLevel(level)
    exported = time.monotonic()
    result = parity.compare(
        keras_model, fn_args.serving_model_dir, parity.raw_examples(raw_eval_files), spec,
        tf_transform_output, to_model_inputs,
        parity.tolerance(spec, config.runtime.export_parity_tolerance, label_scale))
    logging.info("Export parity: %s", result.describe())
    parity.check(result)
    # Planning: each fold's pass counting the training rows, Transform's output loaded, the
    # label's scale; training: the fits (and refits) alone.
    logging.info("Planned in %.1f s, trained in %.1f s, exported in %.1f s, parity checked in "
                 "%.1f s", planning, trained - started - planning, exported - trained,
                 time.monotonic() - exported)
