"""The Trainer's `run_fn`: strategy → data → model → fit → float32 export."""

import os
import time

import tensorflow_transform as tft
import tf_keras
from absl import logging
from tfx import v1 as tfx

from trainer_module import data, export, model, strategy
from trainer_module.config import TrainerConfig

# Train steps per host round trip when the config says 0 (auto): a TPU idles between
# executions, and even on CPU a small step costs less than Keras' per-call overhead.
TPU_STEPS_PER_EXECUTION = 32
DEFAULT_STEPS_PER_EXECUTION = 8


def _steps_per_execution(config: TrainerConfig, on_tpu: bool) -> int:
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


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """TFX Trainer entry point (GenericExecutor)."""
    config = TrainerConfig.from_custom_config(fn_args.custom_config)
    dist = strategy.get_distribution_strategy(config)
    on_tpu = strategy.is_tpu(dist)
    precision = _precision(config, on_tpu)
    tf_keras.mixed_precision.set_global_policy(precision)
    spe = _steps_per_execution(config, on_tpu)

    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()
    train_ds = data.distributed_dataset(
        dist, fn_args.train_files, feature_spec, config.per_replica_batch_size,
        training=True, seed=config.shuffle_seed,
    )
    eval_ds = data.distributed_dataset(
        dist, fn_args.eval_files, feature_spec, config.per_replica_batch_size, training=False,
    )
    logging.info(
        "Training %d steps: replicas=%d per-replica batch=%d global batch=%d "
        "steps_per_execution=%d precision=%s",
        fn_args.train_steps, dist.num_replicas_in_sync, config.per_replica_batch_size,
        config.per_replica_batch_size * dist.num_replicas_in_sync, spe, precision,
    )

    global_batch = config.per_replica_batch_size * dist.num_replicas_in_sync
    eval_steps = fn_args.eval_steps or data.count_batches(fn_args.eval_files, global_batch)

    with dist.scope():
        keras_model = model.build_model(config, model.category_sizes(tf_transform_output))
        model.compile_model(keras_model, config, steps_per_execution=spe, jit_compile=False)

    epochs = _epochs(fn_args.train_steps, config.epochs)
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
            )
        ],
        verbose=2,
    )
    trained = time.monotonic()
    export.export_serving_model(keras_model, config, tf_transform_output, fn_args.serving_model_dir)
    logging.info("Trained in %.1f s, exported in %.1f s", trained - started,
                 time.monotonic() - trained)
    tf_keras.mixed_precision.set_global_policy("float32")
