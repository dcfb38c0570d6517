"""Bad settings fail before any component runs, naming the setting and the expected form."""

import os

import pytest

from pipeline import local_runner
from pipeline.pipeline_config import ConfigError, PipelineConfig, from_env
from trainer_module.config import TrainerConfig, TrainerConfigError


def test_defaults_are_valid():
    config = PipelineConfig().validate()
    assert config.pipeline_root.startswith(config.output_dir)
    assert config.serving_model_dir.startswith(config.output_dir)


@pytest.mark.parametrize("name", ["Taxi", "taxi_tpu", "-taxi", "", "taxi tpu", "x" * 129])
def test_pipeline_name_vertex_would_reject(name):
    with pytest.raises(ConfigError, match=r"pipeline_name=.*lowercase letters, digits and '-'"):
        PipelineConfig(pipeline_name=name).validate()


@pytest.mark.parametrize("steps", [0, -5, 1.5, True])
def test_train_steps_must_be_positive(steps):
    with pytest.raises(ConfigError, match=r"train_steps=.*expected a whole number > 0"):
        PipelineConfig(train_steps=steps).validate()


@pytest.mark.parametrize("batch", [0, -1])
def test_batch_must_be_positive(batch):
    with pytest.raises(TrainerConfigError,
                       match=r"per_replica_batch_size=.*expected a whole number >= 1"):
        TrainerConfig(per_replica_batch_size=batch)


def test_unknown_strategy():
    with pytest.raises(TrainerConfigError, match="strategy='gpu': expected one of auto, tpu"):
        TrainerConfig(strategy="gpu")


def test_trainer_config_round_trips_through_custom_config():
    config = TrainerConfig(per_replica_batch_size=128, hidden_units=(384, 128), tpu_address="x")
    assert TrainerConfig.from_custom_config(config.to_custom_config()) == config


def test_unknown_trainer_setting_is_named():
    custom = {"trainer_config": {"batch": 5}}
    with pytest.raises(TrainerConfigError, match=r"unknown trainer setting\(s\) \['batch'\]"):
        TrainerConfig.from_custom_config(custom)


def test_missing_data_dir(tmp_path):
    with pytest.raises(ConfigError, match="data_dir=.*no such directory"):
        PipelineConfig(data_dir=str(tmp_path / "nope")).validate()


def test_data_dir_without_csv(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"holds no \*.csv files"):
        PipelineConfig(data_dir=str(tmp_path)).validate()


def test_csv_missing_a_schema_column(tmp_path):
    (tmp_path / "a.csv").write_text("fare,tips\n1.0,0.5\n")
    with pytest.raises(ConfigError, match=r"lacks column\(s\) \[.*'payment_type'"):
        PipelineConfig(data_dir=str(tmp_path)).validate()


def test_unreadable_csv(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match="cannot be read as UTF-8 CSV"):
        PipelineConfig(data_dir=str(tmp_path)).validate()


def test_schema_that_does_not_parse(tmp_path):
    bad = tmp_path / "schema.pbtxt"
    bad.write_text("feature { name: 'fare' type: NOT_A_TYPE }")
    with pytest.raises(ConfigError, match="does not parse as a text-format"):
        PipelineConfig(schema_path=str(bad)).validate()


def test_env_values_are_checked():
    with pytest.raises(ConfigError, match="TRAIN_STEPS='ten': expected a whole number"):
        from_env({"TRAIN_STEPS": "ten"})
    with pytest.raises(ConfigError, match="trainer setting per_replica_batch_size=0"):
        from_env({"PER_REPLICA_BATCH_SIZE": "0"})
    config = from_env({"DATA_DIR": "data", "TRAIN_STEPS": "7", "REQUIRE_TPU": "true"})
    assert config.train_steps == 7 and config.trainer.require_tpu
    assert config.data_dir == os.path.abspath("data")


def test_runner_fails_before_any_component_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIPELINE_NAME", "Bad_Name")
    output = tmp_path / "out"
    assert local_runner.main(["--output-dir", str(output)]) == 2
    assert "pipeline_name='Bad_Name'" in capsys.readouterr().err
    assert not output.exists()


def test_runner_rejects_missing_data_path(tmp_path, capsys):
    output = tmp_path / "out"
    code = local_runner.main(["--data-dir", str(tmp_path / "missing"), "--output-dir", str(output)])
    assert code == 2
    assert "no such directory" in capsys.readouterr().err
    assert not output.exists()
