"""`make predict`: a folder of new CSV rows scored with an exported model's serving_features
signature, every row accounted for (scored, or rejected with its reason)."""

import csv
import gzip
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from pipeline.pipeline_config import REPO_ROOT, ConfigError
from pipeline.tools import predict
from trainer_module import export, keys, tool_scoring
from trainer_module.config import TrainerConfig
from trainer_module.model import build_model, category_sizes


def _exported(data, folder, spec=None) -> str:
    spec = spec or data.spec
    tft_output = tft.TFTransformOutput(data.transform_dir)
    config = TrainerConfig.create(hidden_units=(128,))
    scale = (12.5, 10.0) if spec.task == "regression" else (0.0, 1.0)
    model = build_model(config, spec, category_sizes(spec, tft_output), scale)
    export.export_serving_model(model, config, spec, tft_output, str(folder), scale)
    return str(folder)


def _open(path, mode: str):
    """A CSV file, gzip-compressed where its name says so."""
    opener = gzip.open if str(path).endswith(".gz") else open
    return opener(path, mode + "t", newline="", encoding="utf-8")


def _write(path, rows) -> None:
    with _open(path, "w") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _read(path) -> list[dict[str, str]]:
    with _open(path, "r") as f:
        return list(csv.DictReader(f))


def test_scores_every_good_row_like_serving_default_and_reports_the_rest(task_data, tmp_path):
    model_dir = _exported(task_data, tmp_path / "model")
    rows = [dict(r) for r in task_data.eval_csv_rows]
    inputs = tool_scoring.load_predictor(model_dir).inputs
    required = [i for i in inputs if i.required]
    number = next(i.name for i in inputs if i.kind != "string")
    bad = {3: (required[0].name, ""), 7: (number, "twelve")}
    for index, (column, value) in bad.items():
        rows[index][column] = value
    data_dir = tmp_path / "new"
    data_dir.mkdir()
    _write(data_dir / "a.csv", rows[:10])
    _write(data_dir / "b.csv.gz", rows[10:])  # scored, and written back, compressed
    summary = predict.predict_folder(model_dir, str(data_dir), str(tmp_path / "out"))

    assert summary["rows"] == len(rows) and summary["rejected"] == 2
    assert summary["files"] == {
        "a.csv": {"scored": 8, "rejected": 2, "delimiter": ","},
        "b.csv.gz": {"scored": len(rows) - 10, "rejected": 0, "delimiter": ","}}
    folder = summary["output"]
    assert os.path.dirname(folder) == str(tmp_path / "out" / "predictions")
    with open(os.path.join(folder, predict.SUMMARY_FILE), encoding="utf-8") as f:
        assert json.load(f)["rejected"] == 2
    rejected = _read(os.path.join(folder, predict.REJECTED_FILE))
    assert [(r["file"], r["row"]) for r in rejected] == [("a.csv", "5"), ("a.csv", "9")]
    assert rejected[0]["reason"] == f"{bad[3][0]}: empty, but the schema requires a value"
    assert rejected[1]["reason"].startswith(f"{number}: 'twelve' is not a number")
    assert json.loads(rejected[1]["cells"])[number] == "twelve"

    scored = _read(os.path.join(folder, "a.csv")) + _read(os.path.join(folder, "b.csv.gz"))
    good = [r for i, r in enumerate(rows) if i not in bad]
    columns = list(tool_scoring.load_predictor(model_dir).output_columns)
    assert list(scored[0]) == list(rows[0]) + columns
    assert [{k: r[k] for k in rows[0]} for r in scored] == good  # the input rows, unchanged
    model = tf.saved_model.load(model_dir)
    expected = model.signatures[keys.SERVING_SIGNATURE](
        examples=tf.constant(task_data.rows.serialized(good, serving=True)))
    key = task_data.spec.task_info.prediction_key
    if task_data.spec.task == "multiclass":
        got = np.array([[float(r[c]) for c in columns[:-1]] for r in scored])
        classes = list(task_data.spec.classes)
        assert [r[tool_scoring.PREDICTED_CLASS] for r in scored] == [
            classes[i] for i in expected["scores"].numpy().argmax(axis=1)]
    else:
        got = np.array([[float(r[key])] for r in scored])
    np.testing.assert_allclose(got, expected[key].numpy(), rtol=1e-5, atol=1e-6)


