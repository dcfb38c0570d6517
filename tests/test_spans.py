"""A data dir of span folders (pipeline/spans/folders.py): TFX's own span support reads the
newest span, or `SPAN`; what would go wrong without a word stops with exit 2, naming the
span."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import mlmd_records
from dataset_rows import TAXI
from pipeline import REPO_ROOT
from pipeline.errors import ConfigError
from pipeline.pipeline_config import configure
from pipeline.runs import span_history
from pipeline.spans import folders as spans
from pipeline.spans import store as span_store
from trainer_module import keys


def _write(path, header: list[str], rows: list[dict[str, str]]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(",".join(header) + "\n")
        f.writelines(",".join(r[c] for c in header) + "\n" for r in rows)


def _taxi_spans(root, names: list[str], rows_each: int = 600) -> list[list[dict[str, str]]]:
    """The shipped taxi rows, consecutive slices of them as span folders `names`."""
    rows = TAXI.read_rows()
    header = list(rows[0])
    parts = []
    for i, name in enumerate(names):
        part = rows[i * rows_each:(i + 1) * rows_each]
        _write(root / name / "trips.csv", header, part)
        parts.append(part)
    return parts


def test_the_newest_span_is_read_and_span_picks_another(tmp_path):
    _taxi_spans(tmp_path, ["span-1", "span-2", "span-3"])
    config = configure(data_dir=str(tmp_path)).validate()
    assert (config.span, config.spans.layout) == (3, spans.NUMBERED)
    assert config.data_folder == str(tmp_path / "span-3")
    assert config.spans.pattern == "span-{SPAN}/*.csv*"
    assert configure(data_dir=str(tmp_path), span="2").validate().span == 2
    with pytest.raises(ConfigError, match=r"SPAN='7': .* has no such span; its spans are "
                                          r"span-1, span-2, span-3"):
        configure(data_dir=str(tmp_path), span="7")


def test_dated_spans_number_as_tfx_numbers_them(tmp_path):
    from tfx.components.example_gen import utils

    _taxi_spans(tmp_path, ["2026-11-01", "2026-11-02"], rows_each=300)
    config = configure(data_dir=str(tmp_path), span="2026-11-01").validate()
    assert config.span == utils.date_to_span_number(2026, 11, 1)
    assert config.spans.pattern == "{YYYY}-{MM}-{DD}/*.csv*"
    assert configure(data_dir=str(tmp_path)).span == utils.date_to_span_number(2026, 11, 2)


def test_an_executor_no_driver_ran_before_resolves_and_records_the_newest_span(tmp_path):
    """kfp.local runs no `lifecycle.preCacheCheck` hook, where Vertex runs TFX's ExampleGen
    driver: the executor then gets `{SPAN}` unresolved and resolves it with TFX's own input
    processor, as that driver would."""
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from pipeline.components import example_gen

    _taxi_spans(tmp_path, ["span-1", "span-2"], rows_each=5)
    pattern = spans.pattern(spans.NUMBERED)
    exec_properties = {
        "input_base": str(tmp_path),
        "input_config": proto_utils.proto_to_json(example_gen_pb2.Input(splits=[
            example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]))}
    examples = standard_artifacts.Examples()
    example_gen.resolve_span(exec_properties, [examples])
    assert exec_properties["span"] == 2 and exec_properties["input_fingerprint"]
    assert json.loads(exec_properties["input_config"])["splits"][0]["pattern"] == (
        pattern.replace("{SPAN}", "2"))
    assert examples.get_int_custom_property("span") == 2

    resolved = dict(exec_properties)
    example_gen.resolve_span(exec_properties, [examples])  # a driver already ran: unchanged
    assert exec_properties == resolved


def test_a_span_store_lists_each_kind_of_entry_by_span(tmp_path):
    """A compiled spec's span store holds statistics folders (span-N) and Examples records
    (span-N.json) side by side; each lister sees its own kind only."""
    store = str(tmp_path / "store")
    assert span_store.statistics_files(store) == {}  # no store yet: nothing filed
    assert span_store.examples_uris(store) == {}
    source = tmp_path / "FeatureStats.pb"
    source.write_bytes(b"statistics")
    for span in (1, 12):
        span_store.file_statistics(store, span, str(source))
    os.makedirs(os.path.join(store, "span-5"))  # a folder without statistics is not filed
    for span, uri in ((1, "/examples/1"), (3, "/examples/3")):
        span_store.file_examples(store, span, uri)
    for stray in ("span-x", "span-3.json.tmp", "notes.json"):
        open(os.path.join(store, stray), "w").close()
    files = span_store.statistics_files(store)
    assert sorted(files) == [1, 12]
    assert open(files[12], "rb").read() == b"statistics"
    assert span_store.examples_uris(store) == {1: "/examples/1", 3: "/examples/3"}


def test_a_flat_folder_is_one_span_as_before(tmp_path):
    _taxi_spans(tmp_path, ["."], rows_each=300)
    config = configure(data_dir=str(tmp_path)).validate()
    assert config.spans is None and config.span is None
    assert config.data_folder == str(tmp_path)
    with pytest.raises(ConfigError, match="has no span folders here .*unset SPAN"):
        configure(data_dir=str(tmp_path), span="1")


@pytest.mark.parametrize("make, message", [
    (lambda root: _write(root / "span-3" / "trips.csv", ["fare", "tips"], [{"fare": "1",
                                                                            "tips": "0"}]),
     r"span 'span-3' has the header \['fare', 'tips'\], but span 'span-1' has .*\(missing: "),
    (lambda root: os.makedirs(root / "span-3"), r"span folder .*span-3' holds no \*.csv"),
    (lambda root: _taxi_spans(root, ["span-1", "span-2", "span-4"], rows_each=50),
     r"span\(s\) \[3\] are missing between span-1 and span-4"),
    (lambda root: _write(root / "stray.csv", ["a"], [{"a": "1"}]),
     "holds CSV files beside span folders"),
    (lambda root: _taxi_spans(root, ["2026-11-01"], rows_each=50), "mixes numbered"),
])
def test_spans_that_do_not_fit_together_stop_naming_the_span(tmp_path, make, message):
    _taxi_spans(tmp_path, ["span-1", "span-2"], rows_each=100)
    make(tmp_path)
    with pytest.raises(ConfigError, match=message):
        configure(data_dir=str(tmp_path)).validate()


def _inputs(db, node: str, key: str) -> list:
    """The artifacts under input `key` of `node`'s latest execution."""
    from ml_metadata.proto import metadata_store_pb2

    execution = max((e for e in db.get_executions() if mlmd_records.node_of(db, e) == node),
                    key=lambda e: e.id)
    ids = [e.artifact_id for e in db.get_events_by_execution_ids([execution.id])
           if e.type == metadata_store_pb2.Event.INPUT and e.path.steps[0].key == key]
    return db.get_artifacts_by_id(ids)


