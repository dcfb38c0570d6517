"""Scores a folder of new CSV rows with the latest model pushed to the output dir.

    python -m pipeline.tools.predict --data-dir new_rows/ [--dataset taxi] [--output-dir output/]

Writes <output dir>/predictions/<UTC time>/: for each input file, <file>.csv with its scored
rows (every input column, then the prediction columns), rejected.csv with the rows that do not
fit the model's inputs (file, row, reason, then the row), and summary.json (the model version,
rows scored and rejected per file, each column's skew from the training rows and its values the
model never saw: pipeline/spans/skew.py). Skew and unseen values warn; they never stop
a row from being scored. The exit code is 1 when any row was rejected.
"""

import argparse
import csv
import json
import os
import sys
import time

from pipeline import console, csv_check
from pipeline.env_settings import for_output_dir
from pipeline.pipeline_config import PREDICTIONS_DIR, ConfigError
from pipeline.spans import skew
from pipeline.spans.skew import SkewCheck

REJECTED_FILE = "rejected.csv"
SUMMARY_FILE = "summary.json"
# Rows read at a time: memory stays flat however large a file is.
CHUNK_ROWS = 200_000


def latest_pushed_model(serving_dir: str) -> str:
    """The newest complete version the Pusher wrote to `serving_dir`.

    Raises:
      ConfigError: nothing was pushed there yet.
    """
    from pipeline.components import served_model  # loads TFX: inside the console session

    version = served_model.newest_version(serving_dir)
    if version is None:
        raise ConfigError(f"no model pushed to {serving_dir}: run `make run` (with the same "
                          "DATASET and OUTPUT_DIR) until a model is blessed and pushed")
    return os.path.join(serving_dir, version)


def input_files(data_dir: str) -> list[str]:
    """The CSV files to score, sorted.

    Raises:
      ConfigError: the folder is missing or holds no .csv file.
    """
    if not os.path.isdir(data_dir):
        raise ConfigError(f"DATA_DIR={data_dir!r}: no such folder; expected a folder of CSV "
                          "files with a header row")
    files = csv_check.csv_files(data_dir)
    if not files:
        raise ConfigError(f"DATA_DIR={data_dir!r} holds no *.csv or *.csv.gz file")
    return files


def file_delimiter(path: str, model_delimiter: str, columns: list[str]) -> str:
    """The delimiter `path` is written with: of the delimiters a spec may name, the one whose
    split of the header names the most of the model's input columns; the model's own when it
    is among the best (a file exported another way than the training data still scores).

    Raises:
      ConfigError: two delimiters other than the model's split the header equally well.
    """
    with csv_check.open_text(path) as f:
        first = f.readline().rstrip("\r\n")
    found = {d: len(set(csv_check.header_of(first, d)) & set(columns))
             for d in csv_check.DELIMITER_NAMES}
    best = max(found.values())
    winners = [d for d, n in found.items() if n == best]
    if best == 0 or model_delimiter in winners:
        return model_delimiter  # none fits: the missing columns are named where it is read
    if len(winners) > 1:
        names = " and ".join(f"{csv_check.DELIMITER_NAMES[d]} ({d!r})" for d in winners)
        raise ConfigError(f"{path}: its header splits into {best} of the model's columns on "
                          f"the {names} alike; say which delimiter the files use: "
                          f"make predict DELIMITER='<one of {', '.join(map(repr, winners))}>'")
    return winners[0]


