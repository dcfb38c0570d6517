"""`make tpu-check`: does the Trainer's TPU step compile, and can the host feed it?

The check asks the training plan for the step a TPU runs (`make_plan(as_tpu=True)`: the TPU
precision policy, TPU steps per execution, XLA) on this host's strategy: a TPUStrategy on a TPU
VM (TPU_NAME or tpu_address set), else MirroredStrategy over the CPU. It runs the step for
several executions over the real input function and counts how often it was traced (a TPU
recompiles on every retrace, so anything above one trace means a shape is not static).

Then the budget: the input function alone (examples/s the host delivers at the global batch)
against the compiled step alone, fed one batch from memory (examples/s the devices consume).
When the input is slower, the devices wait for it that share of the time.
"""

import dataclasses
import re
import time
from collections.abc import Callable

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from trainer_module import data, keys
from trainer_module.config import ModelConfig, TrainerConfig
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.plan import TrainingPlan, make_plan


@dataclasses.dataclass
class Budget:
    """Examples/s of the input function and of the step, at the plan's global batch."""

    input_per_s: float
    step_per_s: float

    @property
    def waiting(self) -> float:
        """Share of the time the devices wait for input (0 when the input keeps up)."""
        return max(0.0, 1.0 - self.input_per_s / self.step_per_s)

    def verdict(self) -> str:
        if self.waiting > 0:
            return (f"input-bound: the accelerator waits {self.waiting:.0%} of the time "
                    "(give the host more CPUs, keep the input cache on, or write more input files)")
        return (f"compute-bound: the input function delivers "
                f"{self.input_per_s / self.step_per_s:.1f}x what the step consumes")


@dataclasses.dataclass
class Readiness:
    features: dict[str, tuple[list[int], str]]
    label: tuple[list[int], str]
    device: str
    replicas: int
    per_replica_batch: int
    global_batch: int
    precision: str
    steps_per_execution: int
    learning_rate: str
    network: str
    input_cache: str
    steps_run: int
    traces: int
    xla_ok: bool
    xla_error: str = ""
    failed_op: str = ""
    budget: Budget | None = None

    @property
    def ready(self) -> bool:
        return self.xla_ok and self.traces == 1 and all(
            all(d is not None for d in shape) for shape, _ in self.features.values())

    def format(self) -> str:
        lines = ["TPU readiness report", "", "Input features (per-replica batch):"]
        for name, (shape, dtype) in sorted(self.features.items()):
            lines.append(f"  {name:<32} {str(shape):<10} {dtype}")
        lines.append(f"  {'(label)':<32} {str(self.label[0]):<10} {self.label[1]}")
        lines += [
            "",
            f"Devices: {self.device}",
            f"Replicas: {self.replicas}   per-replica batch: {self.per_replica_batch}   "
            f"global batch: {self.global_batch}",
            f"Precision policy: {self.precision}   steps per execution: "
            f"{self.steps_per_execution}   learning rate: {self.learning_rate}",
            f"Network: {self.network}",
            f"Input cache: {self.input_cache}",
            f"Train steps run: {self.steps_run}   train function traces: {self.traces}"
            + ("" if self.traces == 1 else "  (expected 1: a shape changes between steps)"),
        ]
        compile_line = f"XLA compile of the {self.precision} step (jit_compile=True): "
        if self.xla_ok:
            lines.append(compile_line + "OK")
        else:
            lines.append(compile_line + f"FAILED at op {self.failed_op or '?'}")
            lines.append(f"  {self.xla_error.splitlines()[0] if self.xla_error else ''}")
        if self.budget:
            lines += [
                "",
                f"Input function: {self.budget.input_per_s:,.0f} examples/s   "
                f"step: {self.budget.step_per_s:,.0f} examples/s",
                f"Budget: {self.budget.verdict()}",
            ]
        lines.append("")
        lines.append("READY for TPU" if self.ready else "NOT READY for TPU")
        return "\n".join(lines)


def _describe_network(network: ModelConfig, tpu_network: tuple) -> str:
    """The network the step trains, and whether it is the spec's [tpu] one."""
    kind = "packed members of" if network.ensemble_kind == "packed" else "members sharing"
    members = f"{network.ensemble_size} {kind} " if network.ensemble_size > 1 else ""
    return (f"{members}layers of {', '.join(map(str, network.hidden_units))}"
            + (" (the spec's [tpu] network)" if tpu_network else ""))


