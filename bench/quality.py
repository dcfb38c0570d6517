"""Model quality against a strong, simple baseline on exactly the Evaluator's rows.

scikit-learn's HistGradientBoosting trains on the run's own train split (CsvExampleGen's
output) and is scored on its eval split, the rows the Evaluator scored the pipeline's model on:
every column the spec gives a role, numbers as they are (gaps as NaN) and strings as
categories, the label made by the spec's rule. Its accuracy and AUC (classification) or RMSE
(regression) stand beside the Evaluator's.
"""

import glob
import os

import numpy as np

from pipeline import names
from pipeline.runs import eval_results, run_summary
from trainer_module import tasks
from trainer_module.dataset_spec import DatasetSpec

# Targets: within 0.01 of the baseline's accuracy / AUC, RMSE at most 1.1× the baseline's.
CLASSIFICATION_GAP = 0.01
RMSE_RATIO = 1.1


def read_split(examples_uri: str, split: str) -> list[dict[str, object]]:
    """Raw rows of one split of CsvExampleGen's output: column → value (None when empty)."""
    import tensorflow as tf

    rows = []
    files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*")))
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        row = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            values = list(getattr(feature, kind).value) if kind else []
            value = values[0] if values else None
            row[name] = value.decode("utf-8") if isinstance(value, bytes) else value
        rows.append(row)
    return rows


def _matrix(rows: list[dict], columns: list[str], categories: dict[str, list[str]]) -> np.ndarray:
    out = np.full((len(rows), len(columns)), np.nan)
    for j, column in enumerate(columns):
        known = categories.get(column)
        for i, row in enumerate(rows):
            value = row.get(column)
            if value is None:
                continue
            if known is not None:
                value = known.index(value) if value in known else np.nan
            out[i, j] = value
    return out


