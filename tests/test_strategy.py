"""Strategy resolution on a machine without a TPU: logged fallback, or a clear error.

These use TensorFlow's real TPUClusterResolver: 'local' resolves and then fails to find TPU
devices, a bare name fails to reach the Cloud TPU API. Nothing is mocked.
"""

import logging

import pytest
import tensorflow as tf

from trainer_module.config import TrainerConfig
from trainer_module.strategy import TPUUnavailableError, get_distribution_strategy


@pytest.fixture(autouse=True)
def no_tpu_env(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.delenv("TF_CONFIG", raising=False)


def test_no_tpu_address_falls_back_to_mirrored_and_says_why(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        strategy = get_distribution_strategy(TrainerConfig.create())
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == len(tf.config.list_logical_devices("CPU"))
    assert "MirroredStrategy (no TPU address configured" in caplog.text
    assert "num_replicas_in_sync=1" in caplog.text


def test_unreachable_tpu_falls_back_with_a_warning(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        strategy = get_distribution_strategy(TrainerConfig.create(tpu_address="local"))
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert "TPU at 'local' not reachable" in caplog.text


def test_tpu_strategy_without_address_names_the_settings():
    with pytest.raises(TPUUnavailableError, match="no TPU address is set: set tpu_address"):
        get_distribution_strategy(TrainerConfig.create(strategy="tpu"))


def test_tpu_strategy_names_the_address_tried():
    with pytest.raises(TPUUnavailableError, match="no TPU reachable at tpu_address='local'"):
        get_distribution_strategy(TrainerConfig.create(strategy="tpu", tpu_address="local"))


def test_tpu_name_from_environment_is_tried(monkeypatch):
    monkeypatch.setenv("TPU_NAME", "no-such-tpu-here")
    with pytest.raises(TPUUnavailableError, match="tpu_address='no-such-tpu-here'"):
        get_distribution_strategy(TrainerConfig.create(strategy="tpu"))


def test_configured_mirrored_skips_tpu_lookup(monkeypatch):
    monkeypatch.setenv("TPU_NAME", "no-such-tpu-here")
    strategy = get_distribution_strategy(TrainerConfig.create(strategy="mirrored"))
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
