"""Bad settings fail before any component runs, naming the setting and the expected form."""

import json
import os

import pytest

from dataset_rows import TAXI, fare_dataset
from pipeline import local_runner
from pipeline.env_settings import from_env
from pipeline.pipeline_config import ConfigError, configure
from trainer_module.config import TrainerConfig, TrainerConfigError


def test_defaults_are_valid():
    config = configure().validate()
    assert config.pipeline_root.startswith(config.output_dir)
    assert config.serving_model_dir.startswith(config.output_dir)


def test_local_beam_args_spare_tfx_its_per_component_package_build():
    """With no dependency flag, TFX copies its install into a temp dir and builds an sdist in
    every Beam executor; the local args carry one, so TFX's own check returns them as given."""
    from tfx.utils import dependency_utils

    args = list(configure().beam_pipeline_args)
    assert dependency_utils.make_beam_dependency_flags(args) == args
    requirements = [a.split("=", 1)[1] for a in args if a.startswith("--requirements_file=")]
    assert len(requirements) == 1 and os.path.isfile(requirements[0])


def test_local_beam_args_pickle_with_cloudpickle_and_run_a_pipeline():
    """Beam reads the pickler from the options (its workers too); a closure over local state
    round-trips through it in a real in-process pipeline."""
    import apache_beam as beam
    from apache_beam.internal import pickler
    from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions
    from apache_beam.testing.util import assert_that, equal_to

    args = [a for a in configure().beam_pipeline_args if "requirements" not in a]
    assert PipelineOptions(args).view_as(SetupOptions).pickle_library == "cloudpickle"
    offset = 10
    try:
        with beam.Pipeline(argv=args) as pipeline:
            assert pickler.desired_pickle_lib.__name__.endswith("cloudpickle_pickler")
            out = pipeline | beam.Create([1, 2]) | beam.Map(lambda x: x + offset)
            assert_that(out, equal_to([11, 12]))
    finally:
        pickler.set_library(pickler.DEFAULT_PICKLE_LIB)  # other tests' pipelines: Beam's own


def test_pipeline_name_and_data_dir_derive_from_the_dataset():
    config = configure(dataset="penguins")
    assert config.pipeline_name == "penguins-tpu"
    assert config.data_dir.endswith(os.path.join("data", "penguins"))


@pytest.mark.parametrize("name", ["Taxi", "taxi_tpu", "-taxi", "taxi tpu", "x" * 129])
def test_pipeline_name_vertex_would_reject(name):
    with pytest.raises(ConfigError, match=r"pipeline_name=.*lowercase letters, digits and '-'"):
        configure(pipeline_name=name).validate()


@pytest.mark.parametrize("steps", [0, -5, 1.5, True])
def test_train_steps_must_be_positive(steps):
    with pytest.raises(ConfigError, match=r"train_steps=.*expected a whole number > 0"):
        configure(train_steps=steps).validate()


@pytest.mark.parametrize("batch", [0, -1])
def test_batch_must_be_positive(batch):
    with pytest.raises(TrainerConfigError,
                       match=r"per_replica_batch_size=.*expected a whole number >= 1"):
        TrainerConfig.create(per_replica_batch_size=batch)


def test_unknown_strategy():
    with pytest.raises(TrainerConfigError, match="strategy='gpu': expected one of auto, tpu"):
        TrainerConfig.create(strategy="gpu")


def test_trainer_config_round_trips_through_custom_config():
    config = TrainerConfig.create(per_replica_batch_size=128, hidden_units=(384, 128),
                                  tpu_address="x", profile_steps=(3, 5), cache="none")
    custom = config.to_custom_config()
    assert json.loads(json.dumps(custom)) == custom  # what TFX's custom_config carries
    assert TrainerConfig.from_custom_config(custom) == config
    assert custom["trainer_config"]["data"]["per_replica_batch_size"] == 128
    assert custom["trainer_config"]["runtime"]["profile_steps"] == [3, 5]


def test_unknown_trainer_setting_is_named():
    custom = {"trainer_config": {"data": {"batch": 5}}}
    with pytest.raises(TrainerConfigError,
                       match=r"unknown trainer setting\(s\) \['batch'\] .*\['data'\]"):
        TrainerConfig.from_custom_config(custom)
    with pytest.raises(TrainerConfigError, match=r"unknown trainer setting group\(s\) \['opt'\]"):
        TrainerConfig.from_custom_config({"trainer_config": {"opt": {}}})
    with pytest.raises(TrainerConfigError, match=r"unknown trainer setting\(s\) \['epoch_count'\]"):
        TrainerConfig.create(epoch_count=3)


