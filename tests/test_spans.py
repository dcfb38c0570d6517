"""A data dir of span folders (pipeline/spans.py): TFX's own span support reads the newest span,
or `SPAN`; what would go wrong without a word stops with exit 2, naming the span."""

import os
import subprocess
import sys

import pytest

import mlmd_records
from dataset_rows import TAXI
from pipeline import REPO_ROOT, spans
from pipeline.errors import ConfigError
from pipeline.pipeline_config import configure


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


@pytest.mark.e2e
def test_a_run_reads_the_newest_span_through_tfx_and_records_it(tmp_path):
    """The local DAG on two span folders: CsvExampleGen's Examples artifact records span 2 and
    holds span 2's rows only; SPAN=1 reads span 1 (exit codes: 0)."""
    parts = _taxi_spans(tmp_path / "data", ["span-1", "span-2"], rows_each=900)
    output = tmp_path / "out"
    env = {**os.environ, "OUTPUT_DIR": str(output), "TRAIN_STEPS": "20",
           "MIN_EVAL_ACCURACY": "0.5", "TF_CPP_MIN_LOG_LEVEL": "2"}
    runner = [sys.executable, os.path.join(REPO_ROOT, "pipeline", "local_runner.py"),
              "--data-dir", str(tmp_path / "data"), "--output-dir", str(output)]
    result = subprocess.run(runner, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "(span span-2, the newest of 2)" in result.stdout
    db = mlmd_records.store(str(output / "metadata" / "metadata.db"))

    def read_rows() -> list:  # CsvExampleGen's outputs (Transform writes Examples too)
        return [a for a in db.get_artifacts_by_type("Examples")
                if os.sep + "CsvExampleGen" + os.sep in a.uri]

    [examples] = read_rows()
    assert examples.custom_properties["span"].int_value == 2
    import tensorflow as tf

    count = sum(1 for split in ("train", "eval") for _ in tf.data.TFRecordDataset(
        tf.io.gfile.glob(os.path.join(examples.uri, f"Split-{split}", "*")), "GZIP"))
    assert count == len(parts[1])
    result = subprocess.run(runner, env={**env, "SPAN": "1"}, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    spans_read = sorted(a.custom_properties["span"].int_value for a in read_rows())
    assert spans_read == [1, 2]