def test_ignored_columns_are_no_serving_inputs(task_data, tmp_path):
    """A column whose only role is 'ignore' is not read by the model: the signature does not
    take it, the contract does not list it, and rows without it score."""
    model_dir = _exported(task_data, tmp_path / "model")
    ignored = {f.column for f in task_data.spec.features} - {
        f.column for f in task_data.spec.features if f.role != "ignore"}
    predictor = tool_scoring.load_predictor(model_dir)
    assert not ignored & {i.name for i in predictor.inputs}
    rows = [{k: v for k, v in r.items() if k not in ignored}
            for r in task_data.eval_csv_rows[:30]]
    data_dir = tmp_path / "new"
    data_dir.mkdir()
    _write(data_dir / "a.csv", rows)
    summary = predict.predict_folder(model_dir, str(data_dir), str(tmp_path / "out"))
    assert summary["rejected"] == 0 and summary["rows"] == 30
    meaning = next(o["meaning"] for o in predictor.contract["outputs"])
    if task_data.spec.task == "binary":  # the positive class is named, not "true"
        assert "is true" not in meaning and " is " in meaning, meaning


def test_formatted_numbers_score_through_their_format_and_infinity_is_refused(
        transformed_data, tmp_path):
    """A model whose spec reads fares as "$#,##0" scores "$1,234.50" as 1234.5 would score;
    a cell that breaks the format, or an infinite one, is rejected with its reason; the served
    signature refuses an infinite input, naming it."""
    import dataclasses

    import pandas as pd

    spec = dataclasses.replace(transformed_data.spec, number_formats=(("fare", "$#,##0"),))
    model_dir = _exported(transformed_data, tmp_path / "model", spec)
    predictor = tool_scoring.load_predictor(model_dir)
    assert {i.name: i.format for i in predictor.inputs}["fare"] == "$#,##0"
    rows = [dict(r) for r in transformed_data.eval_csv_rows[:20]]
    plain_dir, formatted_dir = tmp_path / "plain", tmp_path / "formatted"
    plain_dir.mkdir()
    formatted_dir.mkdir()
    _write(plain_dir / "a.csv", rows)
    formatted = [{**r, "fare": f"${float(r['fare']) * 100:,.2f}"} for r in rows]
    plain = [{**r, "fare": f"{float(r['fare']) * 100:.2f}"} for r in rows]
    formatted[3]["fare"], formatted[5]["fare"] = "12.50", "$inf"
    _write(formatted_dir / "a.csv", formatted)
    _write(plain_dir / "a.csv", plain)
    got = predict.predict_folder(model_dir, str(formatted_dir), str(tmp_path / "out"))
    rejected = _read(os.path.join(got["output"], predict.REJECTED_FILE))
    assert [r["row"] for r in rejected] == ["5", "7"]
    assert "is not written as the column's format '$#,##0'" in rejected[0]["reason"]
    assert got["rows"] == 20 and got["rejected"] == 2
    # The model sees the numbers the plain cells hold.
    as_plain = tuple(dataclasses.replace(i, format="") for i in predictor.inputs)
    good = [i for i in range(20) if i not in (3, 5)]
    columns, _ = tool_scoring.parse_columns(pd.DataFrame(formatted, dtype=str), predictor.inputs)
    expected, _ = tool_scoring.parse_columns(pd.DataFrame(plain, dtype=str), as_plain)
    np.testing.assert_allclose(columns["fare"][good], expected["fare"][good])
    columns["fare"][0] = np.inf
    keys_of = {i.name: i.key for i in predictor.inputs}
    dtypes = {i.name: tf.dtypes.as_dtype(i.dtype) for i in predictor.inputs}
    with pytest.raises(tf.errors.InvalidArgumentError, match="fare holds an infinite number"):
        predictor.signature(**{keys_of[n]: tf.constant(v, dtypes[n]) for n, v in columns.items()})


def test_the_newest_complete_pushed_version_is_used(tmp_path):
    serving = tmp_path / "serving"
    for version, complete in (("1700000000", True), ("1800000000", True), ("1900000000", False)):
        (serving / version).mkdir(parents=True)
        if complete:
            (serving / version / "saved_model.pb").write_bytes(b"")
    assert predict.latest_pushed_model(str(serving)) == str(serving / "1800000000")
    with pytest.raises(ConfigError, match="no model pushed to .*: run `make run`"):
        predict.latest_pushed_model(str(tmp_path / "empty"))


