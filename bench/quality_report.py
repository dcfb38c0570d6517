"""The quality suite's tables: each dataset's row against the three trees, and the targets'
tally above them.

Kept apart from bench/quality.py, whose files make each result's fingerprint: how a finished
result is shown can change without running the suite again. The targets themselves are
bench/targets.py's.
"""

import json
import math
import os
import re

from bench.targets import (
    CLASSIFICATION_GAP,
    RMSE_RATIO,
    TARGET_METRIC,
    TRAINER_SECONDS_FLOOR,
    TREE_TIME_RATIO,
    TREES,
    better,
)

BLOCK_BEGIN, BLOCK_END = "<!-- quality:begin -->", "<!-- quality:end -->"
# The suite's cost target: its wall time at most COST_RATIO times that of the last full run
# that compared with HistGradientBoosting alone (one seed, 2026-11-28, a 2-core AMD EPYC). That
# run's wall time was not recorded: it began at 01:09 and its table was committed at 01:52, so
# it took at most ANCHOR_MINUTES.
COST_RATIO = 2
ANCHOR_MINUTES = 43


def _figure(value: dict | None, metric: str) -> str:
    """A mean over the seeds, ± its spread when there were several."""
    if value is None:
        return "—"
    digits = 2 if metric == "rmse" and abs(value["mean"]) >= 100 else 4
    text = f"{value['mean']:.{digits}f}"
    return text + (f" ± {value['spread']:.{digits}f}" if value["runs"] > 1 else "")


def kept_tree_seconds(entry: dict) -> float:
    """The fit time of the dataset's trees when they were kept from an earlier run on the
    same rows (their seconds per seed, times the seeds), or 0 when they ran in its run."""
    if "trees_kept" not in entry:
        return 0.0
    seeds = max(row["trees"][TREES[0]]["runs"] for row in entry["metrics"])
    return seeds * sum(entry["tree_seconds"].values())


def markdown(compared: list[dict]) -> str:
    lines = ["| dataset | source | rows (train / eval) | task | metric | this pipeline "
             "(Evaluator) | " + " | ".join(TREES) + " | target (best tree) | met | "
             "Trainer seconds per run (limit) | component seconds (first run) / each tree's fit "
             "seconds | wall seconds (all runs) | epochs (best / run / budget, refit) |",
             "|---|---|---:|---|---|---:|" + "---:|" * len(TREES) + "---|---|---|---|---:|---|"]
    for entry in compared:
        # The dataset's whole time: `make dataset`, every seed's DAG and the trees, as the
        # suite's store keeps it (`make bench`'s shipped rows, made outside it, have none).
        wall = f"{entry['seconds']:,.0f}" if "seconds" in entry else "—"
        if kept_tree_seconds(entry):
            wall += f" + {kept_tree_seconds(entry):,.0f} of kept tree fits"
        if "failed" in entry:
            # The error as make dataset printed it, its paths from the bench's work dir on.
            failed = re.sub(r"'[^']*/(quality_suite/[^']*)'", r"'\1'", entry["failed"])
            lines.append(f"| {entry['dataset']} | {entry['source']} | — | {entry['task']} | "
                         f"{TARGET_METRIC[entry['task']]} | — | " + "— | " * len(TREES)
                         + f"— | **no**: {failed.replace('|', '/')} | — | — | {wall} | — |")
            continue
        training = entry.get("training")
        epochs = (f"{training['best_epoch'] or 'last'} / {training['epochs_run']} / "
                  f"{training['epochs_budget']}" if training else "—")
        if training and training.get("refit_epochs"):
            epochs += f", refit {training['refit_epochs']}"
        if training and training.get("still_learning"):
            # The budget ended while the validation loss was still falling: a defect to see.
            epochs += ", **still learning**"
        seconds = (f"{entry['component_seconds']:.0f} / "
                   + ", ".join(f"{entry['tree_seconds'][t]:.1f}" for t in TREES))
        for row in entry["metrics"]:
            if row["met"] is None:
                target, met = "—", "—"
            else:
                target = (f"≤ {RMSE_RATIO:g}× {row['best']}" if row["metric"] == "rmse"
                          else f"≥ {row['best']} − {CLASSIFICATION_GAP:g}")
                met = "yes" if row["met"] else "**no**"
            trees_text = " | ".join(_figure(row["trees"][t], row["metric"]) for t in TREES)
            lines.append(f"| {entry['dataset']} | {entry.get('source', '')} | "
                         f"{entry['train_rows']:,} / {entry['eval_rows']:,} | {entry['task']} | "
                         f"{row['metric']} | {_figure(row['pipeline'], row['metric'])} | "
                         f"{trees_text} | {target} | {met} | {trainer_text(entry)} | {seconds} | "
                         f"{wall} | {epochs} |")
    return "\n".join(lines)


def trainer_text(entry: dict) -> str:
    """The Trainer's mean seconds per run (± their spread) and whether they are within their
    limit beside the best tree's fit; "—" for a result kept before the Trainer was timed."""
    trainer = entry.get("trainer")
    if not trainer:
        return "—"
    text = f"{trainer['mean']:.0f}" + (f" ± {trainer['spread']:.0f}" if trainer["runs"] > 1
                                       else "")
    return f"{text} (≤ {trainer['limit']:.0f}): {'yes' if trainer['met'] else '**no**'}"


