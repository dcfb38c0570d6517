"""Input and training throughput on Transform's output, all in one process.

Every number is a median over repetitions that come after a warm-up pass, on the same files and
the same batch size.
"""

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from pipeline.pipeline_config import REPO_ROOT
from trainer_module import data
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.plan import make_plan


@dataclasses.dataclass
class Rate:
    """Examples per second: the median, and every repetition it is the median of."""

    examples_per_s: float
    samples: list[float]

    @classmethod
    def of(cls, examples: int, seconds: list[float]) -> "Rate":
        rates = [examples / s for s in seconds]
        return cls(statistics.median(rates), rates)


@tf.function
def _drain(iterator, batches: tf.Tensor) -> None:
    for _ in tf.range(batches):
        iterator.get_next()


def _timed_pass(iterator, batches: int) -> float:
    started = time.perf_counter()
    _drain(iterator, tf.constant(batches, tf.int64))
    return time.perf_counter() - started


def _rate_of(make_dataset, batches: int, batch_size: int, repetitions: int) -> Rate:
    """One warm-up pass, then `repetitions` timed passes, each over a fresh iterator."""
    _timed_pass(iter(make_dataset()), batches)
    seconds = [_timed_pass(iter(make_dataset()), batches) for _ in range(repetitions)]
    return Rate.of(batches * batch_size, seconds)


def raw_read(files: list[str], batch_size: int, batches: int, repetitions: int) -> Rate:
    """The input function's own reading (the same files read in parallel with the same
    buffers and blocks, `data.read_blocks`), rebatched, nothing parsed: the limit of a cold
    epoch."""
    return _rate_of(lambda: data.read_blocks(files, batch_size)
                    .rebatch(batch_size, drop_remainder=True), batches, batch_size, repetitions)


def tfx_reader(files: list[str], tf_transform_output: tft.TFTransformOutput, label_key: str,
               batch_size: int, batches: int, repetitions: int) -> Rate:
    """What `fn_args.data_accessor.tf_dataset_factory` builds for Transform's output:
    tfx-bsl's TFExampleRecord TensorFlowDataset, with TensorFlowDatasetOptions' defaults."""
    from tfx_bsl.public import tfxio

    def make():
        source = tfxio.TFExampleRecord(
            file_pattern=files, schema=tf_transform_output.transformed_metadata.schema)
        return source.TensorFlowDataset(tfxio.TensorFlowDatasetOptions(
            batch_size=batch_size, label_key=label_key))

    return _rate_of(make, batches, batch_size, repetitions)


def tfx_reader_in_own_process(graph_dir: str, files: list[str], label_key: str,
                              batch_size: int, batches: int, repetitions: int) -> Rate:
    """`tfx_reader` in a fresh process, so it runs with TensorFlow's default threading (one
    intra-op thread per core), as a TFX Trainer that sets none does, whatever this process
    set."""
    request = {"graph_dir": graph_dir, "files": files, "label_key": label_key,
               "batch_size": batch_size, "batches": batches, "repetitions": repetitions}
    done = subprocess.run([sys.executable, "-m", "bench.throughput", json.dumps(request)],
                          capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if done.returncode != 0:
        raise RuntimeError(f"the TFX reader's process exited {done.returncode}:\n"
                           f"{done.stderr[-3000:]}")
    return Rate(**json.loads(done.stdout.strip().splitlines()[-1]))


def project_input(files: list[str], feature_spec: dict, spec: DatasetSpec, batch_size: int,
                  batches: int, repetitions: int, cached_epochs: int = 3) -> tuple[Rate, Rate]:
    """The Trainer's input function: its first (cold) epoch, and the cached epochs after it.

    Each repetition builds the dataset anew (an empty cache); the cold rate is the median of
    the repetitions' first epochs, the cached rate the median of all their later epochs.
    """
    def make():
        return data.make_dataset(files, feature_spec, batch_size, spec=spec, training=True)

    warm = iter(make())
    for _ in range(2):
        _timed_pass(warm, batches)
    cold, cached = [], []
    for _ in range(repetitions):
        iterator = iter(make())
        cold.append(_timed_pass(iterator, batches))
        cached.extend(_timed_pass(iterator, batches) for _ in range(cached_epochs))
    examples = batches * batch_size
    return Rate.of(examples, cold), Rate.of(examples, cached)


class _EpochTimer(tf_keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None) -> None:
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None) -> None:
        self.seconds.append(time.perf_counter() - self._started)


