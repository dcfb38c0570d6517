"""Bad specs and data that does not fit them stop the run before TensorFlow loads, naming the
file, the key, the value and the expected form."""

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

from dataset_rows import PENGUINS, TAXI
from pipeline import datasets
from pipeline.env_settings import from_env
from pipeline.pipeline_config import ConfigError, PipelineConfig, configure
from trainer_module.config import SETTINGS, TrainerConfig
from trainer_module.dataset_spec import DatasetSpec, SpecError, Threshold, from_dict

PENGUIN_SPEC = open(PENGUINS.spec_path, encoding="utf-8").read()
TAXI_SPEC = open(TAXI.spec_path, encoding="utf-8").read()


def _files(tmp_path, spec_text: str, like=PENGUINS, rows=None) -> tuple[str, str]:
    """A dataset folder with `spec_text` beside a copy of `like`'s schema, and its data."""
    folder = tmp_path / "mine"
    folder.mkdir(exist_ok=True)
    shutil.copy(os.path.join(datasets.dataset_dir(like.dataset), datasets.SCHEMA_FILE), folder)
    (folder / datasets.SPEC_FILE).write_text(spec_text, encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    source = like.read_rows()
    rows = rows if rows is not None else source
    with open(data / "rows.csv", "w", encoding="utf-8") as f:
        f.write(",".join(source[0]) + "\n")
        f.writelines(",".join(r[c] for c in source[0]) + "\n" for r in rows)
    return str(folder), str(data)


def _dataset(tmp_path, spec_text: str, like=PENGUINS, rows=None) -> PipelineConfig:
    folder, data = _files(tmp_path, spec_text, like, rows)
    return configure(dataset=folder, data_dir=data)


def _fails(build, *fragments: str) -> str:
    """`build()` (configure, then validate) raises a ConfigError holding every fragment."""
    with pytest.raises(ConfigError) as raised:
        build().validate()
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_feature_column_the_schema_lacks(tmp_path):
    spec = PENGUIN_SPEC.replace("[features]", "[features]\nbeak_color = \"vocabulary\"")
    _fails(lambda: _dataset(tmp_path, spec), "spec.toml: features.beak_color = 'beak_color'",
           "expected a column of the schema")


def test_a_schema_column_the_data_lacks(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "sex"} for r in PENGUINS.read_rows()]
    config = _dataset(tmp_path, PENGUIN_SPEC)
    with open(os.path.join(config.data_dir, "rows.csv"), "w", encoding="utf-8") as f:
        f.write(",".join(rows[0]) + "\n" + "".join(",".join(r.values()) + "\n" for r in rows))
    _fails(lambda: config, "lacks column(s) ['sex']", "rows.csv")


def test_a_label_absent_from_the_schema(tmp_path):
    spec = PENGUIN_SPEC.replace('column = "species"', 'column = "genus"')
    _fails(lambda: _dataset(tmp_path, spec), "label.column = 'genus'", "a column of the schema",
           "or a [label.rule] that derives it")


def test_a_role_that_does_not_fit_the_type(tmp_path):
    spec = PENGUIN_SPEC.replace('bill_length_mm = { role = "zscore"',
                                'bill_length_mm = { role = "vocabulary"')
    _fails(lambda: _dataset(tmp_path, spec), "features.bill_length_mm.role = 'vocabulary'",
           "a role that reads a FLOAT column: zscore, log_zscore, quantile, ignore")


def test_an_unknown_task(tmp_path):
    _fails(lambda: _dataset(tmp_path, PENGUIN_SPEC.replace('"multiclass"', '"ranking"')),
           "label.task = 'ranking'", "one of binary, multiclass, regression")


def test_a_label_value_outside_the_declared_classes(tmp_path):
    rows = PENGUINS.read_rows()
    rows[7]["species"] = "Emperor"
    _fails(lambda: _dataset(tmp_path, PENGUIN_SPEC, rows=rows), "rows.csv', line 9",
           "label 'species' = 'Emperor' is not one of the spec's classes")


def test_a_string_label_for_regression(tmp_path):
    spec = PENGUIN_SPEC.replace('task = "multiclass"', 'task = "regression"').replace(
        'classes = ["Adelie", "Chinstrap", "Gentoo"]\n', "").replace(
        "accuracy = { min = 0.9, allowed_change = 0.01 }", "rmse = { max = 1.0 }")
    _fails(lambda: _dataset(tmp_path, spec), "label.column = 'species'",
           "a numeric column for a regression task; it is BYTES")