def _beats(row: dict) -> bool:
    """The pipeline's mean is better than the best tree's on this row's metric."""
    ours = row["pipeline"]
    return ours is not None and better(row["metric"], ours["mean"],
                                       row["trees"][row["best"]]["mean"])


def summary(compared: list[dict], stamp: dict, seconds: float) -> str:
    """The targets' tally over the datasets (a dataset that failed misses them all), the
    misses with their numbers, and when, where and how long the runs took (`seconds`: each
    dataset's wall time, summed, whichever run finished it); the cost target is on that time
    with the tree fits the runs reused from earlier ones added, as a run from scratch takes."""
    targets = {e["dataset"]: next((r for r in e.get("metrics", ()) if r["met"] is not None),
                                  None) for e in compared}
    met = [d for d, row in targets.items() if row and row["met"]]
    beaten = [d for d, row in targets.items() if row and _beats(row)]
    half = math.ceil(len(targets) / 2)
    misses = []
    for dataset, row in targets.items():
        if row is None:
            misses.append(f"{dataset} (no run)")
        elif not row["met"]:
            ours, best = row["pipeline"], row["trees"][row["best"]]["mean"]
            misses.append(f"{dataset} ({row['metric']} "
                          f"{'—' if ours is None else _figure(ours, row['metric'])} against "
                          f"{row['best']}'s {best:.4f})")
    # Each kept dataset names the machine it ran on; a result without one ran in this process.
    machines = dict.fromkeys(f"{m['cpu']}, {m['cores']} cores" for m in (
        e.get("machine") or stamp["machine"] for e in compared))
    seeds = max((row["pipeline"]["runs"] for row in targets.values()
                 if row and row["pipeline"]), default=0)
    finished = sorted(e["finished"] for e in compared if "finished" in e)
    when = (f"its datasets finished from {finished[0]} to {finished[-1]}" if finished
            else f"measured {stamp['measured_at']}")
    # The cost from scratch: the runs' wall time and that of the tree fits they reused.
    kept = [e for e in compared if "trees_kept" in e]
    kept_seconds = sum(kept_tree_seconds(e) for e in compared)
    scratch = seconds + kept_seconds
    longest = sorted((e for e in compared if "seconds" in e),
                     key=lambda e: -(e["seconds"] + kept_tree_seconds(e)))[:3]
    return "\n".join([
        f"`make bench-quality` on {' and '.join(machines)}, {when}: "
        f"{seconds / 60:.0f} min of runs ({len(compared)} datasets, {seeds} seeds each)"
        + (f", and {kept_seconds / 60:.0f} min of tree fits on the same rows kept from earlier "
           f"runs ({len(kept)} datasets)" if kept else "") + ".",
        "",
        f"- Target against the best tree met on {len(met)} of {len(targets)} datasets"
        + (f"; missed on {', '.join(misses)}." if misses else "."),
        f"- Better than the best tree on {len(beaten)} of {len(targets)} (target: at least "
        f"{half}){': ' + ', '.join(beaten) if beaten else ''}.",
        _time_tally(compared),
        f"- Wall time {scratch / 60:.0f} min"
        + (" from scratch (the kept tree fits included)" if kept else "")
        + f", against at most {COST_RATIO * ANCHOR_MINUTES} min "
        f"({COST_RATIO}× the last HistGradientBoosting-alone run's, at most {ANCHOR_MINUTES} "
        f"min, one seed, on a 2-core AMD EPYC): "
        f"{'met' if scratch / 60 <= COST_RATIO * ANCHOR_MINUTES else 'missed'}"
        + ("; the longest: " + ", ".join(
            f"{e['dataset']} {(e['seconds'] + kept_tree_seconds(e)) / 60:.0f} min"
            for e in longest) if longest else "") + ".",
    ])


def _time_tally(compared: list[dict]) -> str:
    """The time target's line: on how many datasets each run's Trainer kept within its limit
    (a dataset that failed, or a result kept before the Trainer was timed, misses it)."""
    timed = {e["dataset"]: e.get("trainer") for e in compared}
    within = [d for d, t in timed.items() if t and t["met"]]
    over = [f"{d} ({t['mean']:.0f} s against {t['limit']:.0f})" if t else f"{d} (not timed)"
            for d, t in timed.items() if not (t and t["met"])]
    return (f"- Trainer time per run within its limit (at most {TRAINER_SECONDS_FLOOR:.0f} s or "
            f"{TREE_TIME_RATIO:g}× the best tree's fit, whichever is more) on {len(within)} of "
            f"{len(timed)} datasets" + (f"; over on {', '.join(over)}." if over else "."))


def publish(compared: list[dict], results_dir: str, doc: str | None,
            name: str = "quality", stamp: dict | None = None,
            seconds: float | None = None) -> None:
    """Writes the results (`name`.json, `name`.md) and, given `doc`, its block; with the
    run's `stamp` and wall `seconds`, the targets' tally above the table."""
    from bench import tables

    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(compared, f, indent=2)
    table = markdown(compared)
    if stamp is not None and seconds is not None:
        table = summary(compared, stamp, seconds) + "\n\n" + table
    with open(os.path.join(results_dir, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    if doc:
        tables.replace_block(doc, BLOCK_BEGIN, BLOCK_END, table)
