"""`make tpu-check`: would this Trainer's train step compile and run on a TPU?

No TPU is needed: the check builds the exact step `run_fn` builds (model, loss, optimizer, and
batches from the real input function over Transform's output), compiles it with XLA
(`jit_compile=True`, what TPUStrategy always does) on this machine's CPU, runs it for several
executions and counts how often it was traced. A TPU recompiles on every retrace, so anything
above one trace means a shape is not static.
"""

import dataclasses
import re
from collections.abc import Callable

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from trainer_module import data, model, run, strategy
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec


@dataclasses.dataclass
class Readiness:
    features: dict[str, tuple[list[int], str]]
    label: tuple[list[int], str]
    replicas: int
    per_replica_batch: int
    global_batch: int
    steps_run: int
    traces: int
    xla_ok: bool
    xla_error: str = ""
    failed_op: str = ""

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
            f"Replicas: {self.replicas}   per-replica batch: {self.per_replica_batch}   "
            f"global batch: {self.global_batch}",
            f"Train steps run: {self.steps_run}   train function traces: {self.traces}"
            + ("" if self.traces == 1 else "  (expected 1: a shape changes between steps)"),
        ]
        if self.xla_ok:
            lines.append("XLA compile (jit_compile=True): OK")
        else:
            lines.append(f"XLA compile (jit_compile=True): FAILED at op {self.failed_op or '?'}")
            lines.append(f"  {self.xla_error.splitlines()[0] if self.xla_error else ''}")
        lines.append("")
        lines.append("READY for TPU" if self.ready else "NOT READY for TPU")
        return "\n".join(lines)


def _failed_op(message: str) -> str:
    """The op XLA could not compile, as named in TensorFlow's error text."""
    for pattern in (r"unsupported operations.*?\n\s*(\w+)\s", r"op (?:type )?'?(\w+)'? ",
                    r"\{\{node ([\w/]+)\}\}", r"(\w+) \(No registered"):
        found = re.search(pattern, message, re.S)
        if found:
            return found.group(1)
    return ""


def check(
    transform_output: str,
    train_files: str | list[str],
    config: TrainerConfig,
    spec: DatasetSpec,
    steps: int = 24,
    build_model: Callable[[], tf_keras.Model] | None = None,
) -> Readiness:
    """Compiles and runs the train step with XLA on the default strategy's devices.

    A regression head is checked with a unit label scale: the scale is two constants, and the
    step's shapes and ops do not depend on their values.

    build_model: another model to check (built in the strategy's scope); default: the Trainer's.
    """
    dist = strategy.get_distribution_strategy(dataclasses.replace(config, strategy="mirrored"))
    per_replica = run.per_replica_batch_size(config, dist.num_replicas_in_sync)
    tft_output = tft.TFTransformOutput(transform_output)
    dataset = data.distributed_dataset(
        dist, train_files, tft_output.transformed_feature_spec(), per_replica,
        spec=spec, training=True, seed=config.seed)
    inputs_spec, label_spec = dataset.element_spec[:2]
    features = {n: (s.shape.as_list(), s.dtype.name) for n, s in inputs_spec.items()}
    spe = min(run.steps_per_execution(config, on_tpu=False), steps)
    with dist.scope():
        keras_model = (build_model() if build_model
                       else model.build_model(config, spec, model.category_sizes(spec, tft_output)))
        model.compile_model(keras_model, config, spec, steps_per_execution=spe, jit_compile=True)
    report = Readiness(
        features=features, label=(label_spec.shape.as_list(), label_spec.dtype.name),
        replicas=dist.num_replicas_in_sync, per_replica_batch=per_replica,
        global_batch=per_replica * dist.num_replicas_in_sync,
        steps_run=0, traces=0, xla_ok=True)
    try:
        keras_model.fit(dataset, epochs=2, steps_per_epoch=max(spe, steps // 2), verbose=0)
        report.steps_run = 2 * max(spe, steps // 2)
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
            tf.errors.InternalError) as e:
        report.xla_ok = False
        report.xla_error = e.message
        report.failed_op = _failed_op(e.message)
    if keras_model.train_function is not None:
        report.traces = keras_model.train_function.experimental_get_tracing_count()
    return report
