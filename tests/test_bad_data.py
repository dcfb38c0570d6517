"""Bad CSV data never reaches the Trainer: each case is stopped by the settings check or the
AnomalyGate, with a message that names the problem, and the command exits non-zero.

Each case runs the local runner's `main` (the command's code path and exit code) in this
process on a small CSV the test writes. What stops each case is recorded in CASES.
"""

import csv
import dataclasses
import io
from collections.abc import Callable

import pytest

import mlmd_records
from dataset_rows import TAXI
from pipeline import local_runner

pytestmark = pytest.mark.e2e

ROWS = TAXI.read_rows(600)
COLUMNS = list(ROWS[0])
SETTINGS_CHECK, ANOMALY_GATE = 2, 1  # the runner's exit codes for the two stops


def _csv(rows: list[dict[str, str]], columns: list[str] = COLUMNS) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def _with(column: str, value: str, count: int) -> bytes:
    rows = [dict(r) for r in ROWS]
    for row in rows[:count]:
        row[column] = value
    return _csv(rows)


def _truncated() -> bytes:
    text = _csv(ROWS)
    return text[: text.rstrip(b"\n").rfind(b",")]  # the last line loses its last field


def _not_utf8() -> bytes:
    text = _csv(ROWS)
    cut = len(text) - 2000  # past the first read buffer: only a full pass finds it
    return text[:cut] + text[cut:].replace(b"Taxi", b"T\xe4xi", 1)


@dataclasses.dataclass(frozen=True)
class Case:
    files: Callable[[], dict[str, bytes]]
    exit_code: int
    messages: tuple[str, ...]


CASES = {
    "required column missing": Case(
        lambda: {"trips.csv": _csv(ROWS, [c for c in COLUMNS if c != "fare"])},
        SETTINGS_CHECK, ("lacks column(s) ['fare']",)),
    "header renamed": Case(
        lambda: {"trips.csv": _csv(ROWS, COLUMNS).replace(b"trip_miles", b"miles", 1)},
        SETTINGS_CHECK, ("lacks column(s) ['trip_miles']", "its header is")),
    "header reordered in one of two files": Case(
        lambda: {"a.csv": _csv(ROWS[:300]), "b.csv": _csv(ROWS[300:], COLUMNS[::-1])},
        SETTINGS_CHECK, ("b.csv' has the header", "must have the same columns in the same "
                                                   "order")),
    "empty file (header only)": Case(
        lambda: {"trips.csv": _csv([])},
        SETTINGS_CHECK, ("hold a header but no data rows",)),
    "truncated last line": Case(
        lambda: {"trips.csv": _truncated()},
        SETTINGS_CHECK, (f"line {len(ROWS) + 1}: 17 field(s) where the header has 18",)),
    "bytes that are not UTF-8": Case(
        lambda: {"trips.csv": _not_utf8()},
        SETTINGS_CHECK, ("bytes b'\\xe4' are not UTF-8",)),
    "string in a numeric column": Case(
        lambda: {"trips.csv": _with("trip_miles", "unknown", 50)},
        ANOMALY_GATE, ("[train] trip_miles:", "Expected data of type: FLOAT but got STRING")),
    # n/a is a missing marker (trainer_module/missing.py): a gap, where the schema wants a value.
    "missing markers in a required number column": Case(
        lambda: {"trips.csv": _with("trip_miles", "n/a", 50)},
        ANOMALY_GATE, ("[train] trip_miles: Feature shape dropped",)),
    "label source out of its domain": Case(
        lambda: {"trips.csv": _with("tips", "-1.5", 40)},
        ANOMALY_GATE, ("[train] tips: Out-of-range values — Unexpectedly low values",)),
    # 10% of the rows, where taxi's schema tolerates 1% (min_domain_mass 0.99).
    "unseen category beyond the allowed fraction": Case(
        lambda: {"trips.csv": _with("payment_type", "Bitcoin", 60)},
        ANOMALY_GATE, ("[train] payment_type: ", "of the values are new to the schema "
                       "('Bitcoin'); the schema tolerates 1.0% — if the column's codes were "
                       "renamed or re-encoded, fix the export")),
    "rows without the label's source": Case(
        lambda: {"trips.csv": _with("tips", "", 40)},
        SETTINGS_CHECK, ("40 of 600 rows have no value in the label column 'tips'",
                         'missing = "drop"')),
    "too few rows to fill both splits": Case(
        lambda: {"trips.csv": _csv(ROWS[:1])},
        ANOMALY_GATE, ("No examples — the split is empty",)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_data_stops_before_the_trainer(name, tmp_path, monkeypatch, capsys):
    case = CASES[name]
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for file_name, content in case.files().items():
        (data_dir / file_name).write_bytes(content)
    output = tmp_path / "out"
    monkeypatch.setenv("TRAIN_STEPS", "5")

    code = local_runner.main(["--data-dir", str(data_dir), "--output-dir", str(output)])

    err = capsys.readouterr().err
    assert code == case.exit_code, err[-3000:]
    for message in case.messages:
        assert message in err, err[-3000:]
    assert not (output / "serving_model").exists()
    if case.exit_code == SETTINGS_CHECK:
        assert not output.exists()  # stopped before any component ran
        return
    assert "the data does not match the schema" in err
    assert str(output / "pipeline_root" / "ExampleValidator" / "anomalies") in err
    states = mlmd_records.execution_states(str(output / "metadata" / "metadata.db"))
    assert states["AnomalyGate"] == "FAILED", states
    assert not {"Transform", "Trainer", "Evaluator", "Pusher"} & set(states), states