def run_folder(output_dir: str) -> str:
    """A new <output_dir>/predictions/<UTC time>/ folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = os.path.join(output_dir, PREDICTIONS_DIR, stamp)
    folder, n = base, 1
    while os.path.exists(folder):
        n += 1
        folder = f"{base}-{n}"
    os.makedirs(folder)
    return folder


def predict_folder(model_dir: str, data_dir: str, output_dir: str,
                   delimiter: str | None = None, check: SkewCheck | None = None) -> dict:
    """Scores every CSV file of `data_dir`; returns the summary it writes. With `check`, the
    summary also holds each column's skew from the training rows and its unseen values.

    Each file is read (and its scored rows written) with its own delimiter (`file_delimiter`),
    or with `delimiter` when given; a .gz file is decompressed and a byte-order mark dropped.

    Raises:
      ConfigError: no CSV files, a file's delimiter is ambiguous, a file misses a required
        column, or a prediction column's name is taken.
    """
    import pandas as pd

    from trainer_module import tool_scoring

    files = input_files(data_dir)
    predictor = tool_scoring.load_predictor(model_dir)
    folder = run_folder(output_dir)
    summary = {"model": model_dir, "data_dir": data_dir, "output": folder,
               "prediction_columns": list(predictor.output_columns), "files": {}}
    started = time.perf_counter()
    rejected_path = os.path.join(folder, REJECTED_FILE)
    with open(rejected_path, "w", newline="", encoding="utf-8") as rejected_file:
        rejected = csv.writer(rejected_file)
        rejected.writerow(["file", "row", "reason", "cells"])
        for path in files:
            name = os.path.basename(path)
            scored_rows = rejected_rows = 0
            out_path = os.path.join(folder, name)
            sep = delimiter or file_delimiter(path, predictor.delimiter,
                                              [i.name for i in predictor.inputs])
            try:
                # utf-8-sig: a byte-order mark is no part of the first column's name.
                chunks = pd.read_csv(path, dtype=str, keep_default_na=False,
                                     encoding="utf-8-sig", chunksize=CHUNK_ROWS,
                                     sep=sep)
                for i, chunk in enumerate(chunks):
                    if check is not None:
                        check.add(chunk)
                    predictions, reasons = tool_scoring.score(predictor, chunk)
                    good = chunk.loc[predictions.index].join(predictions)
                    good.to_csv(out_path, mode="w" if i == 0 else "a", header=i == 0,
                                index=False, sep=sep)
                    scored_rows += len(good)
                    for index in reasons.index[reasons != ""]:
                        # Row numbers count the header as row 1, as a spreadsheet does.
                        rejected.writerow([name, int(index) + 2, reasons[index],
                                           json.dumps(chunk.loc[index].to_dict())])
                        rejected_rows += 1
            except (ValueError, pd.errors.ParserError) as e:
                raise ConfigError(f"{path}: {e}") from e
            summary["files"][name] = {"scored": scored_rows, "rejected": rejected_rows,
                                      "delimiter": sep}
    seconds = time.perf_counter() - started
    total = sum(f["scored"] + f["rejected"] for f in summary["files"].values())
    summary.update(rows=total, seconds=round(seconds, 3),
                   rows_per_second=round(total / seconds, 1) if seconds else None,
                   rejected=sum(f["rejected"] for f in summary["files"].values()))
    if check is not None:
        summary.update(check.summary())
    with open(os.path.join(folder, SUMMARY_FILE), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Score new CSV rows with the pushed model.")
    parser.add_argument("--data-dir", required=True, help="a folder of CSV files to score")
    parser.add_argument("--dataset", help="a name under schemas/ (default: taxi)")
    parser.add_argument("--output-dir", help="the pipeline's OUTPUT_DIR (default: output/); "
                        "predictions go under <it>/predictions/")
    parser.add_argument("--model-dir", help="score with this exported model folder instead of "
                        "the newest one pushed to the output dir")
    parser.add_argument("--delimiter", choices=list(csv_check.DELIMITER_NAMES),
                        help="the files' field delimiter (default: found from each header)")
    args = parser.parse_args(argv)
    try:
        config = for_output_dir(args.dataset, args.output_dir)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with console.session(config.output_dir, "predict") as log:
        try:
            model_dir = args.model_dir or latest_pushed_model(config.serving_model_dir)
            summary = predict_folder(model_dir, os.path.abspath(args.data_dir),
                                     config.output_dir, args.delimiter,
                                     SkewCheck(model_dir, config.spec, config.schema))
        except (ConfigError, FileNotFoundError) as e:
            console.error(f"error: {e}")
            return 2
        except Exception:
            console.show_tail(log)
            raise
        return _report(summary)


def _report(summary: dict) -> int:
    print(f"Scored {summary['rows'] - summary['rejected']} of {summary['rows']} rows with "
          f"{summary['model']} ({summary['rows_per_second']} rows/s) into {summary['output']}")
    if "skew" in summary:
        lines = skew.warnings(summary)
        if lines:
            console.error("warning: these rows differ from the training rows (summary.json "
                          "has every column's figures):\n  " + "\n  ".join(lines))
        elif not summary["skew"]["compared"]:
            print(f"Skew not compared: {summary['skew']['why']}")
    if summary["rejected"]:
        console.error(f"{summary['rejected']} rows did not fit the model's inputs and were not "
                      f"scored: see {os.path.join(summary['output'], REJECTED_FILE)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
