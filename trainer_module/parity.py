"""The export parity gate: the SavedModel must answer as the trained model does.

After export, the Trainer reloads the SavedModel on the CPU, calls `serving_default` on a fixed
batch of raw eval examples (serialized tf.Examples, as a client sends them), and compares its
prediction output with the trained model's own predictions on the same rows (in the precision
it trained in: bfloat16 on TPU). Beyond the tolerance the Trainer fails, so the Evaluator,
the blessing and the Pusher never see the model. TFX's InfraValidator, which would load the
export, does not run under Kubeflow/Vertex (tensorflow/tfx#5512); this runs inside the
Trainer wherever it runs.
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from trainer_module import keys, tasks
from trainer_module.data import list_files
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.export import serving_raw_feature_spec

# Raw eval examples in the parity batch (the first ones of the split, in file order).
PARITY_EXAMPLES = 256


class ExportParityError(RuntimeError):
    """The exported model's predictions differ from the trained model's beyond the tolerance."""


@dataclasses.dataclass(frozen=True)
class Parity:
    examples: int
    max_difference: float
    tolerance: float
    worst_example: int
    served: float
    trained: float

    @property
    def ok(self) -> bool:
        return self.max_difference <= self.tolerance

    def describe(self) -> str:
        return (f"max |served - trained| = {self.max_difference:.3g} on {self.examples} raw "
                f"eval examples (tolerance {self.tolerance:.3g})")


def raw_examples(file_patterns: str | list[str], count: int = PARITY_EXAMPLES) -> list[bytes]:
    """The first `count` serialized raw examples of the files, in file order."""
    records = tf.data.TFRecordDataset(list_files(file_patterns), compression_type="GZIP")
    return [r.numpy() for r in records.take(count)]


def tolerance(spec: DatasetSpec, allowed: float, label_scale: tuple[float, float]) -> float:
    """`allowed` in probability units, or in the label's standard deviations for regression."""
    return allowed * label_scale[1] if spec.task == tasks.REGRESSION else allowed


def compare(trained: tf_keras.Model, export_dir: str, examples: list[bytes], spec: DatasetSpec,
            tf_transform_output: tft.TFTransformOutput,
            to_model_inputs: Callable[[dict], dict], tolerance: float) -> Parity:
    """The reloaded export's `serving_default` vs the trained model, on the same examples;
    `to_model_inputs` is the export's traced Transform (what `export_serving_model` returns)."""
    if not examples:
        raise ExportParityError("no raw eval examples to check the export with: the eval "
                                "split of the raw examples is empty")
    serialized = tf.constant(examples)
    key = spec.task_info.prediction_key
    with tf.device("/CPU:0"):
        served = tf.saved_model.load(export_dir).signatures[keys.SERVING_SIGNATURE](
            examples=serialized)[key].numpy()
        raw = tf.io.parse_example(serialized, serving_raw_feature_spec(tf_transform_output, spec))
        inputs = to_model_inputs(raw)
    # One eager call: `predict` would trace a predict function for this single batch.
    expected = np.asarray(trained(inputs, training=False),
                          dtype=np.float64).reshape(served.shape)
    difference = np.abs(served.astype(np.float64) - expected)
    worst = int(np.argmax(difference.max(axis=tuple(range(1, difference.ndim)))))
    column = int(np.argmax(difference[worst]))
    return Parity(examples=len(examples), max_difference=float(difference.max()),
                  tolerance=tolerance, worst_example=worst,
                  served=float(served[worst].reshape(-1)[column]),
                  trained=float(expected[worst].reshape(-1)[column]))


def check(parity: Parity) -> None:
    """Raises ExportParityError naming the difference when the export is not faithful."""
    if not parity.ok:
        raise ExportParityError(
            f"export parity failed: {parity.describe()}; at eval example "
            f"#{parity.worst_example} the export serves {parity.served:.6g} where the trained "
            f"model predicts {parity.trained:.6g}. The model is not handed on (nothing is "
            "evaluated, blessed or pushed). Check that the export rebuilds the trained network "
            "(trainer_module/export.py). If the training precision explains the gap, train "
            "in float32 (mixed_precision, MIXED_PRECISION=float32 for make run) or raise "
            "export_parity_tolerance (EXPORT_PARITY_TOLERANCE)")
