"""Picks the tf.distribute strategy, in one place: TPU first, then GPUs/CPU devices.

Every outcome is logged with its reason and replica count. A TPU that was asked for but cannot
be reached is never silently replaced by the CPU when strategy='tpu'.
"""

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from absl import logging

from trainer_module.config import TrainerConfig

TPUResolver = tf.distribute.cluster_resolver.TPUClusterResolver


class TPUUnavailableError(RuntimeError):
    """A TPU was required but could not be resolved or initialized."""


def _resolve(address: str) -> TPUResolver:
    return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)


@dataclasses.dataclass(frozen=True)
class TPURuntime:
    """The three calls that talk to TPU hardware; everything after them is TensorFlow's own.

    Tests replace these (and only these) to stand in for a TPU cluster, which cannot exist on
    a CPU machine; `TPUStrategy` is always the real one, built from the resolver.
    """

    resolve: Callable[[str], TPUResolver] = _resolve
    connect: Callable[[TPUResolver], Any] = tf.config.experimental_connect_to_cluster
    initialize: Callable[[TPUResolver], Any] = tf.tpu.experimental.initialize_tpu_system


DEFAULT_TPU_RUNTIME = TPURuntime()


def tpu_address(config: TrainerConfig) -> str:
    """The configured TPU address, else $TPU_NAME, else ''."""
    return config.runtime.tpu_address or os.environ.get("TPU_NAME", "")


def _worker_count() -> int:
    """Workers listed in TF_CONFIG (chief included); 0 when TF_CONFIG is unset."""
    raw = os.environ.get("TF_CONFIG", "")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except (json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"TF_CONFIG is not a JSON object with a 'cluster' entry: {e}") from e
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def _mirrored() -> tf.distribute.MirroredStrategy:
    """MirroredStrategy over every GPU, else over every logical CPU device."""
    if tf.config.list_logical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices=cpus)


def local_replica_count(config: TrainerConfig) -> int | None:
    """Replicas `get_distribution_strategy` will give on this machine, or None when that
    depends on hardware not visible from here (a TPU, other workers in TF_CONFIG)."""
    runtime = config.runtime
    remote = (runtime.strategy == "multi_worker_mirrored" or runtime.tpu_required
              or tpu_address(config) or _worker_count() > 1)
    if remote and runtime.strategy != "mirrored":
        return None
    return len(tf.config.list_logical_devices("GPU")) or len(tf.config.list_logical_devices("CPU"))


def _connect_tpu(address: str, runtime: TPURuntime) -> tf.distribute.TPUStrategy:
    resolver = runtime.resolve(address)
    runtime.connect(resolver)
    runtime.initialize(resolver)
    return tf.distribute.TPUStrategy(resolver)


def get_distribution_strategy(
    config: TrainerConfig, runtime: TPURuntime | None = None
) -> tf.distribute.Strategy:
    """Returns the strategy the config asks for, logging which one and why."""
    runtime = runtime or DEFAULT_TPU_RUNTIME
    settings = config.runtime
    if settings.strategy == "mirrored":
        return _log(_mirrored(), "strategy='mirrored' in the trainer config")
    if settings.strategy == "multi_worker_mirrored":
        return _log(
            tf.distribute.MultiWorkerMirroredStrategy(),
            "strategy='multi_worker_mirrored' in the trainer config",
        )

    address = tpu_address(config)
    if address:
        try:
            strategy = _connect_tpu(address, runtime)
        except (ValueError, RuntimeError, OSError, tf.errors.OpError) as e:
            if settings.tpu_required:
                raise TPUUnavailableError(
                    f"no TPU reachable at tpu_address={address!r} ({type(e).__name__}: {e}). "
                    "strategy='tpu' requires one: check the TPU name and zone, use 'local' on a "
                    "TPU VM, or set strategy='auto' to fall back to GPU/CPU."
                ) from e
            logging.warning("TPU at %r not reachable (%s: %s); falling back.", address,
                            type(e).__name__, e)
            reason = f"TPU at {address!r} not reachable"
        else:
            return _log(strategy, f"TPU resolved at {address!r}")
    else:
        if settings.tpu_required:
            raise TPUUnavailableError(
                "strategy='tpu' requires a TPU, but no TPU address is set: "
                "set tpu_address in the trainer config ('local' on a TPU VM, a TPU name, or "
                "'grpc://host:8470') or the TPU_NAME environment variable."
            )
        reason = "no TPU address configured (tpu_address, TPU_NAME)"

    if _worker_count() > 1:
        return _log(tf.distribute.MultiWorkerMirroredStrategy(),
                    f"{reason}; TF_CONFIG lists several workers")
    return _log(_mirrored(), f"{reason}; using local GPUs/CPU")


def _log(strategy: tf.distribute.Strategy, reason: str) -> tf.distribute.Strategy:
    logging.info(
        "Distribution strategy: %s (%s); num_replicas_in_sync=%d",
        type(strategy).__name__, reason, strategy.num_replicas_in_sync,
    )
    return strategy


def is_tpu(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.TPUStrategy | tf.distribute.experimental.TPUStrategy)