def _span_spec(folder) -> str:
    """The shipped taxi spec and schema, its drift thresholds as shipped, with a window of two
    spans."""
    shutil.copytree(os.path.join(REPO_ROOT, "schemas", "taxi"), folder,
                    ignore=shutil.ignore_patterns("inferred_schema.pbtxt"))
    with open(folder / "spec.toml", encoding="utf-8") as f:
        text = f.read()
    text = text.replace("[training]\n", "[training]\nwindow_spans = 2\n")
    with open(folder / "spec.toml", "w", encoding="utf-8") as f:
        f.write(text)
    return str(folder)


@pytest.mark.e2e
def test_daily_spans_train_on_a_window_and_a_drifted_span_stops(tmp_path):
    """Taxi rows as three daily spans, the spec training on the newest two.

    SPAN=1 trains and pushes. The newest span, 2 at first, trains on spans 1 and 2: span 1's
    Examples come from the store (its ExampleGen ran once, in the first run), the Trainer
    warm-starts from span 1's model, and the model ships the statistics of both spans'
    training rows for `make predict`'s skew report. Span 3 holds the next rows with their
    fares tripled: the shipped spec's drift thresholds stop it before Transform, naming the
    column, and the served model stays byte for byte. `make predict` on span 3's rows scores
    them all and reports the fare's skew."""
    import tensorflow as tf
    import tensorflow_data_validation as tfdv

    from conftest import tree_hashes
    from trainer_module.feature_signature import TRAINING_STATISTICS_FILE

    data = tmp_path / "data"
    parts = _taxi_spans(data, ["span-1", "span-2"], rows_each=900)
    output = tmp_path / "out"
    env = {**os.environ, "OUTPUT_DIR": str(output), "TRAIN_STEPS": "20",
           "MIN_EVAL_ACCURACY": "0.5", "TF_CPP_MIN_LOG_LEVEL": "2", "WARM_START": "true",
           "DATASET": _span_spec(tmp_path / "spec")}
    runner = [sys.executable, os.path.join(REPO_ROOT, "pipeline", "local_runner.py"),
              "--data-dir", str(data), "--output-dir", str(output)]

    def run(**extra):
        return subprocess.run(runner, env={**env, **extra}, capture_output=True, text=True,
                              timeout=900)

    result = run(SPAN="1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "(span span-1 of 2)" in result.stdout
    db = mlmd_records.store(str(output / "metadata" / "metadata.db"))
    [span_1] = _inputs(db, "Transform", "examples")
    assert span_1.custom_properties["span"].int_value == 1
    count = sum(1 for split in ("train", "eval") for _ in tf.data.TFRecordDataset(
        tf.io.gfile.glob(os.path.join(span_1.uri, "Split-" + split, "*")), "GZIP"))
    assert count == len(parts[0])
    [first_model] = _inputs(db, "Evaluator", "model")

    result = run()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "(span span-2, the newest of 2)" in result.stdout
    assert "read 2 spans, span-1, span-2" in result.stdout
    window = _inputs(db, "Transform", "examples")
    assert sorted(a.custom_properties["span"].int_value for a in window) == [1, 2]
    assert span_1.id in {a.id for a in window}  # span 1 read from the store, not again
    example_gens = [e for e in db.get_executions()
                    if mlmd_records.node_of(db, e) == "CsvExampleGen"]
    assert len(example_gens) == 2
    assert [m.id for m in _inputs(db, "Trainer", "base_model")] == [first_model.id]
    drift = json.loads((next((output / "pipeline_root" / "DriftValidator" / "drift_report"
                              ).iterdir()) / "drift.json").read_text())
    assert (drift["span"], drift["previous_span"]) == (2, 1)
    # Every thresholded column with a value in these rows (pickup_census_tract has none).
    assert set(drift["columns"]) == {c for c, _ in TAXI.spec.drift_thresholds} - {
        "pickup_census_tract"}
    assert not any(c["past"] for c in drift["columns"].values())
    served = output / "serving_model"
    before = tree_hashes(served)
    assert before
    # The newest version served (`make predict` scores with it).
    shipped = max(served.glob(f"*/*/{TRAINING_STATISTICS_FILE}"), key=lambda p: int(p.parts[-3]))
    trained_rows = sum(1 for a in window for _ in tf.data.TFRecordDataset(
        tf.io.gfile.glob(os.path.join(a.uri, keys.split_dir(keys.TRAIN_SPLIT), "*")), "GZIP"))
    assert trained_rows > len(parts[1])  # more than one span's rows, all of them
    assert tfdv.load_stats_binary(str(shipped)).datasets[0].num_examples == trained_rows

    shifted = [dict(r, fare=f"{float(r['fare']) * 3:.2f}") for r in TAXI.read_rows()[1800:2700]]
    _write(data / "span-3" / "trips.csv", list(shifted[0]), shifted)
    result = run()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "span 3 drifted from span 2 on 1 column(s):" in result.stderr
    fare = dict(TAXI.spec.drift_thresholds)["fare"]
    assert re.search(rf"fare: Jensen-Shannon divergence 0\.\d{{4}} > threshold {fare:g}",
                     result.stderr), result.stderr[-3000:]
    states = mlmd_records.latest_run(str(output / "metadata" / "metadata.db")).states
    assert states["DriftValidator"] == "COMPLETE" and states["AnomalyGate"] == "FAILED"
    assert "Trainer" not in states
    assert tree_hashes(served) == before
    # The stopped span's figures stay in the store, for the report's picture.
    history = span_history.read(str(output / "metadata" / "metadata.db"), "spec-tpu",
                                "binary_accuracy")
    assert sorted(history.drift) == [2, 3] and history.drift[3]["fare"][0] > fare
    assert [span for span, _ in history.blessed] == [1, 2]

    result = subprocess.run([sys.executable, "-m", "pipeline.tools.predict", "--data-dir",
                             str(data / "span-3"), "--output-dir", str(output)],
                            env=env, capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"fare: Jensen-Shannon divergence 0\.\d{4} from the training rows",
                     result.stderr), result.stderr[-3000:]
    [summary_file] = (output / "predictions").glob("*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["rows"] == len(shifted) and summary["rejected"] == 0
    assert summary["skew"]["columns"]["fare"]["past"]
    assert not summary["skew"]["columns"]["trip_seconds"]["past"]


def test_the_report_draws_spans_only_when_there_are_several():
    flat = span_history.SpanHistory({}, [(0, 0.81), (0, 0.82)])  # a flat folder: span 0
    daily = span_history.SpanHistory({2: {"fare": (0.1, 0.5)}}, [(1, 0.81)])
    assert not flat.several_spans and daily.several_spans
