"""The training plan: strategy → replicas → per-replica and global batch → steps_per_execution
→ precision → learning rate → model → optimizer → compile, decided in one place.

`run_fn`, `make tpu-check` and the bench each build a `TrainingPlan` and take their datasets
and compiled model from it, so the step they run is the same step. `make tpu-check` asks for
the plan a TPU would get (`as_tpu=True`): TPU precision, TPU steps per execution and XLA, on
whatever devices this host has.
"""

import dataclasses
import math
from collections.abc import Callable

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import (
    cache_size,
    data,
    early_stopping,
    keys,
    model,
    strategy,
    tasks,
    warm_start,
)
from trainer_module.config import (
    MAX_VALIDATION_FRACTION,
    MIN_VALIDATION_ROWS,
    REFIT_OWN,
    TrainerConfig,
)
from trainer_module.dataset_spec import DatasetSpec

# Train steps per host round trip when the config says 0 (auto): a TPU idles between
# executions, and even on CPU a small step costs less than Keras' per-call overhead.
STEPS_PER_EXECUTION = 32


class PlanError(ValueError):
    """The settings cannot make a plan on this strategy (batch, steps, profile range)."""


def per_replica_batch_size(config: TrainerConfig, replicas: int) -> int:
    """The configured per-replica batch, or global_batch_size split evenly over the replicas."""
    settings = config.data
    if not settings.global_batch_size:
        return settings.per_replica_batch_size
    if settings.global_batch_size % replicas:
        lower = settings.global_batch_size // replicas * replicas
        raise PlanError(
            f"global_batch_size={settings.global_batch_size} is not divisible by the {replicas} "
            f"replicas of this strategy: use a multiple of {replicas} (e.g. {lower or replicas} "
            f"or {lower + replicas}), or set per_replica_batch_size instead"
        )
    return settings.global_batch_size // replicas


def learning_rate_scale(config: TrainerConfig, global_batch: int) -> float:
    """The factor the configured rule applies to learning_rate at this global batch."""
    ratio = global_batch / config.training.reference_batch_size
    return {"none": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}[config.training.lr_scaling]