@pytest.mark.parametrize("setting, value, expected", [
    ("cache", "disk", "expected one of auto, memory, none"),
    ("cache_memory_fraction", 0, r"expected a number in \(0, 1\]"),
    ("lr_scaling", "cubic", "expected one of none, linear, sqrt"),
    ("lr_decay", "step", "expected one of cosine, none"),
    ("lr_floor", 1.0, r"expected a number in \[0, 1\)"),
    ("label_smoothing", 1.0, r"expected a number in \[0, 1\)"),
    ("weight_decay", -0.1, r"expected a number in \[0, 1\)"),
    ("ensemble_size", 0, "expected a whole number >= 1"),
    ("ensemble_kind", "bagged", "expected one of mini, packed"),
    ("reference_batch_size", 0, "expected a whole number >= 1"),
    ("warmup_fraction", 1.5, r"expected a number in \[0, 1\)"),
    ("profile_steps", (5, 2), "expected two train steps 'first,last' with 1 <= first <= last"),
    ("profile_steps", (0, 2), "expected two train steps"),
    ("profile_steps", (4,), "expected two train steps"),
    ("export_parity_tolerance", 0.0, r"expected a number in \(0, 1\]"),
    ("warm_start", "yes", "expected true or false"),
    ("cross_buckets", -1, "expected a whole number >= 0"),
    ("cross_buckets", 46341, "expected at most 46340"),
    ("cross_dim", 0, "expected a whole number >= 1"),
    ("refit_factor", 0.5, r"expected 0 \(off\) or a number in \[1, 10\]"),
    ("refit_factor", 11, r"expected 0 \(off\) or a number in \[1, 10\]"),
    ("refit_factor", True, r"expected 0 \(off\) or a number in \[1, 10\]"),
    ("refit_schedule", "last", r"expected one of first_fit, own"),
    ("validation_folds", 0, "expected a whole number >= 1 and <= 10"),
    ("validation_folds", 11, "expected a whole number >= 1 and <= 10"),
])
def test_trainer_settings_name_value_and_form(setting, value, expected):
    with pytest.raises(TrainerConfigError, match=f"{setting}=.*{expected}"):
        TrainerConfig.create(**{setting: value})


def test_folds_refuse_a_warm_start():
    """A warm start continues one network from the blessed model; k fold networks have no
    one blessed network to start from."""
    with pytest.raises(TrainerConfigError, match="warm_start=True with validation_folds=3: .*"
                                                 "set validation_folds=1"):
        TrainerConfig.create(validation_folds=3, warm_start=True)
    with pytest.raises(ConfigError, match="validation_folds"):
        configure(from_env({"VALIDATION_FOLDS": "3", "WARM_START": "true"}))


def test_profile_beyond_the_run_is_refused():
    with pytest.raises(ConfigError, match=r"profile_steps=\(10, 400\) \(PROFILE_STEPS\): the "
                                          "run has only train_steps=300"):
        configure(from_env({"TRAIN_STEPS": "300", "PROFILE_STEPS": "10,400"})).validate()
    with pytest.raises(ConfigError, match="PROFILE_STEPS='ten': expected train steps"):
        configure(from_env({"PROFILE_STEPS": "ten"}))


def test_missing_data_dir(tmp_path):
    with pytest.raises(ConfigError, match="data_dir=.*no such directory"):
        configure(data_dir=str(tmp_path / "nope")).validate()


def test_data_dir_without_csv(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"holds no \*.csv or \*.csv.gz files"):
        configure(data_dir=str(tmp_path)).validate()


def test_csv_missing_a_schema_column(tmp_path):
    (tmp_path / "a.csv").write_text("fare,tips\n1.0,0.5\n")
    with pytest.raises(ConfigError, match=r"lacks column\(s\) \[.*'payment_type'"):
        configure(data_dir=str(tmp_path)).validate()


def test_csv_that_is_not_utf8(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match=r"a.csv', line 1: bytes .* are not UTF-8"):
        configure(data_dir=str(tmp_path)).validate()


