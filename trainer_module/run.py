"""The Trainer's `run_fn`: strategy → data → model → fit → float32 export."""

import os
import time

import tensorflow_transform as tft
import tf_keras
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import data, export, model, strategy, tasks
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec

# Train steps per host round trip when the config says 0 (auto): a TPU idles between
# executions, and even on CPU a small step costs less than Keras' per-call overhead.
TPU_STEPS_PER_EXECUTION = 32
DEFAULT_STEPS_PER_EXECUTION = 8


def steps_per_execution(config: TrainerConfig, on_tpu: bool) -> int:
    if config.steps_per_execution:
        return config.steps_per_execution
    return TPU_STEPS_PER_EXECUTION if on_tpu else DEFAULT_STEPS_PER_EXECUTION


def _precision(config: TrainerConfig, on_tpu: bool) -> str:
    if config.mixed_precision == "auto":
        return "mixed_bfloat16" if on_tpu else "float32"
    return config.mixed_precision


def _epochs(train_steps: int, max_epochs: int) -> int:
    """The most epochs (≤ max_epochs) that divide train_steps exactly, so no step is lost."""
    return max(d for d in range(1, min(max_epochs, train_steps) + 1) if train_steps % d == 0)


def per_replica_batch_size(config: TrainerConfig, replicas: int) -> int:
    if not config.global_batch_size:
        return config.per_replica_batch_size
    if config.global_batch_size % replicas:
        lower = config.global_batch_size // replicas * replicas
        raise ValueError(
            f"global_batch_size={config.global_batch_size} is not divisible by the {replicas} "
            f"replicas of this strategy: use a multiple of {replicas} (e.g. {lower or replicas} "
            f"or {lower + replicas}), or set per_replica_batch_size instead"
        )
    return config.global_batch_size // replicas


def _warn_if_not_tpu_sized(per_replica: int, config: TrainerConfig) -> None:
    """TPU matrix units are 128 wide: other sizes pad and waste the difference."""
    odd = [f"per_replica_batch_size={per_replica}"] if per_replica % 128 else []
    odd += [f"hidden width {w}" for w in config.hidden_units if w % 128]
    if odd:
        logging.warning("On TPU, sizes that are not multiples of 128 waste the MXU: %s",
                        ", ".join(odd))


def check_tpu_paths(fn_args: FnArgs) -> None:
    """A TPU's workers read and write through GCS only: local paths fail there, late and vaguely."""
    for name in ("model_run_dir", "serving_model_dir"):
        path = getattr(fn_args, name)
        if not str(path).startswith("gs://"):
            raise ValueError(
                f"{name}={path!r}: training on a TPU needs a gs:// path (TPU workers cannot "
                "reach this machine's disk); set the pipeline root to a gs:// bucket"
            )


def run_fn(fn_args: FnArgs) -> None:
    """TFX Trainer entry point (GenericExecutor)."""
    config = TrainerConfig.from_custom_config(fn_args.custom_config)
    spec = DatasetSpec.from_custom_config(fn_args.custom_config)
    dist = strategy.get_distribution_strategy(config)
    on_tpu = strategy.is_tpu(dist)
    per_replica = per_replica_batch_size(config, dist.num_replicas_in_sync)
    if on_tpu:
        check_tpu_paths(fn_args)
        _warn_if_not_tpu_sized(per_replica, config)
    precision = _precision(config, on_tpu)
    spe = steps_per_execution(config, on_tpu)
    global_batch = per_replica * dist.num_replicas_in_sync

    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()
    train_ds = data.distributed_dataset(dist, fn_args.train_files, feature_spec, per_replica,
                                        spec=spec, training=True, seed=config.seed)
    eval_ds = data.distributed_dataset(dist, fn_args.eval_files, feature_spec, per_replica,
                                       spec=spec, training=False)
    label_scale = (data.label_scale(fn_args.train_files, spec)
                   if spec.task == tasks.REGRESSION else model.NO_SCALE)
    eval_steps = fn_args.eval_steps or data.count_batches(fn_args.eval_files, global_batch)
    epochs = _epochs(fn_args.train_steps, config.epochs)
    logging.info(
        "Training %s (%s) %d steps in %d epochs: replicas=%d per-replica batch=%d global "
        "batch=%d steps_per_execution=%d precision=%s jit_compile=%s",
        spec.name, spec.task, fn_args.train_steps, epochs, dist.num_replicas_in_sync, per_replica,
        global_batch, spe, precision, config.jit_compile,
    )
    tf_keras.utils.set_random_seed(config.seed)

    tf_keras.mixed_precision.set_global_policy(precision)
    try:
        with dist.scope():
            keras_model = model.build_model(
                config, spec, model.category_sizes(spec, tf_transform_output), label_scale)
            model.compile_model(keras_model, config, spec, steps_per_execution=spe,
                                jit_compile=config.jit_compile, label_scale=label_scale)
        started = time.monotonic()
        keras_model.fit(
            train_ds,
            epochs=epochs,
            steps_per_epoch=fn_args.train_steps // epochs,
            validation_data=eval_ds,
            validation_steps=eval_steps,
            callbacks=[
                tf_keras.callbacks.TensorBoard(
                    log_dir=os.path.join(fn_args.model_run_dir, "logs"), update_freq="epoch",
                    profile_batch=0,
                ),
                # A preempted (killed and restarted) Trainer resumes from the last finished
                # epoch instead of step 0.
                tf_keras.callbacks.BackupAndRestore(
                    backup_dir=os.path.join(fn_args.model_run_dir, "backup")),
            ],
            verbose=2,
        )
        trained = time.monotonic()
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    export.export_serving_model(keras_model, config, spec, tf_transform_output,
                                fn_args.serving_model_dir, label_scale)
    logging.info("Trained in %.1f s, exported in %.1f s", trained - started,
                 time.monotonic() - trained)
