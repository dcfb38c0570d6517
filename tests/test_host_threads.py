"""`intra_op_threads`: resolved by where training runs, applied before TensorFlow starts, and
said (not silently dropped) when TensorFlow started first."""

import subprocess
import sys

import pytest

from pipeline.pipeline_config import REPO_ROOT
from trainer_module import host_threads
from trainer_module.config import TrainerConfig, TrainerConfigError


def test_cpu_training_runs_each_op_on_one_thread_unless_configured(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    assert host_threads.intra_op_threads(TrainerConfig.create()) == 1  # no GPU on this host
    assert host_threads.intra_op_threads(TrainerConfig.create(intra_op_threads=3)) == 3


def test_a_tpu_keeps_tensorflows_default(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    for config in (TrainerConfig.create(tpu_address="local"), TrainerConfig.create(strategy="tpu")):
        assert host_threads.intra_op_threads(config) == host_threads.DEFAULT
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert host_threads.intra_op_threads(TrainerConfig.create()) == host_threads.DEFAULT


def test_a_bad_count_names_the_setting():
    with pytest.raises(TrainerConfigError, match=r"intra_op_threads=-1: expected a whole number"):
        TrainerConfig.create(intra_op_threads=-1)


APPLY_THEN_START = """
import tensorflow as tf
from absl import logging
from trainer_module import host_threads
from trainer_module.config import TrainerConfig
logging.set_verbosity(logging.INFO)
print("applied", host_threads.apply(TrainerConfig.create()), flush=True)
tf.reduce_sum(tf.ones([4, 4]))  # TensorFlow's runtime starts here
print("in effect", tf.config.threading.get_intra_op_parallelism_threads(), flush=True)
print("reapplied", host_threads.apply(TrainerConfig.create(intra_op_threads=2)), flush=True)
"""


def test_applied_before_tensorflow_starts_and_warned_after():
    """A fresh process: TensorFlow's thread count can only be set before its runtime starts."""
    result = subprocess.run([sys.executable, "-c", APPLY_THEN_START], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=300, check=True)
    assert "applied 1\nin effect 1\nreapplied 1\n" in result.stdout
    assert ("TensorFlow already started in this process with 1 thread(s) per op (0: one per "
            "core), so 2 cannot apply") in result.stderr