def test_column_order_within_one_file_is_free(tmp_path):
    """CsvExampleGen maps columns by the header's names; only files that differ are refused."""
    columns = TAXI.read_rows(1)[0]
    names = list(columns)[::-1]
    (tmp_path / "a.csv").write_text(",".join(names) + "\n" + ",".join(columns[n] for n in names)
                                    + "\n", encoding="utf-8")
    configure(data_dir=str(tmp_path)).validate()


def test_global_batch_is_checked_against_this_machines_replicas(monkeypatch):
    # Stands in for a machine with 3 GPUs, which this one does not have.
    from trainer_module import strategy

    monkeypatch.setattr(strategy.tf.config, "list_logical_devices",
                        lambda kind: ["gpu"] * 3 if kind == "GPU" else ["cpu"])
    config = configure(from_env({"GLOBAL_BATCH_SIZE": "512"}))
    with pytest.raises(ConfigError, match=r"global_batch_size=512 is not divisible by the 3 "
                                          r"replicas.*e\.g\. 510 or 513"):
        local_runner.check_local_batch(config)
    local_runner.check_local_batch(configure(from_env({"GLOBAL_BATCH_SIZE": "513"})))
    # On a TPU the Trainer counts the cores itself, when it starts.
    on_tpu = configure(from_env({"GLOBAL_BATCH_SIZE": "512", "TPU_ADDRESS": "t"}))
    local_runner.check_local_batch(on_tpu)


def test_schema_that_does_not_parse(tmp_path):
    folder = tmp_path / "bad-schema"
    folder.mkdir()
    (folder / "schema.pbtxt").write_text("feature { name: 'fare' type: NOT_A_TYPE }")
    (folder / "spec.toml").write_text(open(TAXI.spec_path).read())
    with pytest.raises(ConfigError, match="does not parse as a text-format"):
        configure(dataset=str(folder), data_dir=os.path.dirname(TAXI.csv_path)).validate()


def test_env_values_are_checked():
    with pytest.raises(ConfigError, match="TRAIN_STEPS='ten': expected a whole number"):
        configure(from_env({"TRAIN_STEPS": "ten"}))
    with pytest.raises(ConfigError, match="trainer setting per_replica_batch_size=0"):
        configure(from_env({"PER_REPLICA_BATCH_SIZE": "0"}))
    with pytest.raises(ConfigError, match="MAX_ACCURACY_REGRESSION='lots': expected a number"):
        configure(from_env({"MAX_ACCURACY_REGRESSION": "lots"}))
    with pytest.raises(ConfigError, match="trainer setting seed=-1"):
        configure(from_env({"SEED": "-1"}))
    assert configure(from_env({"SEED": "3"})).trainer.training.seed == 3
    config = configure(from_env({"DATA_DIR": "data", "TRAIN_STEPS": "7", "STRATEGY": "tpu",
                       "MAX_ACCURACY_REGRESSION": "0.02", "GLOBAL_BATCH_SIZE": "1024",
                       "CACHE": "none", "PROFILE_STEPS": "2,4", "LR_SCALING": "linear",
                       "LR_DECAY": "none", "WARM_START": "1"}))
    assert config.train_steps == 7 and config.trainer.runtime.tpu_required
    assert config.max_accuracy_regression == 0.02
    assert config.trainer.data.global_batch_size == 1024 and config.trainer.data.cache == "none"
    assert config.trainer.runtime.profile_steps == (2, 4)
    assert config.trainer.training.lr_scaling == "linear" and config.trainer.training.warm_start
    assert config.trainer.training.lr_decay == "none"
    assert config.data_dir == os.path.abspath("data")
    # The remedies the export parity gate names reach the Trainer's config.
    runtime = configure(from_env({"MIXED_PRECISION": "float32",
                                  "EXPORT_PARITY_TOLERANCE": "0.05"})).trainer.runtime
    assert runtime.mixed_precision == "float32" and runtime.export_parity_tolerance == 0.05
    with pytest.raises(ConfigError, match=r"mixed_precision='bf16': expected one of auto, "
                                          r"float32, mixed_bfloat16"):
        configure(from_env({"MIXED_PRECISION": "bf16"}))
    with pytest.raises(ConfigError, match=r"EXPORT_PARITY_TOLERANCE='loose': expected a number"):
        configure(from_env({"EXPORT_PARITY_TOLERANCE": "loose"}))


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


