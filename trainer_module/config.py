"""Trainer settings, passed from the pipeline config to `run_fn` through `custom_config`.

One frozen dataclass, validated when built, so a bad value fails while the pipeline is being
defined (before any component runs) and again, with the same message, inside the Trainer.
"""

import dataclasses
from typing import Any

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker_mirrored")
PRECISIONS = ("auto", "float32", "mixed_bfloat16")

# The key under which the pipeline passes these settings in the Trainer's custom_config.
CUSTOM_CONFIG_KEY = "trainer_config"


class TrainerConfigError(ValueError):
    """A trainer setting has a value outside its expected form."""


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """How to train: strategy, batch, optimizer and model size.

    strategy: 'auto' (TPU if an address is configured and reachable, else MirroredStrategy over
      GPUs or CPU devices, or MultiWorkerMirroredStrategy when TF_CONFIG lists several workers),
      'tpu' (same as auto with require_tpu), 'mirrored', 'multi_worker_mirrored'.
    global_batch_size: if > 0, overrides per_replica_batch_size with global / replicas (it must
      divide evenly: the 8 cores of a v3-8 take 1016 or 1024, not 1020).
    seed: weight initialization and shuffling.
    tpu_address: TPU name, 'grpc://host:8470', or 'local' on a TPU VM; empty → $TPU_NAME.
    require_tpu: fail instead of falling back when no TPU can be reached.
    steps_per_execution: train steps per host round trip; 0 → 32 on TPU, 8 elsewhere.
    mixed_precision: 'auto' → mixed_bfloat16 on TPU, float32 elsewhere. Exports are float32.
    jit_compile: compile the train step with XLA (TPUStrategy always compiles with XLA).
    """

    per_replica_batch_size: int = 256
    global_batch_size: int = 0
    learning_rate: float = 0.0005
    epochs: int = 10
    hidden_units: tuple[int, ...] = (256, 128)
    embedding_dim: int = 4
    dropout: float = 0.3
    l2: float = 0.001
    strategy: str = "auto"
    tpu_address: str = ""
    require_tpu: bool = False
    steps_per_execution: int = 0
    mixed_precision: str = "auto"
    jit_compile: bool = False
    seed: int = 42

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_units", tuple(self.hidden_units))
        _check_int("per_replica_batch_size", self.per_replica_batch_size, minimum=1)
        _check_int("epochs", self.epochs, minimum=1)
        _check_int("embedding_dim", self.embedding_dim, minimum=1)
        _check_int("steps_per_execution", self.steps_per_execution, minimum=0)
        _check_int("seed", self.seed, minimum=0)
        _check_int("global_batch_size", self.global_batch_size, minimum=0)
        if not self.hidden_units:
            raise TrainerConfigError("hidden_units is empty: expected one or more widths > 0")
        for width in self.hidden_units:
            _check_int("hidden_units", width, minimum=1)
        if not isinstance(self.learning_rate, int | float) or not 0 < self.learning_rate < 10:
            raise TrainerConfigError(
                f"learning_rate={self.learning_rate!r}: expected a number in (0, 10)"
            )
        for name in ("dropout", "l2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise TrainerConfigError(f"{name}={value!r}: expected a number in [0, 1)")
        if self.strategy not in STRATEGIES:
            raise TrainerConfigError(
                f"strategy={self.strategy!r}: expected one of {', '.join(STRATEGIES)}"
            )
        if self.mixed_precision not in PRECISIONS:
            raise TrainerConfigError(
                f"mixed_precision={self.mixed_precision!r}: expected one of {', '.join(PRECISIONS)}"
            )
        if not isinstance(self.tpu_address, str):
            raise TrainerConfigError(
                f"tpu_address={self.tpu_address!r}: expected a string such as 'local', "
                "'my-tpu' or 'grpc://10.0.0.2:8470'"
            )
        for name in ("require_tpu", "jit_compile"):
            if not isinstance(getattr(self, name), bool):
                raise TrainerConfigError(f"{name}={getattr(self, name)!r}: expected true or false")

    @property
    def tpu_required(self) -> bool:
        return self.require_tpu or self.strategy == "tpu"

    def to_custom_config(self) -> dict[str, Any]:
        """JSON-serializable form for the Trainer's custom_config."""
        values = dataclasses.asdict(self)
        values["hidden_units"] = list(self.hidden_units)
        return {CUSTOM_CONFIG_KEY: values}

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> "TrainerConfig":
        values = dict((custom_config or {}).get(CUSTOM_CONFIG_KEY) or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TrainerConfigError(
                f"unknown trainer setting(s) {unknown} in custom_config[{CUSTOM_CONFIG_KEY!r}]: "
                f"expected only {sorted(known)}"
            )
        return cls(**values)


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TrainerConfigError(f"{name}={value!r}: expected a whole number >= {minimum}")