def baseline(examples_uri: str, spec: DatasetSpec, seed: int = 0) -> dict[str, float]:
    """HistGradientBoosting trained on the train split, scored on the eval split."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score

    train, evaluation = read_split(examples_uri, "train"), read_split(examples_uri, "eval")
    columns = sorted({f.column for f in spec.features if f.role != "ignore"})
    strings = [c for c in columns if any(isinstance(r.get(c), str) for r in train)]
    # Integer and string categories of the spec are categories for the trees too.
    categorical = set(strings) | {f.column for f in spec.features
                                  if f.role in ("integer", "vocabulary", "hashed")}
    categories = {c: sorted({r[c] for r in train if r.get(c) is not None}, key=str)
                  for c in strings}
    train = [r for r in train if spec.label_of(r) is not None]
    evaluation = [r for r in evaluation if spec.label_of(r) is not None]
    x_train, x_eval = (_matrix(rows, columns, categories) for rows in (train, evaluation))
    y_train = np.array([spec.label_of(r) for r in train])
    y_eval = np.array([spec.label_of(r) for r in evaluation])
    # Trees take at most 255 categories per column: wider ones stay ordinal codes.
    def small(j: int) -> bool:
        present = x_train[~np.isnan(x_train[:, j]), j]
        return present.size == 0 or (present.min() >= 0 and present.max() < 255)

    mask = [c in categorical and (len(categories[c]) <= 255 if c in categories else small(j))
            for j, c in enumerate(columns)]
    common = {"categorical_features": np.array(mask), "random_state": seed}
    result: dict[str, float] = {"train_rows": len(train), "eval_rows": len(evaluation)}
    if spec.task == tasks.REGRESSION:
        model = HistGradientBoostingRegressor(**common).fit(x_train, y_train)
        result["rmse"] = float(np.sqrt(mean_squared_error(y_eval, model.predict(x_eval))))
        return result
    model = HistGradientBoostingClassifier(**common).fit(x_train, y_train)
    result["accuracy"] = float(accuracy_score(y_eval, model.predict(x_eval)))
    if spec.task == tasks.BINARY:
        result["auc"] = float(roc_auc_score(y_eval, model.predict_proba(x_eval)[:, 1]))
    return result


# The Evaluator's name for each compared metric.
EVALUATOR_NAMES = {
    tasks.BINARY: {"accuracy": "binary_accuracy", "auc": "auc"},
    tasks.MULTICLASS: {"accuracy": "sparse_categorical_accuracy"},
    tasks.REGRESSION: {"rmse": "root_mean_squared_error"},
}


def compare(metadata_path: str, pipeline_name: str, spec: DatasetSpec) -> dict:
    """The baseline beside the Evaluator's metrics of the run's latest evaluation, and each
    target met or missed."""
    summary = run_summary.latest_run(metadata_path, pipeline_name)
    examples = summary.output(names.CSV_EXAMPLE_GEN, names.EXAMPLES) if summary else None
    if examples is None or summary.evaluation_uri is None:
        raise RuntimeError(f"no evaluated run of {pipeline_name!r} in {metadata_path}")
    ours = eval_results.overall_metrics(summary.evaluation_uri)
    reference = baseline(examples.uri, spec)
    rows = []
    for metric, evaluator_name in EVALUATOR_NAMES[spec.task].items():
        value, base = ours.get(evaluator_name), reference[metric]
        met = (value is not None and (value <= RMSE_RATIO * base if metric == "rmse"
                                      else value >= base - CLASSIFICATION_GAP))
        rows.append({"metric": metric, "pipeline": value, "baseline": base, "met": met})
    return {"dataset": spec.name, "task": spec.task, "eval_rows": reference["eval_rows"],
            "train_rows": reference["train_rows"], "metrics": rows}


SHIPPED_DATASETS = ("taxi", "penguins")
BLOCK_BEGIN, BLOCK_END = "<!-- quality:begin -->", "<!-- quality:end -->"


def run_shipped(work_dir: str, reuse: dict[str, str] | None = None) -> list[dict]:
    """Each shipped dataset's DAG with its spec's own steps (or a finished run's output dir
    from `reuse`), then the baseline on the same rows."""
    from bench import dag
    from pipeline.pipeline_config import PipelineConfig

    compared = []
    for dataset in SHIPPED_DATASETS:
        config = PipelineConfig(dataset=dataset)
        output = (reuse or {}).get(dataset)
        if output is None:
            output = os.path.join(work_dir, f"quality_{dataset}")
            print(f"[bench] {dataset}: this project's DAG → {output}", flush=True)
            dag.run_ours(config.data_dir, output, 0, None, dataset)
        metadata = os.path.join(output, "metadata", "metadata.db")
        compared.append(compare(metadata, config.pipeline_name, config.dataset_spec()))
    return compared


def markdown(compared: list[dict]) -> str:
    lines = ["| dataset (task) | metric | this pipeline (Evaluator) | HistGradientBoosting | "
             "target | met |", "|---|---|---:|---:|---|---|"]
    for entry in compared:
        for row in entry["metrics"]:
            target = (f"≤ {RMSE_RATIO:g}× the baseline" if row["metric"] == "rmse"
                      else f"≥ baseline − {CLASSIFICATION_GAP:g}")
            value = "—" if row["pipeline"] is None else f"{row['pipeline']:.4f}"
            lines.append(f"| {entry['dataset']} ({entry['task']}, {entry['eval_rows']:,} eval "
                         f"rows) | {row['metric']} | {value} | {row['baseline']:.4f} | "
                         f"{target} | {'yes' if row['met'] else '**no**'} |")
    return "\n".join(lines)


def publish(compared: list[dict], results_dir: str, doc: str | None) -> None:
    import json

    from bench import report

    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, "quality.json"), "w", encoding="utf-8") as f:
        json.dump(compared, f, indent=2)
    table = markdown(compared)
    with open(os.path.join(results_dir, "quality.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    if doc:
        report.replace_block(doc, BLOCK_BEGIN, BLOCK_END, table)


def main(argv: list[str]) -> int:
    import argparse

    from bench import paths

    parser = argparse.ArgumentParser(description="Model quality of each shipped dataset "
                                     "against HistGradientBoosting on the same rows.")
    parser.add_argument("--results-dir", default=paths.RESULTS_DIR)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    compared = run_shipped(paths.WORK_DIR)
    publish(compared, args.results_dir, paths.BENCHMARKS_DOC if args.update_docs else None)
    print(markdown(compared))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