def test_local_beam_mode_follows_the_size_of_the_data(tmp_path, monkeypatch):
    """In-process for small data; a worker process per core from MULTI_PROCESSING_MIN_BYTES of
    CSV on, and never on one core."""
    from pipeline import pipeline_config

    (tmp_path / "a.csv").write_bytes(b"x" * 600)
    (tmp_path / "notes.txt").write_bytes(b"x" * 5000)  # not data: not counted
    monkeypatch.setattr(pipeline_config, "MULTI_PROCESSING_MIN_BYTES", 1000)
    small = pipeline_config.local_beam_args(str(tmp_path), cores=4)
    assert small[:2] == ("--direct_running_mode=in_memory", "--direct_num_workers=1")
    (tmp_path / "b.csv").write_bytes(b"x" * 600)
    large = pipeline_config.local_beam_args(str(tmp_path), cores=4)
    assert large[:2] == ("--direct_running_mode=multi_processing", "--direct_num_workers=4")
    assert pipeline_config.local_beam_args(str(tmp_path), cores=1)[0].endswith("in_memory")
    config = configure(data_dir=str(tmp_path))
    assert config.beam_pipeline_args == pipeline_config.local_beam_args(str(tmp_path))
    given = ("--direct_running_mode=multi_threading",)
    assert configure(data_dir=str(tmp_path), beam_pipeline_args=given).beam_pipeline_args \
        == given


def test_the_spec_and_schema_are_read_once_and_the_config_validated_once(monkeypatch, tmp_path):
    """configure reads the dataset's two files once; validate() and create_pipeline use what the
    config holds; building a PipelineConfig from those values reads nothing."""
    import dataclasses

    from pipeline import dag, datasets, pipeline_config

    specs, schemas, checks = [], [], []
    real_spec, real_schema = datasets.load_spec, datasets.load_schema
    real_check = pipeline_config.csv_check.check_data_dir
    monkeypatch.setattr(datasets, "load_spec", lambda d: specs.append(d) or real_spec(d))
    monkeypatch.setattr(datasets, "load_schema", lambda p: schemas.append(p) or real_schema(p))
    monkeypatch.setattr(pipeline_config.csv_check, "check_data_dir",
                        lambda *a: checks.append(a) or real_check(*a))
    config = configure(output_dir=str(tmp_path)).validate()
    dag.create_pipeline(config)
    assert specs == ["taxi"] and len(schemas) == 1 and len(checks) == 1
    monkeypatch.setattr(pipeline_config, "local_beam_args", lambda *a: pytest.fail("I/O"))
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    assert pipeline_config.PipelineConfig(**values) == config


@pytest.mark.parametrize("text, encoding", [
    ("Café – “quoted”", "cp1252"),  # Excel on Windows: the dash and quotes sit in 0x80-0x9F
    ("Crème brûlée", "cp1252"),  # bytes Latin-1 and Windows-1252 read alike: Windows' name
    ("a\x81b", "latin1"),  # 0x81 is no Windows-1252 character
])
def test_a_non_utf8_file_is_named_with_the_encoding_its_bytes_fit(tmp_path, text, encoding):
    data = (",".join(TAXI.read_rows(1)[0]) + "\n").encode() + text.encode("latin1" if
                                                                           "\x81" in text
                                                                           else "cp1252")
    (tmp_path / "a.csv").write_bytes(data)
    with pytest.raises(ConfigError, match=f"line 2: .*`iconv -f {encoding} -t utf-8`"):
        configure(data_dir=str(tmp_path)).validate()
    assert data.splitlines()[1].decode(encoding) == text  # the named encoding reads it back


def test_label_smoothing_is_for_classes_only(tmp_path):
    taxi = configure(from_env({"LABEL_SMOOTHING": "0.1"}))
    assert taxi.trainer.training.label_smoothing == 0.1
    fare = fare_dataset(str(tmp_path))
    with pytest.raises(ConfigError, match=r"label_smoothing=0.1 \(LABEL_SMOOTHING, or \[training\] "
                       r"in the spec of 'taxi-fare'\): a regression label has no classes"):
        configure(from_env({"LABEL_SMOOTHING": "0.1"}), dataset=fare.dataset,
                  data_dir=os.path.dirname(fare.csv_path))
