"""What a daily run costs: a new span's run against a from-scratch run over the same window.

    python -m bench.span_cost

The shipped taxi rows become three spans of 5,000 rows; the shipped taxi spec (with its drift
thresholds) gets a window of two spans. "Daily": spans 1 and 2 were run before, and the run of
span 3 reads span 2 from the store. "From scratch": a new output dir, so the run of span 3 first
reads span 2 (CsvExampleGen and StatisticsGen alone), then runs the DAG. Both train on spans
2 and 3 with the spec's budget. Component time is ML Metadata's (each execution's registered
to last update, summed over the runs), wall time the runner's process. Writes
bench/results/span-cost.md and prints it.
"""

import csv
import datetime
import os
import shutil
import subprocess
import sys
import time

from bench.paths import RESULTS_DIR, WORK_DIR
from pipeline import REPO_ROOT, datasets
from pipeline.runs.run_summary import latest_run, node_id_of, open_store

ROWS_PER_SPAN = 5000
SPANS = 3
WINDOW = 2


def _data(root: str) -> None:
    with open(os.path.join(REPO_ROOT, "data", "taxi", "taxi.csv"), newline="",
              encoding="utf-8") as f:
        rows = list(csv.reader(f))
    for span in range(1, SPANS + 1):
        folder = os.path.join(root, f"span-{span}")
        os.makedirs(folder)
        with open(os.path.join(folder, "trips.csv"), "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([rows[0], *rows[1 + (span - 1) * ROWS_PER_SPAN:
                                                    1 + span * ROWS_PER_SPAN]])


def _spec(folder: str) -> None:
    shutil.copytree(os.path.join(REPO_ROOT, "schemas", "taxi"), folder,
                    ignore=shutil.ignore_patterns("inferred_schema.pbtxt"))
    path = os.path.join(folder, "spec.toml")
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("[training]\n", f"[training]\nwindow_spans = {WINDOW}\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _run(data: str, spec: str, output: str, span: int) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "pipeline", "local_runner.py"),
         "--data-dir", data, "--output-dir", output],
        env={**os.environ, "DATASET": spec, "SPAN": str(span), "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"span {span} run failed:\n{result.stdout[-2000:]}"
                           f"{result.stderr[-2000:]}")
    return time.perf_counter() - started


def _component_seconds(output: str, since_run: int) -> tuple[float, dict[str, float]]:
    """Component seconds of the runs after the first `since_run`, and per node."""
    store = open_store(os.path.join(output, "metadata", "metadata.db"))
    runs = sorted(store.get_contexts_by_type("pipeline_run"), key=lambda c: c.id)[since_run:]
    per_node: dict[str, float] = {}
    for run in runs:
        for e in store.get_executions_by_context(run.id):
            node = node_id_of(store, e)
            per_node[node] = per_node.get(node, 0.0) + (
                e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000
    return sum(per_node.values()), per_node


def main() -> int:
    work = os.path.join(WORK_DIR, "span-cost")
    shutil.rmtree(work, ignore_errors=True)
    data, spec = os.path.join(work, "data"), os.path.join(work, "taxi-window")
    _data(data)
    _spec(spec)
    daily, scratch = os.path.join(work, "daily"), os.path.join(work, "scratch")
    for span in (1, 2):
        _run(data, spec, daily, span)
    daily_wall = _run(data, spec, daily, 3)
    daily_total, daily_nodes = _component_seconds(daily, 2)
    scratch_wall = _run(data, spec, scratch, 3)
    scratch_total, scratch_nodes = _component_seconds(scratch, 0)
    summary = latest_run(os.path.join(daily, "metadata", "metadata.db"),
                         datasets.pipeline_name(spec))
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = [f"Measured {stamp} by `python -m bench.span_cost` on {os.cpu_count()} CPUs: "
             f"taxi, {SPANS} spans of {ROWS_PER_SPAN:,} rows, window {WINDOW}, the spec's "
             "budget, its drift thresholds.", "",
             "| | daily run (span 3; span 2 from the store) | from scratch (spans 2 and 3) |",
             "|---|---:|---:|",
             f"| wall time | {daily_wall:.1f} s | {scratch_wall:.1f} s |",
             f"| component time | {daily_total:.1f} s | {scratch_total:.1f} s |"]
    lines += [f"| {node} | {daily_nodes.get(node, 0):.1f} s | {scratch_nodes[node]:.1f} s |"
              for node in sorted(scratch_nodes, key=lambda n: -scratch_nodes[n])]
    lines += ["", f"Daily run outcome: {'succeeded' if summary.succeeded else 'failed'}."]
    text = "\n".join(lines) + "\n"
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, "span-cost.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
