"""Trainer settings, passed from the pipeline config to `run_fn` through `custom_config`.

Grouped by concern, as one frozen dataclass per group: `data` (how examples reach the step),
`model` (the network), `training` (optimizer, learning rate, schedule, warm start) and
`runtime` (strategy, precision, compilation, profiling). Each group validates itself when
built, so a bad value fails while the pipeline is being defined (before any component runs)
and again, with the same message, inside the Trainer.

Setting names are unique across groups, so `TrainerConfig.create(per_replica_batch_size=64)`
and the environment variables of `make run` can name a setting without its group.
"""

import dataclasses
from typing import Any

from trainer_module.keys import TRAINER_CONFIG_KEY

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker_mirrored")
PRECISIONS = ("auto", "float32", "mixed_bfloat16")
CACHE_MODES = ("auto", "memory", "none")
LR_SCALINGS = ("none", "linear", "sqrt")
LR_DECAYS = ("cosine", "none")
# How a refit's learning rate runs (TrainingConfig.refit_schedule).
REFIT_FIRST_FIT, REFIT_OWN = "first_fit", "own"
REFIT_SCHEDULES = (REFIT_FIRST_FIT, REFIT_OWN)
# How an ensemble's members are built (ModelConfig.ensemble_kind).
ENSEMBLE_KINDS = ("mini", "packed")
# The settings that take one of a fixed set of words.
CHOICES = {"cache": CACHE_MODES, "lr_scaling": LR_SCALINGS, "lr_decay": LR_DECAYS,
           "refit_schedule": REFIT_SCHEDULES, "strategy": STRATEGIES, "mixed_precision": PRECISIONS,
           "ensemble_kind": ENSEMBLE_KINDS}

# A best epoch b is waited on for this many times b epochs (the run stops at epoch 3b when
# nothing beats it), at least MIN_PATIENCE and at most TrainingConfig.early_stopping_patience:
# a loss that stopped falling at epoch 4 is not waited on for 30 more. Replayed on the quality
# suite's recorded validation losses, this kept the same epoch as a fixed 30 in all 33 runs,
# for 0.48 of birds' epochs (docs/trainer-and-tpu.md, "Wider embeddings and a longer wait").
PATIENCE_PER_BEST_EPOCH = 2
MIN_PATIENCE = 10
# The largest cross_buckets whose square fits int32: the pair hash multiplies two ids below it.
MAX_CROSS_BUCKETS = 46340
# The fewest rows a validation slice holds: on fewer, the loss of one epoch against another's
# is mostly which few rows fell in the slice.
MIN_VALIDATION_ROWS = 100
# The largest share of the training rows a slice grows to so that it holds MIN_VALIDATION_ROWS
# (small data); with fewer rows than that takes, no slice is held out.
MAX_VALIDATION_FRACTION = 0.3
# A refit longer than ten times the kept epochs trains far past anything the slice measured.
MAX_REFIT_FACTOR = 10
# The most models a run trains on folds of its rows (TrainingConfig.validation_folds).
MAX_VALIDATION_FOLDS = 10
# The key of the Tuner's trial budget in its custom_config (beside these settings).
TUNER_TRIALS_KEY = "tuner_trials"