def test_an_empty_spec(tmp_path):
    _fails(lambda: _dataset(tmp_path, "# nothing yet\n"), "spec.toml: the spec is empty",
           "[label]", "[features]", "[evaluation]")


def test_a_threshold_on_another_tasks_metric(tmp_path):
    spec = PENGUIN_SPEC.replace("accuracy = { min = 0.9", "rmse = { max = 0.9")
    _fails(lambda: _dataset(tmp_path, spec), "evaluation.thresholds.rmse",
           "a threshold on the multiclass task's metrics: accuracy")


def test_a_schema_column_without_a_role(tmp_path):
    spec = PENGUIN_SPEC.replace('year = { role = "integer"', 'yr = { role = "integer"')
    _fails(lambda: _dataset(tmp_path, spec), "features.yr")
    spec = "\n".join(line for line in PENGUIN_SPEC.splitlines() if not line.startswith("year"))
    _fails(lambda: _dataset(tmp_path, spec), "features.year = None",
           "a role for every schema column")


def test_bad_role_parameters_and_rules(tmp_path):
    spec = PENGUIN_SPEC.replace('range = [2007, 2009]', 'range = [2009, 2007]')
    _fails(lambda: _dataset(tmp_path, spec), "features.year.range", "[low, high]")
    rule = TAXI_SPEC.replace('times = 0.2, of = "fare"', 'value = 3, of = "fare"')
    _fails(lambda: _dataset(tmp_path, rule, like=TAXI), "label.rule", "either value = <number>")


def test_rows_without_a_label_stop_the_run_with_the_count(tmp_path):
    rows = PENGUINS.read_rows()
    for row in rows[:3]:
        row["species"] = ""
    _fails(lambda: _dataset(tmp_path, PENGUIN_SPEC, rows=rows),
           "3 of 344 rows have no value in the label column 'species'", 'missing = "drop"')
    spec = PENGUIN_SPEC.replace('missing = "stop"', 'missing = "drop"')
    _dataset(tmp_path, spec, rows=rows).validate()


def test_spec_round_trips_and_custom_config_holds_only_what_transform_and_trainer_use():
    spec = TAXI.spec
    assert from_dict(spec.to_dict(), "spec.toml", spec.name) == spec
    assert spec.label_sources == ("tips",)  # fare is a feature as well as the rule's base
    passed = DatasetSpec.from_custom_config(spec.to_custom_config())
    assert passed == dataclasses.replace(spec, thresholds=(), slices=(), train_steps=None,
                                         per_replica_batch_size=None, model=(),
                                         drift_thresholds=())
    # A new threshold or slice changes neither Transform's nor the Trainer's cache key.
    looser = dataclasses.replace(spec, thresholds=(Threshold("auc", 0.5, None),), slices=())
    assert looser.to_custom_config() == spec.to_custom_config()


def test_the_specs_network_is_the_trainers_default_and_settings_win(tmp_path):
    sized = PENGUIN_SPEC + ("\n[model]\nhidden_units = [384, 128]\nembedding_dim = 6\n"
                            "dropout = 0.2\nl2 = 0.0005\ncross_buckets = 0\nwide = true\n")
    config = _dataset(tmp_path, sized)
    spec = config.spec
    assert spec.model == (("hidden_units", (384, 128)), ("embedding_dim", 6), ("dropout", 0.2),
                          ("l2", 0.0005), ("cross_buckets", 0), ("wide", True))
    assert from_dict(spec.to_dict(), "spec.toml", spec.name) == spec
    # Sizes are the Trainer's settings, not Transform's: they stay out of its custom_config.
    assert spec.to_custom_config() == dataclasses.replace(spec, model=()).to_custom_config()
    model = configure(from_env({"DATASET": config.dataset})).trainer.model
    assert (model.hidden_units, model.embedding_dim, model.dropout, model.l2,
            model.cross_buckets, model.wide) == ((384, 128), 6, 0.2, 0.0005, 0, True)
    given = TrainerConfig.create(hidden_units=(128,))
    assert configure(from_env({"DATASET": config.dataset}), trainer=given).trainer == given