def test_inputs_it_cannot_score_are_named(transformed_data, tmp_path, capsys):
    model_dir = _exported(transformed_data, tmp_path / "model")
    data_dir = tmp_path / "new"
    data_dir.mkdir()
    assert predict.main(["--data-dir", str(data_dir), "--model-dir", model_dir,
                         "--output-dir", str(tmp_path / "out")]) == 2
    assert "holds no *.csv or *.csv.gz file" in capsys.readouterr().err
    rows = [{k: v for k, v in r.items() if k != "fare"} for r in transformed_data.eval_csv_rows]
    _write(data_dir / "no_fare.csv", rows)
    assert predict.main(["--data-dir", str(data_dir), "--model-dir", model_dir,
                         "--output-dir", str(tmp_path / "out")]) == 2
    assert "no column for required feature(s) ['fare']" in capsys.readouterr().err
    assert predict.main(["--data-dir", str(data_dir), "--model-dir", str(tmp_path),
                         "--output-dir", str(tmp_path / "out")]) == 2
    assert "exported without the serving_features signature" in capsys.readouterr().err


def test_each_file_is_read_with_its_own_delimiter(transformed_data, tmp_path, capsys):
    """A model trained on comma-separated files scores a semicolon export (with Excel's
    byte-order mark, gzip-compressed too) row for row; a header two delimiters split alike is
    refused, naming both and the setting that decides."""
    model_dir = _exported(transformed_data, tmp_path / "model")
    rows = [dict(r) for r in transformed_data.eval_csv_rows[:20]]
    data_dir = tmp_path / "new"
    data_dir.mkdir()
    for name in ("excel.csv", "excel.csv.gz"):
        with _open(data_dir / name, "w") as f:
            f.write("\ufeff")
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=";")
            writer.writeheader()
            writer.writerows(rows)
    summary = predict.predict_folder(model_dir, str(data_dir), str(tmp_path / "out"))
    assert summary["files"] == {name: {"scored": 20, "rejected": 0, "delimiter": ";"}
                                for name in ("excel.csv", "excel.csv.gz")}
    with open(os.path.join(summary["output"], "excel.csv"), encoding="utf-8") as f:
        assert f.readline().startswith(";".join(rows[0]))

    (data_dir / "odd.csv").write_text("fare;a|company\n1;2|x\n", encoding="utf-8")
    out = str(tmp_path / "out")
    assert predict.main(["--data-dir", str(data_dir), "--model-dir", model_dir,
                         "--output-dir", out]) == 2
    err = capsys.readouterr().err
    assert "odd.csv: its header splits into 1 of the model's columns on the semicolon (';') " \
           "and pipe ('|') alike" in err and "make predict DELIMITER=" in err
    (data_dir / "odd.csv").unlink()
    assert predict.main(["--data-dir", str(data_dir), "--model-dir", model_dir,
                         "--output-dir", out, "--delimiter", ";"]) == 0


def test_the_docs_json_request_is_what_the_signature_takes(transformed_data, tmp_path):
    """docs/predictions.md's taxi request body, parsed as TF Serving's JSON parser would (NaN
    allowed), answers through serving_features: one probability per instance."""
    with open(os.path.join(REPO_ROOT, "docs", "predictions.md"), encoding="utf-8") as f:
        doc = f.read()
    block = doc.split("<!-- serving_features request: taxi -->", 1)[1]
    body = json.loads(block.split("```json", 1)[1].split("```", 1)[0])
    assert body["signature_name"] == "serving_features"
    predictor = tool_scoring.load_predictor(_exported(transformed_data, tmp_path / "model"))
    assert all(set(i) == {x.name for x in predictor.inputs} for i in body["instances"])
    columns = {x.name: tf.constant([i[x.name] for i in body["instances"]],
                                   tf.dtypes.as_dtype(x.dtype)) for x in predictor.inputs}
    out = predictor.signature(**columns)
    assert set(out) == {"probabilities"} and out["probabilities"].shape == (2, 1)