class TrainerConfigError(ValueError):
    """A trainer setting has a value outside its expected form."""


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """How examples reach the train step.

    per_replica_batch_size: examples per replica per step.
    global_batch_size: if > 0, overrides per_replica_batch_size with global / replicas (it must
      divide evenly: the 8 cores of a v3-8 take 1016 or 1024, not 1020).
    cache: 'memory' keeps the parsed split in host RAM after the first epoch; 'none' reads and
      parses the files every epoch; 'auto' caches only when the split's estimated in-memory
      size fits in cache_memory_fraction of this host's RAM (estimated from a sample of the
      files, without reading them all).
    cache_memory_fraction: the share of host RAM that 'auto' lets the caches of both splits
      take.
    validation_fraction: the share of the training split held out (by a hash of each
      example's file and position, so the same rows every epoch and every reader) to score
      each epoch for early stopping. The Evaluator's eval split is never seen by the
      Trainer, so its blessing stays unbiased. 0: no validation slice, and no early
      stopping. A slice that would hold fewer than MIN_VALIDATION_ROWS rows grows until it
      does, up to MAX_VALIDATION_FRACTION of the rows; past that, none is held out.
    """

    per_replica_batch_size: int = 256
    global_batch_size: int = 0
    cache: str = "auto"
    cache_memory_fraction: float = 0.25
    validation_fraction: float = 0.1

    def __post_init__(self) -> None:
        _check_int("per_replica_batch_size", self.per_replica_batch_size, minimum=1)
        _check_int("global_batch_size", self.global_batch_size, minimum=0)
        _check_choice("cache", self.cache)
        _check_fraction("cache_memory_fraction", self.cache_memory_fraction, low_open=True)
        _check_fraction("validation_fraction", self.validation_fraction)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The network: an embedding per category and per pair of categories, the numbers as they
    are, an MLP, the head.

    hidden_units: widths of the MLP's layers (multiples of 128 fill a TPU's matrix units).
    embedding_dim: width of every category embedding.
    cross_buckets: embedding rows of each pair of category ids (every pair of single-id
      category features gets an embedding of their combination, so the MLP sees which values
      occur together, as a tree's successive splits do). A pair with fewer combinations gets
      one row for each, without collisions; a pair with more shares these rows by a modular
      hash. At most 46340, so the hash stays in int32 (a TPU has no native int64). 0: no
      pairs.
    cross_dim: width of every pair's embedding; 1 is a learned value per combination. Adam
      updates the whole table every step, so the table's size is training time.
    pairs_per_feature: the budget of pairs, this many per single-id category feature (k
      features have k·(k−1)/2 pairs; the budget keeps the table, and the time, linear in k):
      up to 17 features every pair fits; past that, the pairs with the fewest combinations.
    dropout: dropout rate after each hidden layer and on the pairs' embeddings.
    l2: L2 weight penalty on hidden layers and embeddings.
    ensemble_size: k members sharing the MLP, as TabM-mini (Gorishniy et al., ICLR 2025) builds
      them: each member scales the features by its own learned vector (started at random
      signs), the hidden layers are shared, and each member has its own head. The k rows of a
      member batch go through each hidden layer as one matmul ([batch·k, width]), so the step
      keeps static shapes; training minimises the mean of the members' losses, and the model
      answers (and is scored and early-stopped on) the mean of their predictions. A step costs
      about k times the MLP's arithmetic. 1: one plain MLP.
    ensemble_kind: how the k members are built. 'mini' is TabM-mini, as above. 'packed' is
      TabM-packed: each member has hidden layers of its own, started from its own random
      weights, so the members are k independent MLPs trained on the same batches; all k run
      as one batched matmul per layer, the same arithmetic as 'mini' with k times the hidden
      layers' weights. The L2 penalty on each member's weights is l2 / k, as each member's
      loss counts 1 / k of the step's.
    wide: add to the head's logits one learned value per id of every single-id category
      feature (the wide part of Wide & Deep, Cheng et al., 2016), started at 0, without
      dropout or L2. What each category adds on its own is then one table away, as in a
      linear model; the embeddings and the MLP learn what is left.
    tpu_network: the network a TPU trains in place of this one, as (setting, value) pairs of
      this group's settings (a spec's [tpu] table). A TPU's step is input-bound by far, so
      there a wider network or more members cost little time where a CPU pays for each;
      the training plan swaps them in when it builds the step a TPU runs (a TPU, or
      `make tpu-check`). Empty: a TPU trains the same network.
    """

    hidden_units: tuple[int, ...] = (256, 128)
    embedding_dim: int = 4
    cross_buckets: int = 1009
    cross_dim: int = 1
    pairs_per_feature: int = 8
    dropout: float = 0.3
    l2: float = 0.001
    ensemble_size: int = 1
    ensemble_kind: str = "mini"
    wide: bool = False
    tpu_network: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_units", tuple(self.hidden_units))
        object.__setattr__(self, "tpu_network", _network_pairs(self.tpu_network))
        if not self.hidden_units:
            raise TrainerConfigError("hidden_units is empty: expected one or more widths > 0")
        for width in self.hidden_units:
            _check_int("hidden_units", width, minimum=1)
        _check_int("embedding_dim", self.embedding_dim, minimum=1)
        _check_int("cross_buckets", self.cross_buckets, minimum=0)
        _check_int("cross_dim", self.cross_dim, minimum=1)
        _check_int("pairs_per_feature", self.pairs_per_feature, minimum=1)
        if self.cross_buckets > MAX_CROSS_BUCKETS:
            raise TrainerConfigError(
                f"cross_buckets={self.cross_buckets}: expected at most {MAX_CROSS_BUCKETS} "
                "(the pair hash multiplies two ids below it in int32), or 0 for no pairs")
        _check_fraction("dropout", self.dropout)
        _check_fraction("l2", self.l2)
        _check_int("ensemble_size", self.ensemble_size, minimum=1)
        _check_choice("ensemble_kind", self.ensemble_kind)
        _check_bool("wide", self.wide)

    def on_tpu(self) -> "ModelConfig":
        """The network a TPU trains: this one with tpu_network's settings."""
        return dataclasses.replace(self, **dict(self.tpu_network), tpu_network=())