def test_the_specs_tpu_network_reaches_the_trainer_and_a_given_setting_wins_there_too(
        tmp_path):
    """[tpu] names what a TPU trains in place of [model]'s network; a setting the run gives
    is the network on a TPU as well."""
    text = PENGUIN_SPEC + ("\n[model]\nensemble_size = 8\n"
                           "\n[tpu]\nhidden_units = [512, 512]\nensemble_size = 32\n")
    config = _dataset(tmp_path, text)
    spec = config.spec
    assert spec.tpu_network == (("hidden_units", (512, 512)), ("ensemble_size", 32))
    assert from_dict(spec.to_dict(), "spec.toml", spec.name) == spec
    written = tmp_path / "written"
    written.mkdir()
    (written / "spec.toml").write_text(datasets.spec_text(spec.to_dict()), encoding="utf-8")
    assert "[tpu]\nhidden_units = [512, 512]\nensemble_size = 32" in (
        written / "spec.toml").read_text(encoding="utf-8")
    model = configure(from_env({"DATASET": config.dataset})).trainer.model
    assert model.ensemble_size == 8 and model.on_tpu().ensemble_size == 32
    assert model.on_tpu().hidden_units == (512, 512)
    given = configure(from_env({"DATASET": config.dataset, "ENSEMBLE_SIZE": "4"})).trainer.model
    assert given.tpu_network == (("hidden_units", (512, 512)),)
    assert given.on_tpu().ensemble_size == 4
    _fails(lambda: _dataset(tmp_path, PENGUIN_SPEC + "\n[tpu]\nmembers = 32\n"),
           "spec.toml: ", "tpu.members = 32: expected only the keys hidden_units")
    _fails(lambda: _dataset(tmp_path, PENGUIN_SPEC + "\n[tpu]\nensemble_size = 0\n"),
           "spec.toml: ", "tpu.ensemble_size = 0: expected a whole number >= 1")


def _with_training(key: str, value: str) -> str:
    assert "\n[training]\n" in PENGUIN_SPEC
    return PENGUIN_SPEC.replace("\n[training]\n", f"\n[training]\n{key} = {value}\n")


@pytest.mark.parametrize("key, value, setting, given", [
    ("refit_factor", 1.5, "REFIT_FACTOR", 0),
    ("early_stopping_patience", 30, "EARLY_STOPPING_PATIENCE", 5),
    ("validation_fraction", 0.2, "VALIDATION_FRACTION", 0.3),
    ("learning_rate", 0.002, "LEARNING_RATE", 0.001),
    ("weight_decay", 0.0003, "WEIGHT_DECAY", 0.001),
])
def test_the_specs_training_settings_are_the_trainers_defaults_and_a_setting_wins(
        tmp_path, key, value, setting, given):
    config = _dataset(tmp_path, _with_training(key, str(value)))
    spec = config.spec
    assert getattr(spec, key) == value
    assert from_dict(spec.to_dict(), "spec.toml", spec.name) == spec
    def trainer_setting(env: dict[str, str]) -> object:
        return getattr(getattr(configure(from_env(env)).trainer, SETTINGS[key]), key)

    assert trainer_setting({"DATASET": config.dataset}) == value
    assert trainer_setting({"DATASET": config.dataset, setting: str(given)}) == given
    # A spec written before the key trains as it did: the Trainer's default.
    (tmp_path / "plain").mkdir()
    plain = _dataset(tmp_path / "plain", PENGUIN_SPEC)
    default = getattr(getattr(TrainerConfig.create(), SETTINGS[key]), key)
    assert default != value
    assert trainer_setting({"DATASET": plain.dataset}) == default


@pytest.mark.parametrize("key, value, expected", [
    ("refit_factor", "0.5", "expected 0 (off) or a number in [1, 10]"),
    ("refit_factor", "\"twice\"", "expected 0 (off) or a number in [1, 10]"),
    ("refit_factor", "true", "expected 0 (off) or a number in [1, 10]"),
    ("early_stopping_patience", "-1", "expected a whole number >= 0"),
    ("early_stopping_patience", "2.5", "expected a whole number >= 0"),
    ("early_stopping_patience", "\"long\"", "expected a whole number >= 0"),
    ("validation_fraction", "1.0", r"expected a number in [0, 1)"),
    ("validation_fraction", "\"a tenth\"", r"expected a number in [0, 1)"),
    ("learning_rate", "0", "expected a number in (0, 10)"),
    ("weight_decay", "-0.001", r"expected a number in [0, 1)"),
])
def test_a_bad_training_setting_names_the_key_and_the_expected_form(tmp_path, key, value,
                                                                     expected):
    _fails(lambda: _dataset(tmp_path, _with_training(key, value)),
           f"spec.toml: training.{key} = ", expected)


