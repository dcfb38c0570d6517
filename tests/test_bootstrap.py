"""`make dataset` on CSV files it has never seen: TFDV's schema and a role per column with the
reason beside it, a spec the pipeline loads, and clear errors for a label that cannot be."""

import csv
import itertools
import random
import tomllib

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import csv_check, datasets
from pipeline.env_settings import from_env
from pipeline.errors import ConfigError
from pipeline.pipeline_config import configure
from pipeline.tools import bootstrap
from trainer_module import tasks
from trainer_module.config import REFIT_FIRST_FIT, REFIT_OWN, ModelConfig, TrainerConfig
from trainer_module.features import NUMERIC_BINS
from trainer_module.missing import folded


def _write(path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    """600 made-up customers: an id, free text, a wide and a small string column, an hour of
    day, a long-tailed amount with gaps, a plain number, and a yes/no label."""
    rng = random.Random(3)
    rows = []
    for i in range(600):
        amount = rng.lognormvariate(3, 1.2)
        rows.append({
            "customer_id": f"C{100000 + i}",
            "complaint": " ".join(rng.choice(["slow", "late", "rude", "broken", "refund", "app",
                                              "crashed", "again", "never", "support"])
                                  for _ in range(12)) + f" #{i}",
            "city": f"city-{rng.randrange(1500)}",
            "plan": rng.choice(["basic", "plus", "pro"]),
            "signup_hour": str(rng.randrange(24)),
            "monthly_spend": "" if i % 17 == 0 else f"{amount:.2f}",
            "tenure_months": f"{rng.gauss(30, 8):.1f}",
            "churned": "yes" if amount < 12 or rng.random() < 0.1 else "no",
        })
    folder = tmp_path_factory.mktemp("churn")
    _write(folder / "customers.csv", rows)
    return str(folder)


def test_roles_follow_the_data_with_their_reasons(churn, tmp_path):
    code = bootstrap.main(["--name", "churn", "--data-dir", churn, "--label", "churned",
                           "--task", "binary", "--schemas-dir", str(tmp_path)])
    assert code == 0
    with open(tmp_path / "churn" / datasets.SPEC_FILE, "rb") as f:
        spec = tomllib.load(f)
    features = spec["features"]
    assert features["customer_id"]["role"] == "ignore"
    assert features["customer_id"]["why"].startswith("id-like: 600 distinct values")
    assert features["complaint"]["role"] == "text" and features["complaint"]["max_tokens"] == 32
    assert features["complaint"]["why"].startswith("free text: 13.0 words on average")
    assert features["city"]["role"] == "hashed" and features["city"]["buckets"] >= 256
    assert features["plan"]["role"] == "vocabulary"
    assert features["signup_hour"] == {"role": "integer", "range": [0, 23],
                                       "bins": bootstrap.SIZED_INTEGER_BINS,
                                       "why": "24 distinct integers in [0, 23], also as a number"}
    assert features["monthly_spend"]["role"] == "log_zscore"
    assert features["tenure_months"]["role"] == "zscore"
    assert spec["label"] == {"column": "churned", "task": "binary", "classes": ["no", "yes"],
                             "missing": "stop"}
    majority = spec["evaluation"]["thresholds"]["accuracy"]["min"]
    assert 0.5 < majority < 1 and spec["evaluation"]["slices"] == ["plan"]
    # 400 training rows (2:1 of 600): the network of the smallest size.
    size = bootstrap.network_size(400)
    assert size == bootstrap.NETWORK_SIZES[0]
    assert spec["model"] == {"hidden_units": list(size.hidden_units),
                             "embedding_dim": bootstrap.EMBEDDING_DIM, "dropout": size.dropout,
                             "l2": size.l2, "cross_buckets": 1009,
                             "ensemble_size": bootstrap.BINARY_ENSEMBLE_SIZE}
    # What it wrote is what the pipeline reads, and the Trainer trains.
    loaded, schema = datasets.load_spec(str(tmp_path / "churn"))
    assert loaded.task == "binary" and loaded.classes == ("no", "yes")
    model = configure(from_env({"DATASET": str(tmp_path / "churn")})).trainer.model
    assert (model.hidden_units, model.embedding_dim, model.dropout, model.l2,
            model.cross_buckets, model.ensemble_size) == (
        size.hidden_units, bootstrap.EMBEDDING_DIM, size.dropout, size.l2, 1009,
        bootstrap.BINARY_ENSEMBLE_SIZE)
    assert spec["training"]["refit_factor"] == bootstrap.REFIT_FACTOR
    assert spec["training"]["early_stopping_patience"] == bootstrap.SMALL_DATA_PATIENCE
    training = configure(from_env({"DATASET": str(tmp_path / "churn")})).trainer.training
    assert (training.refit_factor, training.early_stopping_patience) == (
        bootstrap.REFIT_FACTOR, bootstrap.SMALL_DATA_PATIENCE)
    spend = next(f for f in schema.feature if f.name == "monthly_spend")
    assert spend.value_count.min == 0 and not spend.HasField("shape")  # gaps allowed
    label = next(f for f in schema.feature if f.name == "churned")
    assert list(label.not_in_environment) == ["SERVING"]


def test_the_networks_penalties_shrink_as_the_training_rows_grow():
    sizes = bootstrap.NETWORK_SIZES
    assert sizes[0].rows == 0 and [s.rows for s in sizes] == sorted({s.rows for s in sizes})
    for smaller, larger in itertools.pairwise(sizes):
        assert all(a >= b for a, b in zip(larger.hidden_units, smaller.hidden_units, strict=False))
        assert len(larger.hidden_units) >= len(smaller.hidden_units)
        assert larger.dropout < smaller.dropout and larger.l2 < smaller.l2
        assert bootstrap.network_size(larger.rows - 1) == smaller
        assert bootstrap.network_size(larger.rows) == larger
    assert bootstrap.network_size(10**9) == sizes[-1]


@pytest.mark.parametrize("train_rows, buckets", [
    (0, 1009), (400, 1009), (1010, 1009), (8616, 8609), (46349, 46337), (10**9, 46337)])
def test_pair_tables_grow_with_the_training_rows_as_primes(train_rows, buckets):
    """About one row per training row, never below the Trainer's default (1,009) nor above
    what the int32 pair hash allows; 8,609 and 46,337 are the largest primes up to 8,616 and
    46,340."""
    assert bootstrap.pair_buckets(train_rows) == buckets
    TrainerConfig.create(cross_buckets=buckets)  # a value the Trainer accepts


@pytest.mark.parametrize("train_rows, task, validated, batch, epochs", [
    (2657, tasks.MULTICLASS, True, 256, 500),  # 10 steps an epoch: 5,000, not 200 epochs' 2,000
    (2657, tasks.MULTICLASS, False, 256, 200),  # no slice to stop on: the epoch cap holds
    (2657, tasks.BINARY, True, 256, 100),       # a binary label's members: 1,000 steps
    (2657, tasks.BINARY, False, 256, 200),      # ... with a slice to stop on only
    (19_999, tasks.BINARY, True, 256, 13),      # 78 steps an epoch: 13 epochs make 1,000 steps
    (20_000, tasks.BINARY, True, 256, 65),      # 2 members from MANY_ROWS on: 5,000 steps
    (30_000, tasks.REGRESSION, True, 256, 43),  # 117 steps an epoch: 43 epochs make 5,000 steps
    (943_000, tasks.BINARY, True, 1024, 10)])   # large data: 920 steps an epoch, at least 10
def test_the_budget_is_sized_in_steps_where_epochs_are_short(train_rows, task, validated, batch,
                                                             epochs):
    assert bootstrap.training_budget(train_rows, task, validated) == (batch, epochs)


def test_small_data_is_refitted_on_every_training_row_and_large_data_is_not():
    binary, regression = tasks.BINARY, tasks.REGRESSION
    assert bootstrap.refit_factor(binary, 0) == bootstrap.refit_factor(
        binary, bootstrap.REFIT_ROWS - 1) == bootstrap.REFIT_FACTOR > 0
    assert bootstrap.refit_factor(binary, bootstrap.REFIT_ROWS) == 0
    # A regression label past TabM's rows trains its members for most of the budget: no refit.
    past_tabm = bootstrap.TABM_ROWS[regression]
    assert bootstrap.refit_factor(regression, past_tabm - 1) == bootstrap.REFIT_FACTOR
    assert bootstrap.refit_factor(regression, past_tabm) == 0 < bootstrap.refit_factor(
        binary, past_tabm)
    TrainerConfig.create(refit_factor=bootstrap.REFIT_FACTOR)  # a value the Trainer accepts


def test_data_below_large_data_gets_an_ensemble_and_large_data_one_mlp():
    large, many = bootstrap.LARGE_DATA_ROWS, bootstrap.MANY_ROWS
    small_regression = bootstrap.TABM_ROWS[tasks.REGRESSION]
    assert bootstrap.ensemble_size(tasks.BINARY, 0) == bootstrap.ensemble_size(
        tasks.BINARY, many - 1) == bootstrap.BINARY_ENSEMBLE_SIZE > bootstrap.FEW_MEMBERS
    assert bootstrap.ensemble_size(tasks.BINARY, many) == bootstrap.ensemble_size(
        tasks.BINARY, large - 1) == bootstrap.FEW_MEMBERS > 1
    assert bootstrap.ensemble_size(tasks.BINARY, large) == 1
    assert bootstrap.ensemble_size(tasks.MULTICLASS, 1000) == bootstrap.ensemble_size(
        tasks.MULTICLASS, many - 1) == bootstrap.TABM_MEMBERS[tasks.MULTICLASS] > (
            bootstrap.FEW_MEMBERS)
    assert bootstrap.ensemble_size(tasks.MULTICLASS, many) == bootstrap.ensemble_size(
        tasks.MULTICLASS, large - 1) == bootstrap.FEW_MEMBERS
    assert bootstrap.ensemble_size(tasks.MULTICLASS, 1000, validated=False) == 1
    assert bootstrap.ensemble_size(tasks.MULTICLASS, large) == 1
    assert bootstrap.ensemble_size(tasks.REGRESSION, 1000) == bootstrap.ensemble_size(
        tasks.REGRESSION, small_regression - 1) == bootstrap.TABM_MEMBERS[tasks.REGRESSION]
    assert bootstrap.ensemble_size(tasks.REGRESSION, small_regression) == bootstrap.ensemble_size(
        tasks.REGRESSION, large - 1) == bootstrap.FEW_MEMBERS
    assert bootstrap.ensemble_size(tasks.REGRESSION, large) == 1
    assert bootstrap.ensemble_size(tasks.REGRESSION, 1000, validated=False) == 1
    ModelConfig(ensemble_size=bootstrap.BINARY_ENSEMBLE_SIZE)  # a value the Trainer accepts


@pytest.mark.parametrize("rows, task, tabm", [
    (900, "multiclass", True),      # 600 training rows, a slice of 120
    (300, "multiclass", False),     # no slice to stop on
    (900, "regression", True),
    (900, "binary", False)])
def test_small_multiclass_and_regression_data_take_tabms_published_defaults(tmp_path, capsys,
                                                                            rows, task, tabm):
    """TabM's network and optimizer (with label smoothing for a class label) are written for a
    multiclass or regression label below its TABM_ROWS training rows with a validation slice,
    and reach the Trainer's settings; other data keeps the sized network and the Trainer's
    optimizer. Either way the small data's patience is written (TabM's own 16 lost hpc-data
    its target), none without a slice."""
    rng = random.Random(rows)
    labels = {"multiclass": ["a", "b", "c"], "binary": ["a", "b"]}.get(task)
    spec = _made(tmp_path, "small", [
        {"x": f"{rng.gauss(0, 1):.3f}",
         "y": rng.choice(labels) if labels else f"{rng.gauss(5, 2):.3f}"}
        for _ in range(rows)], "y", task)
    trainer = configure(from_env({"DATASET": str(tmp_path / "small")})).trainer
    written = (spec["model"]["hidden_units"], spec["model"]["dropout"], spec["model"]["l2"],
               spec["model"]["ensemble_size"], spec["training"].get("learning_rate"),
               spec["training"].get("weight_decay"))
    used = (list(trainer.model.hidden_units), trainer.model.dropout, trainer.model.l2,
            trainer.model.ensemble_size, trainer.training.learning_rate,
            trainer.training.weight_decay)
    # A class label under TabM's shape trains on smoothed labels; a number has no classes.
    smoothing = bootstrap.TABM_LABEL_SMOOTHING if tabm and task == "multiclass" else None
    assert spec["training"].get("label_smoothing") == smoothing
    assert trainer.training.label_smoothing == (smoothing or 0.0)
    summary = capsys.readouterr().out.splitlines()
    network_line = next(line for line in summary if line.strip().startswith("network:"))
    assert ("labels smoothed by" in network_line) == bool(smoothing), network_line
    # Its refit runs its own decay where the task's table says so; elsewhere the first fit's.
    refitted = spec["training"]["refit_factor"] > 0
    schedule = bootstrap.TABM_REFIT_SCHEDULES[task] if tabm and refitted else REFIT_FIRST_FIT
    assert spec["training"].get("refit_schedule", REFIT_FIRST_FIT) == (
        trainer.training.refit_schedule) == schedule
    training_line = next(line for line in summary if line.strip().startswith("slices:"))
    assert ("decaying over its own epochs" in training_line) == (schedule == REFIT_OWN)
    patience = bootstrap.SMALL_DATA_PATIENCE if rows >= 900 else 0
    assert spec["training"]["early_stopping_patience"] == (
        trainer.training.early_stopping_patience) == patience
    defaults = TrainerConfig().training
    if tabm:
        network = bootstrap.TABM_NETWORKS[task]
        assert written == used == (list(network.hidden_units), network.dropout, network.l2,
                                   bootstrap.TABM_MEMBERS[task], bootstrap.LEARNING_RATE,
                                   bootstrap.TABM_WEIGHT_DECAY)
        assert "TabM's shape, sized for a CPU" in (
            tmp_path / "small" / datasets.SPEC_FILE).read_text(encoding="utf-8")
        # A TPU trains the paper's sizes ([tpu]) in their place.
        assert spec["tpu"] == bootstrap.TABM_TPU_NETWORK
        on_tpu = trainer.model.on_tpu()
        assert (list(on_tpu.hidden_units), on_tpu.ensemble_size) == (
            bootstrap.TABM_TPU_NETWORK["hidden_units"], bootstrap.TABM_TPU_NETWORK["ensemble_size"])
    else:
        size = bootstrap.network_size(rows * 2 // 3)
        assert written[:3] == (list(size.hidden_units), size.dropout, size.l2)
        # The faster rate wherever a slice stops the fit; without one, the Trainer's.
        rate = bootstrap.LEARNING_RATE if patience else None
        assert written[4:] == (rate, None)
        assert used[4:] == (rate or defaults.learning_rate, defaults.weight_decay)
        assert used[3] == (1 if task == "multiclass" else bootstrap.BINARY_ENSEMBLE_SIZE)
        assert "tpu" not in spec and not trainer.model.tpu_network


def test_numbers_keep_their_quantile_bins_within_one_bin_per_hundred_training_rows():
    """Two numbers' 32 bins fit 3,200 training rows and not 3,199; past the budget every number
    loses its bins, and an integer's number view and the other roles stay as they were."""
    roles = {"a": ({"role": "zscore"}, "numbers"), "b": ({"role": "log_zscore"}, "long tail"),
             "n": ({"role": "integer", "range": [0, 9], "bins": 16}, "ten integers"),
             "c": ({"role": "vocabulary"}, "strings")}
    budget = 2 * NUMERIC_BINS * bootstrap.ROWS_PER_BIN
    assert bootstrap.bins_within_budget(roles, budget) == roles
    cut = bootstrap.bins_within_budget(roles, budget - 1)
    assert {name: entry.get("bins") for name, (entry, _) in cut.items()} == {
        "a": 0, "b": 0, "n": 16, "c": None}
    assert cut["a"][1].startswith("numbers; no quantile bins: 2 numbers")


@pytest.mark.parametrize("task, tabm", [("binary", False), ("regression", True)])
def test_the_sized_network_reads_numbers_without_bins_the_rows_cannot_train(tmp_path, task,
                                                                          tabm):
    """600 training rows: the sized network reads a number without its quantile bins, TabM's
    shape with them; both read a 4-valued integer's number view with one. The loaded spec,
    which Transform reads, carries the same bins, and the spec's own name is untouched by its
    columns'."""
    rng = random.Random(7)
    spec = _made(tmp_path, "amounts", [
        {"amount": f"{rng.gauss(0, 1):.4f}", "items": str(rng.randrange(4)),
         "y": rng.choice(["a", "b"]) if task == "binary" else f"{rng.gauss(5, 2):.3f}"}
        for _ in range(900)], "y", task)
    amount = spec["features"]["amount"]
    assert amount["role"] == "zscore"
    assert ("bins" not in amount) if tabm else (amount["bins"] == 0)
    assert ("no quantile bins" in amount["why"]) != tabm
    loaded, _ = datasets.load_spec(str(tmp_path / "amounts"))
    items = spec["features"]["items"]
    assert (items["role"], items["why"]) == ("integer", "4 distinct integers in [0, 3], also as "
                                                        "a number")
    assert {f.column: f.params["bins"] for f in loaded.features} == {
        "amount": NUMERIC_BINS if tabm else 0, "items": bootstrap.SIZED_INTEGER_BINS}
    assert "make run DATASET=amounts " in (tmp_path / "amounts" / datasets.SPEC_FILE).read_text(
        encoding="utf-8")


def test_small_data_waits_longer_for_a_lower_validation_loss_than_large_data():
    assert bootstrap.early_stopping_patience(0) == bootstrap.early_stopping_patience(
        bootstrap.LARGE_DATA_ROWS - 1) == bootstrap.SMALL_DATA_PATIENCE
    assert bootstrap.early_stopping_patience(bootstrap.LARGE_DATA_ROWS) == (
        TrainerConfig.create().training.early_stopping_patience) < bootstrap.SMALL_DATA_PATIENCE
    TrainerConfig.create(early_stopping_patience=bootstrap.SMALL_DATA_PATIENCE)


@pytest.mark.parametrize("label, task, message", [
    ("plan", "binary", "LABEL='plan' has 3 distinct values (basic, plus, pro): a binary label "
                       "has exactly two; use TASK=multiclass"),
    ("plan", "regression", "LABEL='plan' holds text (BYTES); a regression label is a number"),
    ("tenure_months", "multiclass", "LABEL='tenure_months' holds fractional numbers; use "
                                    "TASK=regression"),
    ("nope", "binary", "LABEL='nope' is not a column of the CSV files"),
    ("plan", "ranking", "TASK='ranking': expected one of binary, multiclass, regression"),
])
def test_a_label_that_cannot_be_is_refused(churn, tmp_path, capsys, label, task, message):
    code = bootstrap.main(["--name", "churn", "--data-dir", churn, "--label", label,
                           "--task", task, "--schemas-dir", str(tmp_path)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "churn" / datasets.SPEC_FILE).exists()


@pytest.fixture(autouse=True)
def _logs_in_tmp(monkeypatch, tmp_path):
    """`make dataset` writes its log under OUTPUT_DIR: here, the test's own folder."""
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path / "output"))


def _spec(tmp_path, name: str) -> dict:
    with open(tmp_path / name / datasets.SPEC_FILE, "rb") as f:
        return tomllib.load(f)


def _made(tmp_path, name: str, rows: list[dict], label: str, task: str = "binary") -> dict:
    """The spec `make dataset` writes for `rows` (one CSV file), after asserting it succeeded."""
    folder = tmp_path / f"{name}-data"
    folder.mkdir()
    _write(folder / "rows.csv", rows)
    assert bootstrap.main(["--name", name, "--data-dir", str(folder), "--label", label,
                           "--task", task, "--schemas-dir", str(tmp_path)]) == 0
    return _spec(tmp_path, name)


def test_an_export_with_any_header_a_bom_and_crlf_gets_a_spec_that_loads(tmp_path):
    """Excel's "CSV UTF-8": a byte-order mark and CRLF line ends; headers with spaces,
    punctuation, mixed case, non-ASCII letters and a leading digit, quoted in the TOML."""
    rng = random.Random(5)
    names = ["Payment Method", "Monthly Charges ($)", "Rate %", "km/h", "x.y", "Größe",
             "3rd-party", "Churn"]
    lines = [",".join(f'"{n}"' if " " in n else n for n in names)]
    for _ in range(300):
        lines.append(",".join([rng.choice(["card", "cash", "check"]),
                               f"{rng.uniform(10, 120):.2f}", f"{rng.uniform(0, 1):.3f}",
                               f"{rng.gauss(60, 10):.1f}", f"{rng.gauss(0, 1):.3f}",
                               str(rng.randrange(150, 200)), rng.choice(["a", "b"]),
                               rng.choice(["Yes", "No"])]))
    data = tmp_path / "export"
    data.mkdir()
    (data / "export.csv").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    assert bootstrap.main(["--name", "export", "--data-dir", str(data), "--label", "Churn",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    spec = _spec(tmp_path, "export")
    assert set(spec["features"]) == set(names) - {"Churn"}
    assert spec["features"]["Payment Method"]["role"] == "vocabulary"
    assert spec["label"]["column"] == "Churn"
    text = (tmp_path / "export" / datasets.SPEC_FILE).read_text(encoding="utf-8")
    assert '"Monthly Charges ($)" = { role = ' in text and "\nRate % =" not in text
    loaded, schema = datasets.load_spec(str(tmp_path / "export"))
    assert {f.name for f in schema.feature} == set(names)  # no byte-order mark in a name
    assert loaded.label == "Churn"


def _export(tmp_path, header: str, rows: list[str], name: str = "rows.csv") -> str:
    folder = tmp_path / "export"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(folder)


@pytest.mark.parametrize("header, rows, message", [
    ("a,b,a,y", ["1,2,3,0"], "line 1: the header names ['a'] more than once"),
    ("a,,b,y", ["1,,3,0", "1,2,3,0"], "line 3: column 2 of the header has no name but holds '2'"),
])
def test_a_csv_the_pipeline_cannot_read_stops_naming_the_file_and_line(
        tmp_path, capsys, header, rows, message):
    data = _export(tmp_path, header, rows)
    assert bootstrap.main(["--name", "bad", "--data-dir", data, "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"data file '{data}/rows.csv', {message}" in err, err
    assert not (tmp_path / "bad").exists()


def test_a_spreadsheets_trailing_empty_columns_are_dropped_with_a_note(tmp_path, capsys):
    rows = [f"{i},{i % 3},{'yes' if i % 2 else 'no'},,," for i in range(200)]
    data = _export(tmp_path, "n,k,y,,,", rows)
    assert bootstrap.main(["--name", "excel", "--data-dir", data, "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path)]) == 0
    assert "column(s) [4, 5, 6] of the header: no name and no value in any row" in \
        capsys.readouterr().out
    config = configure(dataset=str(tmp_path / "excel"), data_dir=data).validate()
    assert {f.column for f in config.spec.features} == {"n", "k"}


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_another_delimiter_and_missing_words_are_detected_and_written(tmp_path, delimiter):
    """A semicolon (tab, pipe) export with its own gap word: make dataset reads it as such and
    writes [csv], and the runner's check then reads the files with it."""
    rows = [delimiter.join([str(i), "?" if i % 7 == 0 else f"{i * 1.5:.1f}", "yes" if i % 3
                            else "no"]) for i in range(200)]
    data = _export(tmp_path, delimiter.join(["n", "amount", "y"]), rows)
    assert bootstrap.main(["--name", "semi", "--data-dir", data, "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path), "--missing-values",
                           "?, -"]) == 0
    with open(tmp_path / "semi" / datasets.SPEC_FILE, "rb") as f:
        written = tomllib.load(f)
    assert written["csv"] == {"delimiter": delimiter, "missing_values": ["?", "-"]}
    assert written["features"]["amount"]["role"] in ("zscore", "log_zscore")  # "?" is a gap
    spec, schema = datasets.load_spec(str(tmp_path / "semi"))
    assert (spec.delimiter, spec.missing_values) == (delimiter, ("?", "-"))
    csv_check.check_data_dir(data, [f.name for f in schema.feature], "schema.pbtxt",
                             delimiter=spec.delimiter, markers=folded(spec.missing_values))
    # The same files against a spec that says commas: the check names the key to set.
    with pytest.raises(ConfigError, match="set delimiter = .* under \\[csv\\]"):
        csv_check.check_data_dir(data, ["n"], "schema.pbtxt")


def test_quoted_values_may_hold_the_delimiter_and_line_breaks(tmp_path):
    rows = [f'{i},"note {i}, line one\nline two, {i % 5}",{"yes" if i % 3 else "no"}'
            for i in range(120)]
    data = _export(tmp_path, "n,notes,y", rows)
    assert bootstrap.main(["--name", "notes", "--data-dir", data, "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path)]) == 0
    spec, schema = datasets.load_spec(str(tmp_path / "notes"))
    assert spec.features[1].role == "text"  # 7 words on average, every value its own
    assert csv_check.check_data_dir(data, [f.name for f in schema.feature], "schema.pbtxt") == 0


def test_a_gzip_compressed_export_is_read_as_its_text(tmp_path, capsys):
    """rows.csv.gz beside more.csv: make dataset, the runner's check and the row count read
    the compressed rows as text; a file the data pattern matches but nothing reads stops."""
    import gzip

    folder = tmp_path / "export"
    folder.mkdir()
    rows = [f"{i},{i * 0.5:.1f},{'yes' if i % 3 else 'no'}" for i in range(150)]
    with gzip.open(folder / "rows.csv.gz", "wt", encoding="utf-8") as f:
        f.write("\ufeffn,amount,y\r\n" + "\r\n".join(rows[:100]) + "\r\n")
    (folder / "more.csv").write_text("n,amount,y\n" + "\n".join(rows[100:]) + "\n")
    assert csv_check.csv_files(str(folder)) == [str(folder / "more.csv"),
                                                str(folder / "rows.csv.gz")]
    assert bootstrap.main(["--name", "gz", "--data-dir", str(folder), "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path)]) == 0
    spec, schema = datasets.load_spec(str(tmp_path / "gz"))
    assert {f.name for f in schema.feature} == {"n", "amount", "y"}  # no byte-order mark
    assert spec.label == "y" and "150 rows" in capsys.readouterr().out
    assert csv_check.check_data_dir(str(folder), ["n", "amount", "y"], "schema.pbtxt") == 0
    assert csv_check.text_bytes(str(folder / "rows.csv.gz")) == len(
        gzip.open(folder / "rows.csv.gz").read())
    (folder / "rows.csv.bak").write_text("old")
    with pytest.raises(ConfigError, match=r"rows.csv.bak' is neither \*.csv nor \*.csv.gz"):
        csv_check.check_data_dir(str(folder), ["n"], "schema.pbtxt")


def test_make_schema_reads_the_data_as_make_run_does(tmp_path, capsys):
    """`make schema` on a ';'-delimited gzip export with a byte-order mark, a quoted line
    break and NA gaps in a number column: the inferred schema names the same columns with the
    same types as the one make dataset wrote; a stray file stops it with exit 2."""
    import gzip

    from pipeline.tools import infer_schema

    folder = tmp_path / "export"
    folder.mkdir()
    rows = [f"{i};{'NA' if i % 7 == 0 else f'{i * 0.5:.1f}'};\"note {i}\nmore\";"
            f"{'yes' if i % 3 else 'no'}" for i in range(120)]
    with gzip.open(folder / "rows.csv.gz", "wt", encoding="utf-8") as f:
        f.write("\ufeffn;amount;note;y\r\n" + "\r\n".join(rows) + "\r\n")
    assert bootstrap.main(["--name", "semi", "--data-dir", str(folder), "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path)]) == 0
    dataset = str(tmp_path / "semi")
    _, curated = datasets.load_spec(dataset)
    assert infer_schema.main(["--dataset", dataset, "--data-dir", str(folder)]) == 0
    inferred = datasets.load_schema(str(tmp_path / "semi" / "inferred_schema.pbtxt"))
    assert {f.name: f.type for f in inferred.feature} == {f.name: f.type for f in curated.feature}
    assert {f.name: f.type for f in inferred.feature}["amount"] == schema_pb2.FLOAT
    (folder / "rows.csv.bak").write_text("old")
    capsys.readouterr()
    assert infer_schema.main(["--dataset", dataset, "--data-dir", str(folder)]) == 2
    assert "rows.csv.bak' is neither *.csv nor *.csv.gz" in capsys.readouterr().err


def test_a_gzip_files_text_size_is_never_below_its_compressed_size(tmp_path):
    """gzip's trailer holds the text's size modulo 4 GiB: a file whose trailer reads less than
    the file itself is taken as the next size that fits (the multi-processing threshold needs
    a lower bound, never a size wrapped to near zero)."""
    path = tmp_path / "big.csv.gz"
    path.write_bytes(b"x" * 100 + (10).to_bytes(4, "little"))
    assert csv_check.text_bytes(str(path)) == 10 + 2**32


@pytest.mark.parametrize("name", ["../outside", "Mixed", "a/b", "x y"])
def test_a_dataset_name_make_run_would_refuse_is_refused_before_anything_is_written(
        churn, tmp_path, capsys, name):
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    assert bootstrap.main(["--name", name, "--data-dir", churn, "--label", "churned",
                           "--task", "binary", "--schemas-dir", str(schemas)]) == 2
    assert f"NAME: the dataset's name {name!r} must be lowercase letters" in \
        capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schemas"]
    assert not list(schemas.iterdir())


def test_integers_are_ids_only_when_they_name_rows(tmp_path):
    """Nearly one value per row is what a continuous number looks like too: a row counter and
    fixed-width account numbers are ids; dollar amounts and fractional numbers are not."""
    rng = random.Random(11)
    zips = [str(rng.randrange(10000, 99999)) for _ in range(40)]
    rows = []
    for i in range(500):
        rows.append({"row_id": str(1000 + i), "account": str(rng.randrange(10**7, 10**8)),
                     "credit_limit": str(int(rng.lognormvariate(9, 1))),
                     "utilization": f"{rng.random():.6f}",
                     "zip": rng.choice(zips),
                     "y": rng.choice(["0", "1"])})
    features = _made(tmp_path, "loans", rows, "y")["features"]
    assert features["row_id"]["role"] == "ignore"
    assert "a run of consecutive integers" in features["row_id"]["why"]
    assert features["account"]["role"] == "ignore"
    assert "codes of 8 digits" in features["account"]["why"]
    assert features["credit_limit"]["role"] in ("zscore", "log_zscore")
    assert features["utilization"]["role"] == "zscore"
    assert features["zip"]["role"] == "hashed" and features["zip"]["why"].startswith("a code")


@pytest.mark.parametrize("values, weights, classes, why", [
    (["TRUE", "FALSE"], [1, 3], ["FALSE", "TRUE"], "a yes/true word"),
    (["N", "Y"], [1, 1], ["N", "Y"], "a yes/true word"),
    (["No", "Yes"], [5, 1], ["No", "Yes"], "a yes/true word"),
    (["stayed", "churned"], [4, 1], ["stayed", "churned"], "the minority class, "),
])
def test_a_binary_labels_positive_class_follows_the_stated_rule(tmp_path, capsys, values,
                                                                 weights, classes, why):
    rng = random.Random(2)
    rows = [{"x": f"{rng.random():.3f}", "flag": rng.choice(["Yes", "No"]),
             "y": rng.choices(values, weights)[0]} for _ in range(300)]
    spec = _made(tmp_path, "flags", rows, "y")
    assert spec["label"]["classes"] == classes
    assert spec["features"]["flag"]["role"] == "vocabulary"  # Yes/No as a feature
    text = (tmp_path / "flags" / datasets.SPEC_FILE).read_text(encoding="utf-8")
    assert f"# [negative, positive]: positive class {classes[1]!r} ({why}" in text
    assert f"label 'y': positive class {classes[1]!r} ({why}" in capsys.readouterr().out


def test_numbers_with_gaps_written_as_words_stay_numbers(tmp_path, capsys):
    """A churn export's Total Charges: numbers, with " " for new customers (and NA, N/A,
    null, None, NaN elsewhere): a number column with gaps, not text and not an id."""
    rng = random.Random(7)
    gaps = itertools.cycle([" ", "NA", "N/A", "null", "None", "NaN"])
    rows = []
    for i in range(400):
        charges = rng.uniform(20, 8000)
        rows.append({"Total Charges": next(gaps) if i % 20 == 0 else f"{charges:.2f}",
                     "Contract": rng.choice(["Month-to-month", "One year", "None"]),
                     "Churn": rng.choice(["Yes", "No"])})
    features = _made(tmp_path, "telco", rows, "Churn")["features"]
    assert features["Total Charges"]["role"] in ("zscore", "log_zscore"), features
    assert features["Contract"]["role"] == "vocabulary"  # "None" is one of its words
    _, schema = datasets.load_spec(str(tmp_path / "telco"))
    charges = next(f for f in schema.feature if f.name == "Total Charges")
    assert charges.type == schema_pb2.FLOAT and charges.value_count.min == 0  # gaps allowed
    assert not charges.HasField("shape")


def test_columns_that_differ_only_in_case_are_kept_apart(tmp_path):
    """`Age` and `age` are two columns: make dataset writes a spec with both, and the spec
    loads (their TensorFlow names differ in more than case: tests/test_tf_names.py)."""
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(5)
    _write(data / "people.csv", [{"Age": str(rng.randrange(18, 90)), "age": str(rng.random()),
                                  "label": rng.choice(["a", "b"])} for _ in range(300)])
    assert bootstrap.main(["--name", "people", "--data-dir", str(data), "--label", "label",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    config = configure(dataset=str(tmp_path / "people"), data_dir=str(data)).validate()
    assert {f.column for f in config.spec.features} == {"Age", "age"}


def test_spreadsheet_formatted_numbers_are_read_as_numbers_with_their_format(tmp_path):
    """A salary written "$5,993", a rate "11%" and an amount "1,234.5" are numbers with their
    format in the spec, not ids, vocabularies or hashed text; the data check then stops at a
    cell that breaks its column's format, naming the file, line and column."""
    rng = random.Random(7)
    rows = []
    for _ in range(600):
        salary = rng.randrange(2000, 20000)
        rows.append({"salary": f"${salary:,}", "rate": f"{rng.randrange(1, 30)}%",
                     "amount": f"{rng.uniform(10, 5000):,.1f}",
                     "left": "yes" if salary < 6000 or rng.random() < 0.1 else "no"})
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "staff.csv", rows)
    assert bootstrap.main(["--name", "staff", "--data-dir", str(data), "--label", "left",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    with open(tmp_path / "staff" / datasets.SPEC_FILE, "rb") as f:
        written = tomllib.load(f)
    assert written["csv"]["formats"] == {"salary": "$#,##0", "rate": "0%", "amount": "#,##0"}
    # The header's next step names the dataset, not the last formatted column.
    assert "`make run DATASET=staff DATA_DIR=…`" in (tmp_path / "staff" / datasets.SPEC_FILE
                                                    ).read_text()
    for column in ("salary", "rate", "amount"):
        assert written["features"][column]["role"] in ("zscore", "log_zscore", "quantile")
    config = configure(dataset=str(tmp_path / "staff"), data_dir=str(data)).validate()
    assert {f.name: f.type for f in config.schema.feature}["salary"] == schema_pb2.FLOAT
    from pipeline.tools import infer_schema  # make schema reads the formats as make run does

    assert infer_schema.main(["--dataset", str(tmp_path / "staff"), "--data-dir", str(data)]) == 0
    inferred = datasets.load_schema(str(tmp_path / "staff" / "inferred_schema.pbtxt"))
    assert {f.name: f.type for f in inferred.feature} == {
        f.name: f.type for f in config.schema.feature}
    with open(data / "staff.csv", "a", encoding="utf-8") as f:
        f.write("5993,3%,\"1,000.0\",no\n")  # the salary lost its "$"
    with pytest.raises(ConfigError, match=r"staff.csv', line 602: column 'salary': '5993' is "
                                          r"not written as the column's format '\$#,##0'"):
        configure(dataset=str(tmp_path / "staff"), data_dir=str(data)).validate()


def test_an_infinite_number_stops_make_dataset_and_the_run_naming_file_line_and_column(
        tmp_path, capsys):
    rows = [{"x": str(i * 0.5), "y": "yes" if i % 2 else "no"} for i in range(200)]
    rows[150]["x"] = "inf"
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "rows.csv", rows)
    assert bootstrap.main(["--name", "inf", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 2
    assert f"data file '{data}/rows.csv', line 152: column 'x' holds 'inf', which is not a " \
           "finite number" in capsys.readouterr().err
    rows[150]["x"] = "1.5"
    _write(data / "rows.csv", rows)
    assert bootstrap.main(["--name", "inf", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    rows[20]["x"] = "-Infinity"
    _write(data / "rows.csv", rows)
    with pytest.raises(ConfigError, match=r"rows.csv', line 22: column 'x': '-Infinity' is not "
                                          "a finite number"):
        configure(dataset=str(tmp_path / "inf"), data_dir=str(data)).validate()


@pytest.mark.parametrize("rows", [60, 900])
def test_an_exports_row_numbers_are_ids_not_features(tmp_path, rows):
    """R's `rownames` and pandas' index, a counter with gaps where rows were filtered out, are
    ignored at any size; a sorted timestamp (one per row, increasing, but no counter) is not."""
    rng = random.Random(rows)
    index = sorted(rng.sample(range(1, rows * 2), rows))
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "export.csv", [
        {"rownames": str(n), "stamp": str(1_700_000_000 + 60 * i),
         "x": f"{rng.gauss(0, 1):.3f}", "y": rng.choice(["a", "b"])}
        for i, n in enumerate(index)])
    assert bootstrap.main(["--name", "export", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    with open(tmp_path / "export" / datasets.SPEC_FILE, "rb") as f:
        features = tomllib.load(f)["features"]
    assert features["rownames"]["role"] == "ignore", features["rownames"]
    assert features["rownames"]["why"].startswith("row numbers")
    assert features["stamp"]["role"] != "ignore" or "row numbers" not in features["stamp"]["why"]


def _validated(spec, metrics: dict[str, float]) -> bool:
    """Whether TFMA's own validator (what the Evaluator's blessing comes from) passes a model
    scoring `metrics` on the overall slice, with the DAG's eval config for `spec`, prepared as
    TFX's Evaluator prepares it for a first run (no baseline: change thresholds set aside)."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.evaluators import metrics_validator

    from pipeline import dag

    config = tfma.utils.update_eval_config_with_defaults(dag.eval_config(spec),
                                                         has_baseline=False, rubber_stamp=True)
    keys = {tfma.metrics.MetricKey(name=name, example_weighted=False): value
            for name, value in metrics.items()}
    return metrics_validator.validate_metrics(((), keys), config).validation_ok


def test_a_model_that_learned_nothing_is_not_blessed(tmp_path):
    """The written thresholds are ones a model must beat: answering the majority class (its
    share of accuracy, AUC 0.5 or a worse ranking) is refused; a model that does better
    passes. For regression, predicting the mean (an RMSE of the label's spread) is refused."""
    rng = random.Random(25)
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "tiny.csv", [{"x": f"{rng.random():.3f}", "y": "yes" if i < 15 else "no",
                                "z": f"{rng.gauss(5, 2):.3f}"} for i in range(25)])
    assert bootstrap.main(["--name", "tiny", "--data-dir", str(data), "--label", "y", "--task",
                           "binary", "--schemas-dir", str(tmp_path)]) == 0
    spec, _ = datasets.load_spec(str(tmp_path / "tiny"))
    majority = 15 / 25
    assert not _validated(spec, {"binary_accuracy": majority, "auc": 0.5})
    assert not _validated(spec, {"binary_accuracy": majority, "auc": 0.33})
    assert not _validated(spec, {"binary_accuracy": 0.9, "auc": 0.5})
    assert _validated(spec, {"binary_accuracy": 0.68, "auc": 0.71})
    assert bootstrap.main(["--name", "tiny-reg", "--data-dir", str(data), "--label", "z",
                           "--task", "regression", "--schemas-dir", str(tmp_path)]) == 0
    regression, _ = datasets.load_spec(str(tmp_path / "tiny-reg"))
    [rmse] = [t for t in regression.thresholds if t.metric == "rmse"]
    values = [float(r["z"]) for r in csv.DictReader(open(data / "tiny.csv", encoding="utf-8"))]
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    assert not _validated(regression, {"root_mean_squared_error": spread})
    assert _validated(regression, {"root_mean_squared_error": 0.9 * spread})
    assert rmse.bound <= spread


@pytest.mark.parametrize("rows, slice_rows, fraction", [
    (300, 0, None), (600, 100, 0.2), (3000, 400, 0.2), (9000, 600, 0.1)])
def test_the_spec_says_truly_how_small_data_chooses_its_epochs(tmp_path, capsys, rows,
                                                                slice_rows, fraction):
    """600 rows (400 training rows): a 20% slice would hold 80, so the Trainer grows it to 100
    rows and the spec keeps early stopping and the refit, saying so; 300 rows: no slice is
    possible, and the spec writes patience 0 and refit_factor 0 with the reason. Below
    SMALL_DATA_ROWS training rows the slice is a fifth of them, from there on a tenth, and the
    written share is the one the Trainer holds out."""
    rng = random.Random(rows)
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "rows.csv", [{"x": f"{rng.gauss(0, 1):.3f}", "y": rng.choice(["a", "b"])}
                               for _ in range(rows)])
    assert bootstrap.main(["--name", "small", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    text = (tmp_path / "small" / datasets.SPEC_FILE).read_text(encoding="utf-8")
    training = tomllib.loads(text)["training"]
    assert bootstrap.validation_slice(rows * 2 // 3) == slice_rows
    steps = training["epochs"] * (rows * 2 // 3 // training["per_replica_batch_size"])
    if slice_rows:
        assert training["early_stopping_patience"] == bootstrap.SMALL_DATA_PATIENCE
        assert training["refit_factor"] == bootstrap.REFIT_FACTOR
        assert f"validation slice of about {slice_rows} rows" in text
        # The wait the Trainer applies (config.patience_after), in the spec and the console.
        comments = " ".join(line.lstrip("#").strip() for line in text.splitlines()
                            if line.startswith("#"))
        assert "a best at epoch b is waited on for 2b epochs when fewer, at least 10." in comments
        assert (f"patience {bootstrap.SMALL_DATA_PATIENCE} at most (2x the best epoch when "
                "fewer, at least 10)") in capsys.readouterr().out
        # A budget in steps (a binary label's members: BINARY_TRAIN_STEPS), ending at a rate
        # that still learns.
        assert 0 <= steps - bootstrap.BINARY_TRAIN_STEPS < steps / training["epochs"]
        assert training["lr_floor"] == bootstrap.LR_FLOOR
        assert training["validation_fraction"] == fraction
        trainer = configure(from_env({"DATASET": str(tmp_path / "small")})).trainer
        assert (trainer.training.epochs, trainer.training.lr_floor) == (
            training["epochs"], bootstrap.LR_FLOOR)
        assert trainer.data.validation_fraction == fraction
    else:
        assert training["early_stopping_patience"] == 0 and training["refit_factor"] == 0
        assert "validation_fraction" not in training
        assert "too few for a validation slice of 100" in text
        # Every epoch trains and the last is kept: the epoch cap holds, the decay ends at 0.
        assert training["epochs"] == bootstrap.MAX_EPOCHS and "lr_floor" not in training


def _shares(counts: dict[str, int]) -> list[str]:
    return [value for value, n in counts.items() for _ in range(n)]


def test_drift_thresholds_follow_the_distance_between_consecutive_spans(tmp_path):
    """Spans in their folders: a column's threshold is twice the largest L-infinity distance
    between consecutive spans' value shares (0.15 here), at least 0.1. The column that tags
    each row with its span in the statistics step is none of the data's: a data column of
    that name is kept, and the statistics of the whole data are those of its own columns."""
    shares = [{"a": 100, "b": 60, "c": 40}, {"a": 120, "b": 60, "c": 20},
              {"a": 150, "b": 30, "c": 20}]  # L-infinity 0.10 from span 1 to 2, 0.15 to 3
    rng = random.Random(7)
    data = tmp_path / "data"
    for span, counts in enumerate(shares, start=1):
        (data / f"span-{span}").mkdir(parents=True)
        _write(data / f"span-{span}" / "rows.csv", [
            {"plan": plan, "shop": ("north", "south")[i % 2], "__part__": f"{rng.random():.4f}",
             "y": rng.choice(["yes", "no"])} for i, plan in enumerate(_shares(counts))])
    assert bootstrap.main(["--name", "shops", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    with open(tmp_path / "shops" / datasets.SPEC_FILE, "rb") as f:
        spec = tomllib.load(f)
    assert "__part__" in spec["features"]
    thresholds = spec["drift"]["thresholds"]
    assert thresholds["plan"] == pytest.approx(2 * 0.15)
    assert thresholds["shop"] == bootstrap.DRIFT_FLOOR  # the same shares in every span
    schema = text_format.Parse((tmp_path / "shops" / datasets.SCHEMA_FILE).read_text(),
                               schema_pb2.Schema())
    assert sorted(f.name for f in schema.feature) == ["__part__", "plan", "shop", "y"]
    # Every plan is in every span: no new values, so plan tolerates the floor's share of them;
    # the label tolerates none.
    tolerated = {f.name: f.distribution_constraints.min_domain_mass for f in schema.feature
                 if f.HasField("distribution_constraints")}
    assert tolerated == {"plan": 1 - bootstrap.NEW_VALUES_FLOOR,
                         "shop": 1 - bootstrap.NEW_VALUES_FLOOR}


def test_a_flat_folders_drift_thresholds_come_from_consecutive_parts_of_its_rows(tmp_path):
    """Without spans, consecutive parts of the rows in file order (about 1,000 rows each)
    stand in for consecutive spans: the same mix in every part gives every column the floor;
    an export whose later rows hold another plan mix gets that column a wider threshold."""
    rng = random.Random(8)
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"plan": rng.choice("abc"), "amount": f"{rng.gauss(5, 1):.3f}",
             "y": rng.choice(["yes", "no"])} for _ in range(4000)]
    _write(data / "rows.csv", rows)
    assert bootstrap.main(["--name", "flat", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path)]) == 0
    text = (tmp_path / "flat" / datasets.SPEC_FILE).read_text()
    assert tomllib.loads(text)["drift"]["thresholds"] == dict.fromkeys(("plan", "amount", "y"),
                                                                       bootstrap.DRIFT_FLOOR)
    assert "2x the largest distance between consecutive parts of the rows (4, in file order)" in (
        text.replace("\n# ", " "))
    for row in rows[3000:]:
        row["plan"] = rng.choice("aab")  # the last quarter: no plan c, twice as many a
    _write(data / "rows.csv", rows)
    assert bootstrap.main(["--name", "flat", "--data-dir", str(data), "--label", "y",
                           "--task", "binary", "--schemas-dir", str(tmp_path), "--force"]) == 0
    thresholds = tomllib.loads((tmp_path / "flat" / datasets.SPEC_FILE).read_text())["drift"][
        "thresholds"]
    assert thresholds["plan"] > 0.5 and thresholds["amount"] == bootstrap.DRIFT_FLOOR


def test_a_timestamp_shared_by_rows_of_one_event_is_also_an_id(tmp_path):
    """An instant held by about three rows each gives its exact value as an id; unique
    instants and dates without a time of day do not."""
    rng = random.Random(5)
    rows = []
    for call in range(200):
        called = f"2016/{1 + call % 12:02d}/{1 + call % 28:02d} {call % 24:02d}:{call % 60:02d}:07"
        label = rng.choice(["Yes", "No"])
        for _ in range(3):
            rows.append({"called": called, "logged": f"2016-01-01T00:00:{len(rows) % 60:02d}"
                         f"+{len(rows) // 60 % 24:02d}:00",
                         "day": f"{1 + call % 12}/{1 + call % 28}/2016 0:00:00",
                         "force": rng.choice(["a", "b", "c"]), "y": label})
    features = _made(tmp_path, "calls", rows, "y")["features"]
    called = features["called"]
    assert called["role"] == "datetime" and called["format"] == "%Y/%m/%d %H:%M:%S"
    # 200 instants in 600 rows: 3.0 rows each; 8 buckets per instant, as a power of two.
    assert called["instant_buckets"] == 2048
    assert "3.0 rows per instant on average" in called["why"]
    assert features["day"]["role"] == "datetime" and "instant_buckets" not in features["day"]
    assert features["logged"]["role"] == "datetime"
    assert "instant_buckets" not in features["logged"]


def test_tabms_shape_reads_a_few_valued_integer_with_one_bin_and_a_wider_one_with_its_bins(
        tmp_path):
    """Quantile bins over a count of a few values repeat its ids (deliveries' 27 counts of 3 to
    5 values); an integer of more values keeps its bins under TabM's shape."""
    rng = random.Random(7)
    rows = [{"few": str(rng.randint(0, 3)), "more": str(10 * rng.randint(1, 11)),
             "y": rng.choice(["a", "b", "c"])} for _ in range(900)]
    spec = _made(tmp_path, "counts", rows, "y", "multiclass")
    # TabM's shape
    assert spec["model"]["ensemble_size"] == bootstrap.TABM_MEMBERS[tasks.MULTICLASS]
    features = spec["features"]
    assert (features["few"]["role"], features["few"]["bins"]) == ("integer",
                                                                  bootstrap.SIZED_INTEGER_BINS)
    assert (features["more"]["role"], features["more"]["bins"]) == (
        "integer", bootstrap.INTEGER_NUMBER_BINS)