def _network_pairs(pairs: Any) -> tuple[tuple[str, Any], ...]:
    """tpu_network as (setting, value) pairs, each a ModelConfig setting with a value it
    takes (JSON gives lists for tuples)."""
    networks = {f.name for f in dataclasses.fields(ModelConfig)} - {"tpu_network"}
    if (isinstance(pairs, str | bytes) or not isinstance(pairs, list | tuple)
            or any(not isinstance(p, list | tuple) or len(p) != 2 for p in pairs)):
        raise TrainerConfigError(
            f"tpu_network={pairs!r}: expected (setting, value) pairs of the network's settings, "
            "e.g. [['ensemble_size', 32], ['hidden_units', [512, 512, 512]]]")
    normal = tuple((name, tuple(value) if isinstance(value, list) else value)
                   for name, value in pairs)
    unknown = sorted({name for name, _ in normal} - networks)
    if unknown:
        raise TrainerConfigError(f"tpu_network names {unknown}: expected only the network's "
                                 f"settings {sorted(networks)}")
    if normal:
        try:  # each value checked as the setting itself checks it
            ModelConfig(**dict(normal))
        except TrainerConfigError as e:
            raise TrainerConfigError(f"tpu_network: {e}") from e
    return normal


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """The optimizer and what it starts from.

    learning_rate: Adam's rate at reference_batch_size (the batch it was tuned at).
    reference_batch_size: the global batch learning_rate was tuned for.
    lr_scaling: how the rate follows a larger or smaller global batch: 'linear' multiplies it
      by global / reference, 'sqrt' by sqrt(global / reference), 'none' keeps it. With the
      same number of epochs, a global batch 8x larger takes 8x fewer steps: only 'linear'
      (with its warmup) kept the model's quality (docs/trainer-and-tpu.md, "Large batches").
    warmup_fraction: when the scaled rate is above learning_rate, the first this-share of
      train_steps ramps linearly from learning_rate up to the scaled rate, so the first large
      steps do not throw the fresh weights off.
    lr_decay: how the rate moves after the warmup. 'cosine' lowers it along half a cosine wave
      from the peak to 0 at the budget's last step, so the last steps settle into a minimum
      instead of moving about it at full rate; 'none' keeps the peak to the end. With early
      stopping the run may end before the rate is low (docs/trainer-and-tpu.md, "Learning-rate
      decay").
    lr_floor: the share of the peak rate the cosine ends at, instead of 0. A fit still
      improving when its budget runs out has then still been learning at a real rate, not
      stalled by a rate near zero; early stopping keeps the best epoch's weights either way.
    epochs: the training budget in passes over the training rows (less the validation
      slice), used when the run sets no train_steps (a dataset spec's [training] or
      TRAIN_STEPS). Each epoch ends in a validation pass (and, when one is due, a preemption
      backup: RuntimeConfig.backup_seconds).
    checkpoint_epochs: with a train_steps budget, train_steps is split into at most this many
      Keras epochs, each ending in a validation pass (and a preemption backup when one is
      due). They are not passes over the data: one pass is (examples / global batch) steps.
    early_stopping_patience: stop after at most this many epochs in a row without a lower
      validation loss, and keep the weights of the best epoch (always, also when the budget
      ends first). A best at epoch b is waited on for 2b epochs when that is fewer, but at
      least MIN_PATIENCE (`patience_after`). 0: train the whole budget and keep the last
      weights.
    refit_factor: once early stopping has kept epoch E, train a fresh model on every training
      row (the validation slice's too) for ceil(refit_factor × E) epochs, and export that one;
      0: export epoch E's weights. The refit costs about as much training again, and pays
      where the slice's rows are a real share of what there is to learn from; much beyond E
      it overfits where the validation loss and the metric agree (docs/trainer-and-tpu.md,
      "Refit on every training row"). Without a validation slice nothing is refitted.
    refit_schedule: how the refit's learning rate runs. 'first_fit' follows the first fit's
      schedule epoch for epoch, so at the kept epoch the rate is where early stopping measured
      it; 'own' runs the whole warmup and decay over the refit's own epochs, so the exported
      weights come from the end of the decay rather than from near the peak rate where a fit
      stopped early was kept. On a regression label below 10,000 rows 'own' lowered the error;
      on a smoothed class label it cost accuracy (docs/trainer-and-tpu.md, "Refit on every
      training row").
    validation_folds: k > 1 trains k models, each holding out its own slice of
      validation_fraction of the rows (the slices start 1/k of the rows apart, so a fraction
      of 1/k makes k disjoint folds: every row trains k - 1 models and scores one), each with
      its own early stopping (and refit) and seed + its fold's index; the export answers the
      mean of their answers. It costs k times the training; it is meant for small data, where
      which rows one slice holds moves the model (docs/trainer-and-tpu.md, "Models on folds
      of the rows", has the runs). Without a validation slice one model trains. 1: one model.
    weight_decay: each step shrinks every weight by this share of the step's learning rate,
      apart from the gradient (decoupled weight decay, Loshchilov & Hutter, ICLR 2019, as
      PyTorch's and Keras' AdamW apply it); TabM's published defaults use 0.0003 with no L2.
      Unlike the model's l2, which adds to the loss and so passes through Adam's per-weight
      scaling, it takes the same share off every weight, whatever the scale of its gradients;
      every variable decays, embeddings and biases too. 0: plain Adam.
    label_smoothing: classification only: the loss sees each label moved this share toward
      the uniform answer (1 - s on the true class plus s / classes on every class), so the
      model is not pushed toward certainty on rows it has already learned (RealMLP,
      Holzmüller et al., 2024, uses 0.1). Serving, the Evaluator and the thresholds see the
      model's plain probabilities. A regression dataset refuses any value but 0.
    warm_start: start from the weights of the latest blessed model (continuous training on new
      data) when its layer shapes match; a mismatch (a vocabulary grew) fails with the layers
      that differ.
    seed: weight initialization and shuffling.
    """

    learning_rate: float = 0.0005
    reference_batch_size: int = 256
    lr_scaling: str = "linear"
    warmup_fraction: float = 0.1
    lr_decay: str = "cosine"
    lr_floor: float = 0.0
    epochs: int = 100
    checkpoint_epochs: int = 5
    early_stopping_patience: int = 10
    refit_factor: float = 0.0
    refit_schedule: str = REFIT_FIRST_FIT
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    validation_folds: int = 1
    warm_start: bool = False
    seed: int = 42

    def __post_init__(self) -> None:
        if (isinstance(self.learning_rate, bool) or not isinstance(self.learning_rate, int | float)
                or not 0 < self.learning_rate < 10):
            raise TrainerConfigError(
                f"learning_rate={self.learning_rate!r}: expected a number in (0, 10)")
        _check_int("reference_batch_size", self.reference_batch_size, minimum=1)
        _check_choice("lr_scaling", self.lr_scaling)
        _check_fraction("warmup_fraction", self.warmup_fraction)
        _check_choice("lr_decay", self.lr_decay)
        _check_fraction("lr_floor", self.lr_floor)
        _check_int("epochs", self.epochs, minimum=1)
        _check_int("checkpoint_epochs", self.checkpoint_epochs, minimum=1)
        _check_int("early_stopping_patience", self.early_stopping_patience, minimum=0)
        if (isinstance(self.refit_factor, bool) or not isinstance(self.refit_factor, int | float)
                or not (self.refit_factor == 0 or 1 <= self.refit_factor <= MAX_REFIT_FACTOR)):
            raise TrainerConfigError(
                f"refit_factor={self.refit_factor!r}: expected 0 (off) or a number in "
                f"[1, {MAX_REFIT_FACTOR}]")
        _check_choice("refit_schedule", self.refit_schedule)
        _check_fraction("weight_decay", self.weight_decay)
        _check_fraction("label_smoothing", self.label_smoothing)
        _check_int("validation_folds", self.validation_folds, minimum=1,
                   maximum=MAX_VALIDATION_FOLDS)
        _check_bool("warm_start", self.warm_start)
        if self.warm_start and self.validation_folds > 1:
            raise TrainerConfigError(
                f"warm_start=True with validation_folds={self.validation_folds}: a warm start "
                "continues one model from the blessed one; set validation_folds=1 "
                "(VALIDATION_FOLDS, or the spec's [training]) or warm_start=false")
        _check_int("seed", self.seed, minimum=0)


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """Where and how the step runs.

    strategy: 'auto' (a TPU when an address is configured and reachable, else MirroredStrategy
      over GPUs or CPU devices, or MultiWorkerMirroredStrategy when TF_CONFIG lists several
      workers), 'tpu' (a TPU or fail: never falls back), 'mirrored', 'multi_worker_mirrored'.
    tpu_address: TPU name, 'grpc://host:8470', or 'local' on a TPU VM; empty → $TPU_NAME.
    steps_per_execution: train steps per host round trip; 0 → 32.
    mixed_precision: 'auto' → mixed_bfloat16 on TPU, float32 elsewhere. Exports are float32.
    jit_compile: compile the train step with XLA (TPUStrategy always compiles with XLA).
    profile_steps: (first, last) train steps to capture a TensorBoard profile of, into the
      model run's logs; empty: no profile.
    export_parity_tolerance: the largest difference allowed between the exported model's
      predictions and the trained model's on the same raw eval examples (probabilities, or the
      label's standard deviations for regression); beyond it the Trainer fails.
    backup_seconds: the preemption backup (`<model_run_dir>/backup`) is written at the end of
      the first epoch that ends this many seconds or more after the last one (or after training
      began); 0: at the end of every epoch. A restarted Trainer loses at most about this much
      training plus an epoch, and short epochs (small data, a TPU's fast steps) are not each
      followed by a checkpoint write (docs/trainer-and-tpu.md, "Preemption backups").
    intra_op_threads: host threads one TensorFlow op may split its work over; 0 → 1 where the
      CPU trains, TensorFlow's default (one per core) where a GPU or TPU does. The CPU step is
      many small ops: split across cores, each waits for its slowest part, while unsplit they
      run side by side on the inter-op threads (trainer_module/host_threads.py has the
      measurement). TensorFlow fixes it when it starts: the local runner applies it first.
    """

    strategy: str = "auto"
    tpu_address: str = ""
    steps_per_execution: int = 0
    mixed_precision: str = "auto"
    jit_compile: bool = False
    profile_steps: tuple[int, ...] = ()
    export_parity_tolerance: float = 0.02
    backup_seconds: int = 60
    intra_op_threads: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "profile_steps", tuple(self.profile_steps))
        _check_choice("strategy", self.strategy)
        if not isinstance(self.tpu_address, str):
            raise TrainerConfigError(
                f"tpu_address={self.tpu_address!r}: expected a string such as 'local', "
                "'my-tpu' or 'grpc://10.0.0.2:8470'")
        _check_int("steps_per_execution", self.steps_per_execution, minimum=0)
        _check_choice("mixed_precision", self.mixed_precision)
        _check_bool("jit_compile", self.jit_compile)
        steps = self.profile_steps
        if steps and (len(steps) != 2 or any(isinstance(s, bool) or not isinstance(s, int)
                                             for s in steps) or not 1 <= steps[0] <= steps[1]):
            raise TrainerConfigError(
                f"profile_steps={steps!r}: expected two train steps 'first,last' with "
                "1 <= first <= last, e.g. 100,120")
        _check_fraction("export_parity_tolerance", self.export_parity_tolerance, low_open=True)
        _check_int("backup_seconds", self.backup_seconds, minimum=0)
        _check_int("intra_op_threads", self.intra_op_threads, minimum=0)

    @property
    def tpu_required(self) -> bool:
        return self.strategy == "tpu"