class LearningRate(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Linear ramp from `start` to `peak` over `warmup_steps`; then, over the steps up to
    `decay_steps`, half a cosine wave from `peak` down to `floor` × `peak` (`decay_steps` 0:
    `peak` to the end)."""

    def __init__(self, start: float, peak: float, warmup_steps: int, decay_steps: int,
                 floor: float = 0.0) -> None:
        self.start, self.peak, self.floor = start, peak, floor
        self.warmup_steps, self.decay_steps = warmup_steps, decay_steps

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        rate = tf.constant(self.peak, tf.float32)
        if self.warmup_steps:
            done = tf.minimum(step / self.warmup_steps, 1.0)
            rate = self.start + (self.peak - self.start) * done
        if self.decay_steps > self.warmup_steps:
            done = tf.clip_by_value((step - self.warmup_steps)
                                    / (self.decay_steps - self.warmup_steps), 0.0, 1.0)
            rate *= self.floor + (1.0 - self.floor) * 0.5 * (1.0 + tf.cos(math.pi * done))
        return rate

    def get_config(self) -> dict:
        return {"start": self.start, "peak": self.peak, "warmup_steps": self.warmup_steps,
                "decay_steps": self.decay_steps, "floor": self.floor}


def adam(learning_rate: tf_keras.optimizers.schedules.LearningRateSchedule,
         weight_decay: float = 0.0) -> tf_keras.optimizers.legacy.Adam:
    """Adam as Keras' legacy optimizer, which updates each variable with one fused
    kernel (ResourceApplyAdam) where the current one runs about ten small ops per variable;
    with a weight_decay (TrainingConfig.weight_decay), `DecayedAdam`.

    On the CPU a train step of a small model is mostly per-op cost, so the fused update trains
    it faster. On a TPU, XLA compiles either into the one step.
    """
    if weight_decay:
        return DecayedAdam(weight_decay, learning_rate=learning_rate)
    return tf_keras.optimizers.legacy.Adam(learning_rate=learning_rate)


class DecayedAdam(tf_keras.optimizers.legacy.Adam):
    """The legacy Adam with decoupled weight decay: before its update, each variable loses
    weight_decay × the step's learning rate of itself, as Keras' AdamW does it (which is
    built on the current optimizer, not the fused legacy one)."""

    def __init__(self, weight_decay: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.weight_decay = weight_decay

    def _decay(self, var: tf.Variable, apply_state: dict | None) -> tf.Operation:
        device, dtype = var.device, var.dtype.base_dtype
        coefficients = ((apply_state or {}).get((device, dtype))
                        or self._fallback_apply_state(device, dtype))
        return var.assign_sub(var * coefficients["lr_t"] * tf.cast(self.weight_decay, dtype),
                              read_value=False)

    def _resource_apply_dense(self, grad: tf.Tensor, var: tf.Variable,
                              apply_state: dict | None = None) -> tf.Operation:
        with tf.control_dependencies([self._decay(var, apply_state)]):
            return super()._resource_apply_dense(grad, var, apply_state)

    def _resource_apply_sparse(self, grad: tf.Tensor, var: tf.Variable, indices: tf.Tensor,
                               apply_state: dict | None = None) -> tf.Operation:
        with tf.control_dependencies([self._decay(var, apply_state)]):
            return super()._resource_apply_sparse(grad, var, indices, apply_state)

    def get_config(self) -> dict:
        return {**super().get_config(), "weight_decay": self.weight_decay}


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """Every decision between the settings and `model.fit`; build with `make_plan`."""

    config: TrainerConfig
    spec: DatasetSpec
    strategy: tf.distribute.Strategy
    tpu: bool  # the step is built as a TPU runs it
    per_replica_batch: int
    steps_per_execution: int
    precision: str
    jit_compile: bool
    train_steps: int
    epochs: int  # Keras epochs: each ends in a validation pass and an early stop check
    by_epochs: bool  # the budget is config.training.epochs passes (else train_steps steps)
    validation_examples: int = 0  # rows of the validation slice; 0: none
    fit_examples: int = 0  # rows the model fits (0: not counted; a train_steps budget)
    fold: int = 0  # which of the config's validation_folds slices this plan holds out

    @property
    def replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def global_batch(self) -> int:
        return self.per_replica_batch * self.replicas

    @property
    def peak_learning_rate(self) -> float:
        return self.config.training.learning_rate * learning_rate_scale(self.config,
                                                                        self.global_batch)

    @property
    def warmup_steps(self) -> int:
        return self._warmup(self.train_steps)

    def _warmup(self, train_steps: int) -> int:
        """The ramp's steps in a schedule of `train_steps` (0 when there is nothing to ramp
        up to)."""
        if self.peak_learning_rate <= self.config.training.learning_rate:
            return 0
        return int(train_steps * self.config.training.warmup_fraction)

    @property
    def steps_per_epoch(self) -> int:
        return self.train_steps // self.epochs

    @property
    def validation_start(self) -> float:
        """Where this plan's fold's slice starts, as a share of the rows (`data.held_out`)."""
        return validation_start(self.config, self.fold)

    @property
    def validation_per_replica_batch(self) -> int:
        """The validation slice's batch per replica: the training batch, or smaller when the
        slice holds less than one global batch; 0 when it holds fewer rows than replicas."""
        return min(self.per_replica_batch, self.validation_examples // self.replicas)

    @property
    def validation_steps(self) -> int:
        """Full validation batches in one pass over the slice (0: no validation)."""
        batch = self.validation_per_replica_batch
        return self.validation_examples // (batch * self.replicas) if batch else 0

    def describe_budget(self) -> str:
        if self.by_epochs:
            return f"{self.epochs} epochs of {self.steps_per_epoch} steps"
        return f"{self.train_steps} steps (train_steps) in {self.epochs} epochs"

    def describe(self) -> str:
        return (
            f"{self.spec.name} ({self.spec.task}) {self.train_steps} steps in {self.epochs} "
            f"epochs (a budget in {'epochs' if self.by_epochs else 'train_steps'}), "
            f"validation slice {self.validation_examples} "
            f"rows: replicas={self.replicas} per-replica batch={self.per_replica_batch} "
            f"global batch={self.global_batch} steps_per_execution={self.steps_per_execution} "
            f"precision={self.precision} jit_compile={self.jit_compile} learning rate="
            f"{self.peak_learning_rate:.6g} ({self.config.training.lr_scaling} scaling from "
            f"{self.config.training.learning_rate:g} at batch "
            f"{self.config.training.reference_batch_size}, warmup {self.warmup_steps} steps, "
            f"decay {self.describe_decay()})"
        )

    def describe_decay(self) -> str:
        """The rate's decay, and the weights' decoupled decay when there is one."""
        training = self.config.training
        rate = (f"cosine to {training.lr_floor:g} of the peak"
                if training.lr_decay == "cosine" and training.lr_floor else training.lr_decay)
        return rate + (f", weight decay {training.weight_decay:g}"
                       if training.weight_decay else "")

    def learning_rate(self, train_steps: int | None = None) -> LearningRate:
        """The rate's schedule over `train_steps` steps (default: the plan's): its warmup is
        warmup_fraction of them, and the decay ends at the last."""
        steps = train_steps or self.train_steps
        training = self.config.training
        decay = training.lr_decay == "cosine"
        return LearningRate(training.learning_rate, self.peak_learning_rate,
                            self._warmup(steps), steps if decay else 0, training.lr_floor)

    def profile_executions(self) -> tuple[int, int] | int:
        """Keras' TensorBoard `profile_batch` for the configured train steps.

        Keras counts a batch per host round trip, so steps map to executions of
        steps_per_execution steps each.
        """
        steps = self.config.runtime.profile_steps
        if not steps:
            return 0
        return (math.ceil(steps[0] / self.steps_per_execution),
                math.ceil(steps[1] / self.steps_per_execution))

    def dataset(self, files: str | list[str], feature_spec: dict, *, training: bool,
                cache: bool, part: str = data.ALL) -> tf.distribute.DistributedDataset:
        batch = (self.validation_per_replica_batch if part == data.VALIDATION
                 else self.per_replica_batch)
        return data.distributed_dataset(
            self.strategy, files, feature_spec, batch, spec=self.spec,
            training=training, seed=self.config.training.seed, cache=cache, part=part,
            validation_fraction=self.config.data.validation_fraction,
            validation_start=self.validation_start)

    def cache_decision(self, splits: dict[str, str | list[str]]) -> cache_size.CacheDecision:
        """Which of these splits the data settings keep in memory; logged."""
        decision = cache_size.decide(self.config.data, self.spec, splits)
        logging.info("Input cache: %s", decision.describe())
        return decision

    def datasets(self, train_files: str | list[str], feature_spec: dict, cache: bool
                 ) -> tuple[tf.distribute.DistributedDataset,
                            tf.distribute.DistributedDataset | None]:
        """(fit, validation) per-replica datasets of the training split's two parts, each
        cached in memory when `cache` (the plan's `cache_decision`); validation is None when
        the plan has no validation slice."""
        fit = self.dataset(train_files, feature_spec, training=True, cache=cache, part=data.FIT)
        if not self.validation_steps:
            return fit, None
        return fit, self.dataset(train_files, feature_spec, training=False, cache=cache,
                                 part=data.VALIDATION)

    def refit_budget(self, kept_epoch: int) -> tuple[int, int]:
        """(epochs, steps per epoch) of a refit after early stopping kept `kept_epoch`:
        refit_factor times as many epochs, each longer by the slice's share of the rows, so
        an epoch stays one pass over what it trains on."""
        epochs = math.ceil(self.config.training.refit_factor * kept_epoch)
        rows = self.fit_examples + self.validation_examples
        return epochs, round(self.steps_per_epoch * rows / self.fit_examples)

    def refit(self, inputs: "RunInputs", kept_epoch: int, train_files: str | list[str],
              callbacks: Callable[[int], list[tf_keras.callbacks.Callback]],
              base_model: str | None = None) -> tuple[tf_keras.Model, int]:
        """A fresh model trained on every training row (the validation slice's too) for
        refit_factor × `kept_epoch` epochs (TrainingConfig.refit_factor says when that pays),
        its learning rate as TrainingConfig.refit_schedule says.

        Args:
          inputs: this run's inputs (Transform's output, the label's scale, the cache choice).
          kept_epoch: the epoch early stopping kept.
          train_files: the training split's files.
          callbacks: the refit's callbacks, given its number of epochs.
          base_model: the blessed model to warm-start from, when warm_start is on.

        Returns:
          (the refitted model, its epochs).
        """
        epochs, steps = self.refit_budget(kept_epoch)
        logging.info("Refitting on all %d training rows (the validation slice's too): %d epochs "
                     "of %d steps, refit_factor %g × the kept epoch %d",
                     self.fit_examples + self.validation_examples, epochs, steps,
                     self.config.training.refit_factor, kept_epoch)
        # Every row of the training split, shuffled as the fit rows are; the first fit
        # profiled the steps, if asked.
        train = self.dataset(train_files, inputs.tf_transform_output.transformed_feature_spec(),
                             training=True, cache=inputs.train_cached, part=data.ALL)
        # 'first_fit': the first fit's schedule, epoch for epoch (over the refit's own epochs
        # where it runs longer); 'own': the whole schedule over the refit's epochs.
        own = self.config.training.refit_schedule == REFIT_OWN
        keras_model = self.compiled_model(inputs.tf_transform_output, inputs.label_scale,
                                          train_steps=(epochs if own else max(self.epochs, epochs))
                                          * steps)
        if self.config.training.warm_start and base_model:
            warm_start.restore(keras_model, base_model, warm_start.vocabularies(
                self.spec, inputs.tf_transform_output))
        keras_model.fit(train, epochs=epochs, steps_per_epoch=steps, verbose=0,
                        callbacks=callbacks(epochs))
        return keras_model, epochs

    def compiled_model(
        self,
        tf_transform_output: tft.TFTransformOutput,
        label_scale: tuple[float, float] = model.NO_SCALE,
        build: Callable[[], tf_keras.Model] | None = None,
        train_steps: int | None = None,
    ) -> tf_keras.Model:
        """The spec's model (or `build()`'s), built under the plan's precision policy in the
        strategy's scope, and compiled with the plan's optimizer, steps and XLA setting; its
        learning rate is scheduled over `train_steps` (default: the plan's)."""
        tf_keras.utils.set_random_seed(self.config.training.seed)
        tf_keras.mixed_precision.set_global_policy(self.precision)
        try:
            with self.strategy.scope():
                keras_model = build() if build else model.build_model(
                    self.config, self.spec, model.category_sizes(self.spec, tf_transform_output),
                    label_scale)
                optimizer = adam(self.learning_rate(train_steps),
                                 self.config.training.weight_decay)
                model.compile_model(
                    keras_model, self.spec, optimizer=optimizer,
                    steps_per_execution=self.steps_per_execution, jit_compile=self.jit_compile,
                    label_scale=label_scale,
                    label_smoothing=self.config.training.label_smoothing)
                # Adam's slots exist before the first step: a train function that creates
                # variables is traced twice (once to create them, once to run). The legacy optimizer
                # has no public `build`; this is what its apply_gradients calls first.
                optimizer._create_all_weights(keras_model.trainable_variables)
        finally:
            # Layers keep the policy they were built with; what is built later (the float32
            # export) starts from float32.
            tf_keras.mixed_precision.set_global_policy("float32")
        return keras_model


def make_plan(config: TrainerConfig, spec: DatasetSpec, train_steps: int | None, *,
              examples: dict[str, int] | None = None,
              dist: tf.distribute.Strategy | None = None, as_tpu: bool = False,
              fold: int = 0) -> TrainingPlan:
    """Decides the plan for these settings.

    Args:
      config: the trainer settings.
      spec: the dataset spec (task, features).
      train_steps: the number of train steps the run takes; None: config.training.epochs
        passes over the fit part of `examples`.
      examples: the training split's rows by part (`data.count_examples`); None: no
        validation slice, and train_steps is required.
      dist: the strategy to use; default: `strategy.get_distribution_strategy(config)`.
      as_tpu: build the step as a TPU runs it (precision, steps per execution, XLA) even when
        `dist` is not a TPUStrategy, for `make tpu-check` on any host.
      fold: which of config.training.validation_folds slices `examples` counted.

    Returns:
      The plan.

    Raises:
      PlanError: global_batch_size does not divide over the replicas, the fit rows make no
        full batch, or profile_steps lies beyond train_steps.
      strategy.TPUUnavailableError: strategy='tpu' and no TPU is reachable.
    """
    dist = dist or strategy.get_distribution_strategy(config)
    tpu = as_tpu or strategy.is_tpu(dist)
    if tpu and config.model.tpu_network:
        logging.info("The step a TPU runs trains the spec's [tpu] network: %s",
                     ", ".join(f"{k}={v}" for k, v in config.model.tpu_network))
        config = dataclasses.replace(config, model=config.model.on_tpu())
    runtime = config.runtime
    precision = runtime.mixed_precision
    if precision == "auto":
        precision = "mixed_bfloat16" if tpu else "float32"
    spe = runtime.steps_per_execution or STEPS_PER_EXECUTION
    per_replica = per_replica_batch_size(config, dist.num_replicas_in_sync)
    examples = examples or {}
    by_epochs = train_steps is None
    if by_epochs:
        fit_rows = examples.get(data.FIT, 0)
        steps_per_epoch = fit_rows // (per_replica * dist.num_replicas_in_sync)
        if not steps_per_epoch:
            raise PlanError(
                f"{fit_rows} training rows make no full batch of "
                f"{per_replica * dist.num_replicas_in_sync}: lower per_replica_batch_size "
                "(the dataset spec's [training] or PER_REPLICA_BATCH_SIZE) or add data")
        epochs = config.training.epochs
        train_steps = epochs * steps_per_epoch
    else:
        # The most Keras epochs (≤ checkpoint_epochs) that divide train_steps exactly.
        most = min(config.training.checkpoint_epochs, train_steps)
        epochs = max(d for d in range(1, most + 1) if train_steps % d == 0)
    if runtime.profile_steps and runtime.profile_steps[1] > train_steps:
        raise PlanError(f"profile_steps={runtime.profile_steps!r}: the run has only "
                        f"{train_steps} train steps; profile steps within 1..{train_steps}")
    plan = TrainingPlan(
        config=config, spec=spec, strategy=dist, tpu=tpu, per_replica_batch=per_replica,
        steps_per_execution=spe, precision=precision,
        # TPUStrategy compiles every step with XLA; elsewhere XLA is a setting.
        jit_compile=runtime.jit_compile or as_tpu, train_steps=train_steps, epochs=epochs,
        by_epochs=by_epochs, validation_examples=examples.get(data.VALIDATION, 0),
        fit_examples=examples.get(data.FIT, 0), fold=fold)
    if tpu:
        _warn_if_not_tpu_sized(plan)
    return plan


@dataclasses.dataclass(frozen=True)
class RunInputs:
    """What `run_fn` and the Tuner's `tuner_fn` both train from, built alike by `run_inputs`:
    the training split's parts, the plan, Transform's output, the (fit, validation) datasets,
    a regression label's scale, and whether the training split is cached in memory (decided
    once: the estimate reads the files)."""

    examples: dict[str, int]
    plan: TrainingPlan
    tf_transform_output: tft.TFTransformOutput
    train: tf.distribute.DistributedDataset
    validation: tf.distribute.DistributedDataset | None
    label_scale: tuple[float, float]
    train_cached: bool

    def new_record(self) -> early_stopping.TrainingRecord:
        """A blank record of this plan's budget and parts, for `early_stopping.BestEpoch`."""
        return early_stopping.TrainingRecord(
            budget=self.plan.describe_budget(), epochs_budget=self.plan.epochs,
            fit_rows=self.examples[data.FIT], validation_rows=self.examples[data.VALIDATION],
            fold=self.plan.fold, folds=self.plan.config.training.validation_folds)


def validation_start(config: TrainerConfig, fold: int) -> float:
    """Where fold `fold`'s validation slice starts, as a share of the rows: the
    validation_folds slices start evenly spaced."""
    return fold / config.training.validation_folds


def run_inputs(config: TrainerConfig, spec: DatasetSpec, fn_args: FnArgs,
               min_validation_rows: int = MIN_VALIDATION_ROWS, fold: int = 0) -> RunInputs:
    """The plan and the data for a Trainer or Tuner run, holding out fold `fold`'s slice (of
    config.training.validation_folds): one raw pass counts the training split's parts, the
    plan follows from them, the datasets from the plan.

    A validation slice of fewer than `min_validation_rows` rows is not held out: every
    training row fits, and the budget's last epoch is kept.

    Raises:
      PlanError: as `make_plan`.
      strategy.TPUUnavailableError: strategy='tpu' and no TPU is reachable.
    """
    start = validation_start(config, fold)
    examples = data.count_examples(fn_args.train_files, config.data.validation_fraction, start)
    if 0 < examples[data.VALIDATION] < min_validation_rows:
        config, examples = _grown_slice(config, examples, fn_args.train_files,
                                        min_validation_rows, start)
    plan = make_plan(config, spec, fn_args.train_steps, examples=examples, fold=fold)
    # transform_graph_path: what TFX sets for the Trainer and the Tuner alike.
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    cache = plan.cache_decision({keys.TRAIN_SPLIT: fn_args.train_files}).cached[keys.TRAIN_SPLIT]
    train, validation = plan.datasets(fn_args.train_files,
                                      tf_transform_output.transformed_feature_spec(), cache)
    label_scale = (data.label_scale(fn_args.train_files, spec)
                   if spec.task == tasks.REGRESSION else model.NO_SCALE)
    return RunInputs(examples, plan, tf_transform_output, train, validation, label_scale, cache)


def _grown_slice(config: TrainerConfig, examples: dict[str, int], files: list[str],
                 min_rows: int, start: float) -> tuple[TrainerConfig, dict[str, int]]:
    """(config, parts) with a slice of at least `min_rows` rows, grown up to
    MAX_VALIDATION_FRACTION of the training rows so that early stopping (and a refit) still
    choose the epochs on small data; with too few rows for that, no slice at all."""
    total = sum(examples.values())
    asked = config.data.validation_fraction
    fraction = min(MAX_VALIDATION_FRACTION, math.ceil(100 * min_rows / total) / 100)
    while fraction <= MAX_VALIDATION_FRACTION:
        grown = data.count_examples(files, fraction, start)
        if grown[data.VALIDATION] >= min_rows:
            logging.warning(
                "validation_fraction=%g would hold out %d rows, fewer than the %d an epoch's "
                "score needs to mean more than noise: the slice grows to %g of the %d training "
                "rows (%d rows), so early stopping still chooses the epochs", asked,
                examples[data.VALIDATION], min_rows, fraction, total, grown[data.VALIDATION])
            return config.replace(validation_fraction=fraction), grown
        fraction = round(fraction + 0.01, 2)
    logging.warning(
        "%d training rows are too few for a validation slice of %d rows (at most %g of them): "
        "no validation slice, no early stopping and no refit; all rows train for the whole "
        "budget and the last epoch is kept", total, min_rows, MAX_VALIDATION_FRACTION)
    return config.replace(validation_fraction=0.0), {data.FIT: total, data.VALIDATION: 0}


def _warn_if_not_tpu_sized(plan: TrainingPlan) -> None:
    """TPU matrix units are 128 wide: other sizes pad and waste the difference."""
    odd = [f"per_replica_batch_size={plan.per_replica_batch}"] if plan.per_replica_batch % 128 \
        else []
    odd += [f"hidden width {w}" for w in plan.config.model.hidden_units if w % 128]
    if odd:
        logging.warning("On TPU, sizes that are not multiples of 128 waste the MXU: %s",
                        ", ".join(odd))