@dataclasses.dataclass(frozen=True)
class FitSetup:
    """What is trained, and how: the Trainer's own model, strategy and compile settings."""

    tf_transform_output: tft.TFTransformOutput
    files: list[str]
    config: TrainerConfig
    spec: DatasetSpec

    @property
    def feature_spec(self) -> dict:
        return self.tf_transform_output.transformed_feature_spec()


def _fit_model(setup: FitSetup, *, synthetic: bool, steps_per_execution: int | None,
               jit_compile: bool):
    """The Trainer's model, compiled by the Trainer's plan, and what it is fed; returns
    (model, dataset, global batch)."""
    config = setup.config
    if steps_per_execution is not None:
        config = config.replace(steps_per_execution=steps_per_execution)
    plan = make_plan(config.replace(jit_compile=jit_compile), setup.spec, train_steps=1)
    if synthetic:
        [batch] = data.make_dataset(setup.files, setup.feature_spec, plan.per_replica_batch,
                                    spec=setup.spec, training=True).take(1)
        dataset = data.distribute(
            plan.strategy, lambda _: tf.data.Dataset.from_tensors(batch).repeat())
    else:
        dataset = plan.dataset(setup.files, setup.feature_spec, training=True, cache=True)
    return plan.compiled_model(setup.tf_transform_output), dataset, plan.global_batch


def _fit_epoch(keras_model, dataset, steps: int) -> float:
    timer = _EpochTimer()
    keras_model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[timer], verbose=0)
    return timer.seconds[0]


def fit_rate(setup: FitSetup, steps: int, repetitions: int, *,
             steps_per_execution: int | None = None, jit_compile: bool = False) -> Rate:
    """model.fit examples/s with the input function: one epoch of warm-up (tracing, and the
    cold input pass when `steps` covers the data), then the median of `repetitions` epochs."""
    keras_model, dataset, batch = _fit_model(setup, synthetic=False,
                                             steps_per_execution=steps_per_execution,
                                             jit_compile=jit_compile)
    _fit_epoch(keras_model, dataset, steps)
    return Rate.of(steps * batch, [_fit_epoch(keras_model, dataset, steps)
                                   for _ in range(repetitions)])


def input_bound(setup: FitSetup, steps: int, repetitions: int) -> tuple[Rate, Rate, float]:
    """The same model fed by the input function and by one in-memory batch, repeated.

    Their epochs alternate, so a machine that speeds up or slows down during the measurement
    moves both alike; the fraction is the median of the per-pair ratios. Returns (input
    function rate, synthetic rate, fraction).
    """
    real = _fit_model(setup, synthetic=False, steps_per_execution=None, jit_compile=False)
    synthetic = _fit_model(setup, synthetic=True, steps_per_execution=None, jit_compile=False)
    for keras_model, dataset, _ in (real, synthetic):
        _fit_epoch(keras_model, dataset, steps)  # tracing; the input's cold pass
    pairs = [(_fit_epoch(real[0], real[1], steps), _fit_epoch(synthetic[0], synthetic[1], steps))
             for _ in range(repetitions)]
    examples = steps * real[2]
    return (Rate.of(examples, [r for r, _ in pairs]), Rate.of(examples, [s for _, s in pairs]),
            statistics.median(s / r for r, s in pairs))


def gpu_names() -> list[str]:
    return [d.name for d in tf.config.list_physical_devices("GPU")]


def _main(request: str) -> None:
    """Measures `tfx_reader` from a JSON request; prints the rate as JSON on its last line."""
    args = json.loads(request)
    threads = tf.config.threading.get_intra_op_parallelism_threads()
    if threads != 0:
        raise SystemExit(f"intra-op threads are {threads}, not TensorFlow's default (0)")
    rate = tfx_reader(args["files"], tft.TFTransformOutput(args["graph_dir"]), args["label_key"],
                      args["batch_size"], args["batches"], args["repetitions"])
    print(json.dumps(dataclasses.asdict(rate)), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1])