def _failed_op(message: str) -> str:
    """The op XLA could not compile, as named in TensorFlow's error text."""
    for pattern in (r"unsupported operations.*?\n\s*(\w+)\s", r"op (?:type )?'?(\w+)'? ",
                    r"\{\{node ([\w/]+)\}\}", r"(\w+) \(No registered"):
        found = re.search(pattern, message, re.S)
        if found:
            return found.group(1)
    return ""


def _device_kinds(dist: tf.distribute.Strategy) -> str:
    """'8 CPU' or '8 TPU': the replicas' device kinds and counts."""
    kinds = [d.split("/device:")[-1].split(":")[0] for d in dist.extended.worker_devices]
    return ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))


def _timed_fit(keras_model: tf_keras.Model, dataset, steps: int) -> float:
    started = time.perf_counter()
    keras_model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
    return time.perf_counter() - started


def _input_rate(dataset, batches: int, global_batch: int) -> float:
    """Examples/s of the distributed input function alone, after a warm-up pass."""
    iterator = iter(dataset)
    for _ in range(batches):
        next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * global_batch / (time.perf_counter() - started)


def measure_budget(plan: TrainingPlan, keras_model: tf_keras.Model, dataset,
                   one_batch: tuple, steps: int) -> Budget:
    """The input function's rate, and the compiled step's rate on `one_batch` (one replica's
    batch) repeated from memory on every replica."""
    input_per_s = _input_rate(dataset, steps, plan.global_batch)
    synthetic = data.distribute(
        plan.strategy, lambda _: tf.data.Dataset.from_tensors(one_batch).repeat())
    _timed_fit(keras_model, synthetic, steps)  # the synthetic feed's own warm-up
    seconds = _timed_fit(keras_model, synthetic, steps)
    return Budget(input_per_s=input_per_s, step_per_s=steps * plan.global_batch / seconds)


def check(
    transform_output: str,
    train_files: str | list[str],
    config: TrainerConfig,
    spec: DatasetSpec,
    steps: int = 64,
    build_model: Callable[[], tf_keras.Model] | None = None,
    budget: bool = True,
) -> Readiness:
    """Compiles and runs the TPU step on this host's strategy, then measures the budget.

    A regression head is checked with a unit label scale: the scale is two constants, and the
    step's shapes and ops do not depend on their values.

    build_model: another model to check (built by the plan); default: the Trainer's.
    budget: also measure the input function against the step (skipped when XLA fails).
    """
    plan = make_plan(config, spec, steps, as_tpu=True)
    plan = dataclasses.replace(plan, steps_per_execution=min(plan.steps_per_execution, steps))
    tft_output = tft.TFTransformOutput(transform_output)
    # Cached or streamed as the Trainer would: the budget measures the input it would get.
    cache = plan.cache_decision({keys.TRAIN_SPLIT: train_files})
    dataset = plan.dataset(train_files, tft_output.transformed_feature_spec(), training=True,
                           cache=cache.cached[keys.TRAIN_SPLIT])
    inputs_spec, label_spec = dataset.element_spec[:2]
    features = {n: (s.shape.as_list(), s.dtype.name) for n, s in inputs_spec.items()}
    keras_model = plan.compiled_model(tft_output, build=build_model)
    report = Readiness(
        features=features, label=(label_spec.shape.as_list(), label_spec.dtype.name),
        device=f"{type(plan.strategy).__name__} over {_device_kinds(plan.strategy)}",
        replicas=plan.replicas, per_replica_batch=plan.per_replica_batch,
        global_batch=plan.global_batch, precision=plan.precision,
        steps_per_execution=plan.steps_per_execution,
        learning_rate=f"{plan.peak_learning_rate:.6g} ({config.training.lr_scaling} scaling, "
                      f"warmup {plan.warmup_steps} steps, decay {plan.describe_decay()})",
        network=_describe_network(plan.config.model, config.model.tpu_network),
        input_cache=cache.describe(),
        steps_run=0, traces=0, xla_ok=True)
    per_epoch = max(plan.steps_per_execution, steps // 2)
    try:
        keras_model.fit(dataset, epochs=2, steps_per_epoch=per_epoch, verbose=0)
        report.steps_run = 2 * per_epoch
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
            tf.errors.InternalError) as e:
        report.xla_ok = False
        report.xla_error = e.message
        report.failed_op = _failed_op(e.message)
    if keras_model.train_function is not None:
        report.traces = keras_model.train_function.experimental_get_tracing_count()
    if budget and report.xla_ok:
        [one_batch] = data.make_dataset(train_files, tft_output.transformed_feature_spec(),
                                        plan.per_replica_batch, spec=spec, training=True).take(1)
        report.budget = measure_budget(plan, keras_model, dataset, one_batch, per_epoch)
    return report