@pytest.mark.parametrize("table, fragment", [
    ("hidden_units = 256", "model.hidden_units = 256: expected a list of widths"),
    ("hidden_units = []", "model.hidden_units = []: expected one or more widths > 0"),
    ("hidden_units = [256, 0]", "model.hidden_units = [256, 0]: expected a whole number >= 1"),
    ("dropout = 1.5", "model.dropout = 1.5: expected a number in [0, 1)"),
    ("l2 = \"small\"", "model.l2 = 'small': expected a number in [0, 1)"),
    ("cross_buckets = 50000", "model.cross_buckets = 50000: expected at most 46340"),
    ("embedding_dim = 0", "model.embedding_dim = 0: expected a whole number >= 1"),
    ("wide = 1", "model.wide = 1: expected true or false"),
    ("width = 3", "model.width = 3: expected only the keys hidden_units, embedding_dim, "
     "dropout, l2, cross_buckets"),
])
def test_bad_network_sizes_name_the_key_and_the_expected_form(tmp_path, table, fragment):
    _fails(lambda: _dataset(tmp_path, PENGUIN_SPEC + f"\n[model]\n{table}\n"), "spec.toml: ",
           fragment)


def test_runner_exits_2_before_tensorflow_loads(tmp_path):
    folder, data = _files(tmp_path, PENGUIN_SPEC.replace('"multiclass"', '"ranking"'))
    script = (
        "import sys\n"
        "from pipeline import local_runner\n"
        f"code = local_runner.main(['--dataset', {folder!r}, '--data-dir', "
        f"{data!r}, '--output-dir', {str(tmp_path / 'out')!r}])\n"
        "print(code, 'tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.split() == ["2", "False"], result.stderr[-2000:]
    assert "label.task = 'ranking'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_label_of_a_raw_row_outside_tensorflow():
    taxi, penguins = TAXI.spec, PENGUINS.spec
    assert taxi.label_of({"tips": "2.5", "fare": "10"}) == 1.0
    assert taxi.label_of({"tips": "2.0", "fare": "10"}) == 0.0  # exactly 20%: not over
    assert taxi.label_of({"tips": "", "fare": "10"}) is None
    assert penguins.label_of({"species": "Gentoo"}) == 2.0
    assert penguins.label_of({"species": None}) is None


def test_a_label_named_like_the_packed_model_inputs():
    values = PENGUINS.spec.to_dict()
    values["label"]["column"] = "model_values"
    with pytest.raises(SpecError) as raised:
        from_dict(values, "spec.toml", "mine")
    assert "label.column = 'model_values'" in str(raised.value)
    assert "'model_values_xf', the name of Transform's packed model inputs" in str(raised.value)


def test_packed_layout_does_not_depend_on_the_order_of_the_features_table():
    values = TAXI.spec.to_dict()
    values["features"] = dict(reversed(list(values["features"].items())))
    reordered = from_dict(values, "spec.toml", TAXI.spec.name)
    assert [o.name for o in reordered.model_outputs()] != [
        o.name for o in TAXI.spec.model_outputs()]
    assert reordered.packed_inputs() == TAXI.spec.packed_inputs()


@pytest.mark.parametrize("dataset", [TAXI, PENGUINS])
def test_the_spec_writer_writes_what_the_reader_reads(dataset):
    """datasets.spec_text is the one writer of the spec's file form: a shipped spec's dict,
    written and read back, is the same spec; a note lands before its key."""
    import tomllib

    from trainer_module import dataset_spec

    spec = dataset.spec
    text = datasets.spec_text(spec.to_dict(), {"training": ["why this budget"]}, ["a header"])
    assert text.startswith("# a header\n") and "# why this budget\n[training]" in text
    back = dataset_spec.from_dict(tomllib.loads(text), source="written", name=spec.name)
    assert back == spec


def test_a_drift_threshold_on_a_column_the_spec_does_not_name(tmp_path):
    """Checked once the label and the features are right, so a renamed label is named first."""
    spec = PENGUIN_SPEC.replace("[drift.thresholds]\n", "[drift.thresholds]\nbeak = 0.2\n")
    _fails(lambda: _dataset(tmp_path, spec), "drift.thresholds.beak = 0.2",
           "a column the spec names (a feature or the label)")
