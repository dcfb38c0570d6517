"""The host threads one TensorFlow op may use (`intra_op_threads`), applied before TensorFlow
starts.

On the CPU a train step of this model is a few hundred small ops (256×256 matmuls, dropout
masks, one Adam update per variable). With TensorFlow's default, each op splits its work over
every core and waits for the slowest part, while the inter-op threads that could run the
independent ops side by side wait too. Unsplit, they do run side by side, and the small
model trains faster on a CPU. On a GPU or TPU the host runs little but the input pipeline, so
the default stays there.

TensorFlow reads the setting once, when its runtime starts in the process; afterwards it
cannot change. The local runner applies it before any component runs (the Trainer runs in
its process); `run_fn` applies it too, for a Trainer in a process of its own (Vertex AI).
"""

import tensorflow as tf
from absl import logging

from trainer_module import strategy
from trainer_module.config import TrainerConfig

DEFAULT = 0  # TensorFlow's own choice: one thread per core


def intra_op_threads(config: TrainerConfig) -> int:
    """The configured count; for 0, 1 where the CPU trains, DEFAULT where a GPU or TPU does."""
    threads = config.runtime.intra_op_threads
    if threads:
        return threads
    accelerated = (config.runtime.tpu_required or bool(strategy.tpu_address(config))
                   or bool(tf.config.list_physical_devices("GPU")))
    return DEFAULT if accelerated else 1


def apply(config: TrainerConfig) -> int:
    """Sets TensorFlow's intra-op threads from `config` unless its runtime already started
    with another count, which is logged as a warning; returns the count in effect."""
    wanted = intra_op_threads(config)
    current = tf.config.threading.get_intra_op_parallelism_threads()
    if current == wanted:
        return current
    try:
        tf.config.threading.set_intra_op_parallelism_threads(wanted)
    except RuntimeError:
        logging.warning(
            "intra_op_threads: TensorFlow already started in this process with %d thread(s) "
            "per op (0: one per core), so %d cannot apply; call "
            "trainer_module.host_threads.apply before anything runs TensorFlow (the local "
            "runner does)", current, wanted)
        return current
    logging.info("intra_op_threads: TensorFlow ops use %d host thread(s) each (0: one per core)",
                 wanted)
    return wanted