GROUPS = {"data": DataConfig, "model": ModelConfig, "training": TrainingConfig,
          "runtime": RuntimeConfig}
# Setting name → its group.
SETTINGS = {f.name: group for group, cls in GROUPS.items() for f in dataclasses.fields(cls)}


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """How to train, by concern; see each group for its settings."""

    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)

    def __post_init__(self) -> None:
        for group, cls in GROUPS.items():
            if not isinstance(getattr(self, group), cls):
                raise TrainerConfigError(
                    f"{group}={getattr(self, group)!r}: expected a {cls.__name__}")

    @classmethod
    def create(cls, **settings: Any) -> "TrainerConfig":
        """A config from settings named without their group (defaults for the rest).

        Raises:
          TrainerConfigError: an unknown setting, or a value outside its expected form.
        """
        return cls().replace(**settings)

    def replace(self, **settings: Any) -> "TrainerConfig":
        """This config with some settings changed, named without their group."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise TrainerConfigError(
                f"unknown trainer setting(s) {unknown}: expected only {sorted(SETTINGS)}")
        by_group: dict[str, dict[str, Any]] = {}
        for name, value in settings.items():
            by_group.setdefault(SETTINGS[name], {})[name] = value
        return dataclasses.replace(self, **{
            group: dataclasses.replace(getattr(self, group), **values)
            for group, values in by_group.items()})

    def to_custom_config(self) -> dict[str, Any]:
        """JSON-serializable form for the Trainer's custom_config."""
        values = dataclasses.asdict(self)
        values["model"]["hidden_units"] = list(self.model.hidden_units)
        values["model"]["tpu_network"] = [
            [name, list(value) if isinstance(value, tuple) else value]
            for name, value in self.model.tpu_network]
        values["runtime"]["profile_steps"] = list(self.runtime.profile_steps)
        return {TRAINER_CONFIG_KEY: values}

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> "TrainerConfig":
        """The config `to_custom_config` wrote.

        Raises:
          TrainerConfigError: an unknown group or setting, or a value outside its form.
        """
        values = dict((custom_config or {}).get(TRAINER_CONFIG_KEY) or {})
        unknown = sorted(set(values) - set(GROUPS))
        if unknown:
            raise TrainerConfigError(
                f"unknown trainer setting group(s) {unknown} in custom_config"
                f"[{TRAINER_CONFIG_KEY!r}]: expected only {sorted(GROUPS)}")
        groups = {}
        for group, group_cls in GROUPS.items():
            given = dict(values.get(group) or {})
            known = {f.name for f in dataclasses.fields(group_cls)}
            extra = sorted(set(given) - known)
            if extra:
                raise TrainerConfigError(
                    f"unknown trainer setting(s) {extra} in custom_config"
                    f"[{TRAINER_CONFIG_KEY!r}][{group!r}]: expected only {sorted(known)}")
            groups[group] = group_cls(**given)
        return cls(**groups)


def _check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        raise TrainerConfigError(
            f"{name}={value!r}: expected a whole number >= {minimum}"
            + (f" and <= {maximum}" if maximum is not None else ""))


def patience_after(best_epoch: int, most: int) -> int:
    """The epochs in a row without a new best after which training stops, when the best came
    at `best_epoch` (1-based): PATIENCE_PER_BEST_EPOCH times its number, bounded to
    [MIN_PATIENCE, most]; `most` (TrainingConfig.early_stopping_patience) when that is
    smaller, and 0 (never stop) when it is 0."""
    return min(most, max(MIN_PATIENCE, PATIENCE_PER_BEST_EPOCH * best_epoch))


def _check_fraction(name: str, value: Any, low_open: bool = False) -> None:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not (0 < value <= 1 if low_open else 0 <= value < 1)):
        raise TrainerConfigError(
            f"{name}={value!r}: expected a number in {'(0, 1]' if low_open else '[0, 1)'}")


def _check_choice(name: str, value: Any) -> None:
    choices = CHOICES[name]
    if value not in choices:
        raise TrainerConfigError(f"{name}={value!r}: expected one of {', '.join(choices)}")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TrainerConfigError(f"{name}={value!r}: expected true or false")
