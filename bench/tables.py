"""Bench results: one JSON record, a Markdown table and a PNG chart, stamped with the machine
and the library versions they were measured with."""

import datetime
import importlib.metadata
import json
import os
import platform
import re
import textwrap

from bench import dag_runs

LIBRARIES = ("tfx", "tensorflow", "tensorflow-transform", "tfx-bsl", "apache-beam",
             "tensorflow-model-analysis", "ml-metadata", "tf-keras")
# One color per DAG in every chart panel, so each DAG reads the same everywhere; grey for what
# is not a run (the raw read).
PROJECT_COLOR = "#1f6feb"
TEMPLATE_COLOR = "#d1242f"
TUNED_COLOR = "#bf8700"
REFERENCE_COLOR = "#8c959f"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory_gib, 1),
            "os": platform.platform(), "python": platform.python_version()}


def versions() -> dict:
    return {name: importlib.metadata.version(name) for name in LIBRARIES}


def stamp() -> dict:
    return {"measured_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine(), "versions": versions()}


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"


def _seconds(value: float | None) -> str:
    return "— (not in its DAG)" if value is None else f"{value:.1f}"


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "—"}[value]


def _target(ok: bool | None) -> str:
    return "" if ok is None else (" ✅" if ok else " ❌")


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


PROJECT, TUNED, TEMPLATE = dag_runs.PROJECT, dag_runs.TUNED, dag_runs.TEMPLATE
# The DAGs of a round, as the tables name them.
DAG_NAMES = {PROJECT: "this project", TUNED: "tuned template",
             TEMPLATE: "TFX template (defaults)"}
COLORS = {PROJECT: PROJECT_COLOR, TUNED: TUNED_COLOR, TEMPLATE: TEMPLATE_COLOR}
# Same stages side by side (template node → this project's): the template infers a schema
# (SchemaGen) where this project imports its curated one (ImportSchemaGen); its DAG has an
# ExampleValidator only with an imported schema, and no AnomalyGate.
STAGES = {"CsvExampleGen": "CsvExampleGen", "StatisticsGen": "StatisticsGen",
          "SchemaGen": "ImportSchemaGen", "ExampleValidator": "ExampleValidator",
          "Transform": "Transform", "Trainer": "Trainer", "Evaluator": "Evaluator",
          "Pusher": "Pusher"}
# The Evaluator's eval accuracy on the taxi data by scale in the bench of 2026-11-24, as it was
# reported, to three decimals: no later run may fall below it at that precision.
ACCURACY_BEFORE = {1: 0.893, 10: 0.888, 100: 0.871}
ROWS_PER_S_TARGET = 5000


def _node(who: str, stage: str) -> str:
    return STAGES[stage] if who == PROJECT else stage


def dags(scale: dict) -> list[str]:
    """The DAGs that ran at a scale, in DAG_NAMES' order."""
    ran = scale["rounds"][0]["runs"]
    return [who for who in DAG_NAMES if who in ran]


def value(scale: dict, who: str, key: str) -> float | None:
    """The median over the scale's rounds of one run figure of one DAG, or None where a round
    has no value for it (an accuracy, for a task without one)."""
    values = [r["runs"][who][key] for r in scale["rounds"]]
    return None if None in values else median(values)


def stage_seconds(scale: dict, who: str, stage: str) -> float | None:
    """The median over the rounds of one stage's seconds; None: not in that DAG."""
    values = [r["runs"][who]["seconds"][_node(who, stage)] for r in scale["rounds"]
              if _node(who, stage) in r["runs"][who]["seconds"]]
    return median(values) if values else None


def stage_peak_mb(scale: dict, who: str, stage: str) -> float | None:
    """The highest peak memory of one stage over the rounds; None: not in that DAG."""
    values = [r["runs"][who]["peak_memory_mb"][_node(who, stage)] for r in scale["rounds"]
              if _node(who, stage) in r["runs"][who]["peak_memory_mb"]]
    return max(values) if values else None


def paired(scale: dict, key: str, theirs: str) -> tuple[float, list[float]]:
    """The median of the rounds' ratios this project ÷ `theirs` of one run figure (never the
    ratio of the medians), and every round's ratio."""
    ratios = [r["runs"][PROJECT][key] / r["runs"][theirs][key] for r in scale["rounds"]]
    return median(ratios), ratios


def _ratio_text(scale: dict, key: str, theirs: str) -> tuple[str, float]:
    ratio, ratios = paired(scale, key, theirs)
    return (f"median {ratio:.2f}× over {len(ratios)} rounds (range {min(ratios):.2f}–"
            f"{max(ratios):.2f}; ours {value(scale, PROJECT, key):.1f} s, "
            f"{DAG_NAMES[theirs]} {value(scale, theirs, key):.1f} s)", ratio)


def targets(result: dict) -> list[tuple[str, str, bool | None]]:
    """Each speed target of the bench: (target, measured, met)."""
    out: list[tuple[str, str, bool | None]] = []
    for scale in result.get("scale", []):
        label, ran = scale["label"], dags(scale)
        limits = ([("component_seconds", TEMPLATE, 0.5), ("component_seconds", TUNED, 0.6),
                   ("wall_seconds", TEMPLATE, 0.5)] if scale["times"] == 1
                  else [("component_seconds", TUNED, 0.6)])
        for key, theirs, limit in limits:
            if theirs in ran:
                what = "component time" if key == "component_seconds" else "whole-process wall"
                text, ratio = _ratio_text(scale, key, theirs)
                out.append((f"{label}: {what} ≤ {limit}× the {DAG_NAMES[theirs]}'s", text,
                            ratio <= limit))
        if scale["times"] >= 100:
            rate = scale["rows"] / value(scale, PROJECT, "component_seconds")
            out.append((f"{label}: ≥ {ROWS_PER_S_TARGET:,} rows/s (rows ÷ component seconds)",
                        f"{rate:,.0f} rows/s", rate >= ROWS_PER_S_TARGET))
            if TEMPLATE in ran:
                over = []
                for stage in STAGES:
                    ours, theirs = (stage_peak_mb(scale, PROJECT, stage),
                                    stage_peak_mb(scale, TEMPLATE, stage))
                    if ours is not None and theirs is not None and ours > theirs:
                        over.append(f"{_node(PROJECT, stage)} {ours:,.0f} vs {theirs:,.0f} MB")
                out.append((f"{label}: peak memory of every component ≤ the TFX template's "
                            "(defaults)", "; ".join(over) or "every component at or below",
                            not over))
        before = ACCURACY_BEFORE.get(scale["times"])
        accuracy = value(scale, PROJECT, "eval_accuracy")
        if before is not None and accuracy is not None:
            out.append((f"{label}: eval accuracy ≥ {before:.3f} at three decimals (the bench of "
                        "2026-11-24)",
                        f"{accuracy:.4f}", round(accuracy, 3) >= before))
    if "input" in result:
        i = result["input"]
        raw = i["raw_read"]["examples_per_s"]
        for key, what, limit in (("project_cold", "cold input epoch", 0.9),
                                 ("project_cached", "cached input epochs", 2.0)):
            rate = i[key]["examples_per_s"]
            out.append((f"{what} ≥ {limit:g}× the parallel raw read",
                        f"{rate / raw:.2f}× ({_rate(rate)} vs {_rate(raw)} examples/s)",
                        rate >= limit * raw))
    edit = result.get("edit_rerun")
    if edit:
        states = edit["rerun"]["states"]
        ran = [n for n, state in states.items() if state == "COMPLETE"]
        ok = (states.get("Transform") == "CACHED" and states.get("Trainer") == "COMPLETE")
        out.append((f"editing {edit['edited']} re-runs the Trainer onward, not Transform",
                    f"ran again: {', '.join(ran)}; {edit['rerun']['wall_seconds']:.1f} s wall "
                    f"vs {edit['full']['wall_seconds']:.1f} s for the full run", ok))
    return out


def short_path(arg: str) -> str:
    """A Beam argument with a path value shown by its file name (the machine's paths vary)."""
    flag, _, path = arg.partition("=")
    return f"{flag}={os.path.basename(path)}" if os.sep in path else arg


def _model_inputs(result: dict) -> str:
    """The settings row of the raw columns each DAG's model reads (the model and its
    transforms are each DAG's own)."""
    columns = result.get("model_columns")
    if columns is None:  # a bench from before the columns were recorded
        return ("| model and features | this project's (from its dataset spec) | the "
                "template's | the template's |")
    cells = []
    for who in DAG_NAMES:
        if who not in columns:
            cells.append("—")
        else:
            count = f"{len(columns[who])} raw column{'' if len(columns[who]) == 1 else 's'}"
            cells.append(f"{count}, from its dataset spec" if who == PROJECT else
                         f"{count} ({', '.join(f'`{c}`' for c in columns[who])}), from its "
                         "models/features.py")
    return "| model inputs (each DAG's own model and transforms) | " + " | ".join(cells) + " |"


# What each of the Trainer's lr_decay settings does over the train steps, in the settings row.
LR_DECAY_TEXT = {"cosine": "cosine decay to 0 at the last step", "none": "constant"}


def _learning_rates(result: dict) -> list[str]:
    """The settings row of each DAG's Adam rate over its train steps; none for a bench from
    before the rates were recorded."""
    rates = result.get("learning_rate")
    if rates is None:
        return []
    cells = ["—" if who not in rates else
             f"Adam {rates[who]['rate']:g}, {LR_DECAY_TEXT[rates[who]['decay']]}"
             for who in DAG_NAMES]
    return ["| learning rate | " + " | ".join(cells) + " |"]


def _settings(result: dict) -> list[str]:
    """What differs between the three DAGs, with the values this bench ran."""
    lines = ["**What differs between the DAGs** (the same data and training steps at every "
             "scale):", "", "| setting | " + " | ".join(DAG_NAMES.values()) + " |",
             "|---|---|---|---|"]
    for scale in result["scale"]:
        args = " ".join(f"`{short_path(a)}`" for a in scale["beam_args"])
        lines.append(f"| Beam arguments, {scale['label']} | {args} | the same | none "
                     "(DirectRunner's defaults: in memory, 1 worker) |")
    first = result["scale"][0]["rounds"][0]["runs"]
    lines += [
        "| CsvExampleGen's executor | this project's (each row encoded once; on the local "
        "runner each split shuffled through scratch files) | TFX's (a Beam reshuffle, which "
        "the local runner holds in memory) | TFX's |",
        "| Transform's own statistics | off (`disable_statistics=True`) | off | computed |",
        "| schema | curated, imported (ImportSchemaGen, ExampleValidator, AnomalyGate) | "
        "inferred (SchemaGen) | inferred (SchemaGen) |",
        "| training batch | " + " | ".join(str(first[w]["train_batch"]) if w in first else "—"
                                           for w in DAG_NAMES) + " |",
        _model_inputs(result),
        *_learning_rates(result),
        "| Evaluator | this project's (accuracy, AUC, calibration; overall and by payment "
        "type) | the template's metrics and slices | the same |", ""]
    return lines


def _scale_table(result: dict) -> list[str]:
    lines = ["**Scale**: every DAG from scratch in each round, the order rotated each round; "
             "component seconds from each run's MLMD, wall seconds of the whole process; "
             "medians over the rounds, ratios the median of the rounds' own ratios (range in "
             "brackets); eval accuracy is the Evaluator's on the eval split:", "",
             "| data | rows | train steps | rounds | component seconds (ours / tuned / "
             "defaults) | ours ÷ tuned | ours ÷ defaults | wall seconds (ours / tuned / "
             "defaults) | rows/s (ours) | eval accuracy (ours / tuned / defaults) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for scale in result["scale"]:
        ran = dags(scale)

        def cells(key: str, fmt: str, ran: list[str] = ran, scale: dict = scale) -> str:
            medians = [value(scale, w, key) if w in ran else None for w in DAG_NAMES]
            return " / ".join("—" if m is None else fmt.format(m) for m in medians)

        def ratio(theirs: str, ran: list[str] = ran, scale: dict = scale) -> str:
            if theirs not in ran:
                return "—"
            mid, ratios = paired(scale, "component_seconds", theirs)
            return f"{mid:.2f} ({min(ratios):.2f}–{max(ratios):.2f})"

        rate = scale["rows"] / value(scale, PROJECT, "component_seconds")
        lines.append(f"| {scale['label']} | {scale['rows']:,} | {scale['train_steps']:,} | "
                     f"{len(scale['rounds'])} | {cells('component_seconds', '{:.1f}')} | "
                     f"{ratio(TUNED)} | {ratio(TEMPLATE)} | "
                     f"{cells('wall_seconds', '{:.1f}')} | {rate:,.0f} | "
                     f"{cells('eval_accuracy', '{:.4f}')} |")
    return lines + [""]


def _stage_tables(result: dict) -> list[str]:
    lines = []
    for scale in result["scale"]:
        ran = dags(scale)
        lines += [f"**Per component, {scale['label']}** (median seconds over the rounds; peak "
                  "memory in MB, the highest over the rounds):", "",
                  "| stage | " + " | ".join(f"{DAG_NAMES[w]} s" for w in ran) + " | "
                  + " | ".join(f"{DAG_NAMES[w]} MB" for w in ran) + " |",
                  "|---|" + "---:|" * (2 * len(ran))]
        for stage in STAGES:
            names = " / ".join(dict.fromkeys((stage, STAGES[stage])))
            seconds = [stage_seconds(scale, w, stage) for w in ran]
            peaks = [stage_peak_mb(scale, w, stage) for w in ran]
            lines.append(f"| {names} | " + " | ".join(_seconds(v) for v in seconds) + " | "
                         + " | ".join("—" if v is None else f"{v:,.0f}" for v in peaks) + " |")
        lines.append("")
    return lines


def markdown(result: dict) -> str:
    m, v = result["machine"], result["versions"]
    lines = [
        f"Measured {result['measured_at']} on {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB; " + ", ".join(f"{k} {v[k]}" for k in v) + "."
        + (f" The bench took {result['bench_seconds'] / 60:.0f} min."
           if "bench_seconds" in result else ""),
        "",
    ]
    speed = targets(result)
    if speed:
        lines += ["**Targets**:", "", "| target | measured | met |", "|---|---|---|"]
        lines += [f"| {name} | {measured} | {_yes_no(ok)} |" for name, measured, ok in speed]
        lines.append("")
    if "scale" in result:
        if len(dags(result["scale"][0])) > 1:
            lines += _settings(result)
        lines += _scale_table(result) + _stage_tables(result)
        lines += ["Memory is each run's process tree (the runner and any Beam workers), sampled "
                  "as its summed proportional set size every "
                  f"{dag_runs.SAMPLE_INTERVAL_S:g} s, or further apart where one sample takes "
                  "longer, so that sampling never takes more than "
                  f"{dag_runs.SAMPLE_SHARE:.0%} of a core; a page shared between processes "
                  "counts once. Components run one after another in one process, so a peak "
                  "includes what earlier ones left.", ""]
        memory = [s for s in result["scale"] if s.get("trainer_memory")]
        if memory:
            lines += ["**Trainer memory**: this project's Trainer replayed alone in a fresh "
                      "process on its last round's Transform output (peak RSS), with the input "
                      "cache as `cache='auto'` decides it, and with `cache='none'` (streamed):",
                      "", "| data | peak RSS, cache auto | auto's decision | peak RSS, cache "
                      "none |", "|---|---:|---|---:|"]
            for scale in memory:
                auto, none = scale["trainer_memory"]["auto"], scale["trainer_memory"]["none"]
                lines.append(f"| {scale['label']} | {auto['peak_rss_mb']:,.0f} MB | "
                             f"{auto['cache']} | {none['peak_rss_mb']:,.0f} MB |")
            lines.append("")
    if "input" in result:
        i = result["input"]
        lines += [
            f"**Input throughput** ({i['rows']:,} transformed rows, batch {i['batch_size']}, "
            f"median of {i['repetitions']} after a warm-up):",
            "",
            "| reader | examples/s | ÷ the parallel raw read |",
            "|---|---:|---:|",
        ]
        raw = i["raw_read"]["examples_per_s"]
        for key, label in (
            ("raw_read", "raw read: the input function's own parallel reading (same files, "
                         "buffers and blocks), rebatched, nothing parsed"),
            ("tfx_reader", "TFX's reader (tfxio TensorFlowDataset, its defaults), in its own "
                           "process with TensorFlow's default threads"),
            ("project_cold", "this project's input function, first (cold) epoch"),
            ("project_cached", "this project's input function, cached epochs"),
        ):
            rate = i[key]["examples_per_s"]
            lines.append(f"| {label} | {_rate(rate)} | {rate / raw:.2f}× |")
        lines += ["", "The raw read and this project's input function run in the bench's "
                      "process with the Trainer's threads (`intra_op_threads`).", ""]
    if "fit" in result:
        f = result["fit"]
        lines += [
            f"**Training throughput** (`model.fit`, the Trainer's model and strategy, "
            f"{f['steps']} steps per epoch, median of {f['repetitions']} epochs after a "
            "warm-up epoch; the first two rows' epochs alternate):",
            "",
            "| setting | examples/s |",
            "|---|---:|",
        ]
        for row in f["rows"]:
            lines.append(f"| {row['label']} | {_rate(row['examples_per_s'])} |")
        ok = _target(f["input_bound_fraction"] >= 0.95)
        lines += ["", f"Input-bound fraction (input function ÷ synthetic in-memory batch, "
                      "median of the alternating epochs' ratios): "
                      f"**{f['input_bound_fraction']:.3f}** (target ≥ 0.95{ok}).", ""]
        if not f["gpus"]:
            lines += ["GPU: none on this machine, so there is no GPU row.", ""]
    if "predict" in result:
        p = result["predict"]
        lines += [f"**Batch predictions** (`make predict` on the {p['label']}: "
                  f"{p['rows']:,} rows in {p['files']} CSV files, the model pushed by that "
                  f"scale's run): **{_rate(p['rows_per_second'])} rows/s** reading, checking, "
                  f"scoring and writing ({p['seconds']:.1f} s); {p['wall_seconds']:.1f} s "
                  f"for the whole command, with loading TensorFlow and the model; "
                  f"{p['rejected']:,} rows rejected.", ""]
    return "\n".join(lines)


def chart(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in ("input", "fit", "scale") if k in result]
    panels += ["stages"] if "scale" in result else []
    columns = min(2, len(panels))
    grid_rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(grid_rows, columns, figsize=(7 * columns, 4.5 * grid_rows),
                             squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, panel in zip(axes.flat, panels, strict=False):
        if panel == "input":
            i = result["input"]
            keys = ("raw_read", "tfx_reader", "project_cold", "project_cached")
            labels = ("parallel\nraw read", "TFX's\nreader", "ours,\ncold epoch",
                      "ours,\ncached")
            ax.bar(labels, [i[k]["examples_per_s"] for k in keys],
                   color=[REFERENCE_COLOR, TEMPLATE_COLOR, PROJECT_COLOR, "#0a3069"])
            ax.set_yscale("log")
            ax.set_title("input examples/s (log)")
        elif panel == "fit":
            rows = result["fit"]["rows"]
            ax.barh([textwrap.fill(r["label"], 30) for r in rows],
                    [r["examples_per_s"] for r in rows])
            ax.invert_yaxis()
            ax.set_title("training examples/s")
        elif panel == "scale":
            scales = result["scale"]
            for who in dags(scales[0]):
                ax.plot([s["rows"] for s in scales],
                        [value(s, who, "component_seconds") for s in scales], "o-",
                        label=DAG_NAMES[who], color=COLORS[who])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("rows")
            ax.set_title("DAG component seconds (median over rounds)")
            ax.legend()
        else:
            scale = result["scale"][-1]
            ran = dags(scale)
            y = range(len(STAGES))
            height = 0.8 / len(ran)
            for k, who in enumerate(ran):
                ax.barh([v - 0.4 + height * (k + 0.5) for v in y],
                        [stage_seconds(scale, who, stage) or 0 for stage in STAGES],
                        height=height, label=DAG_NAMES[who], color=COLORS[who])
            ax.set_yticks(list(y), list(STAGES))
            ax.invert_yaxis()
            ax.set_xlabel("seconds")
            ax.set_title(f"per component, {scale['label']}")
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write(result: dict, results_dir: str) -> list[str]:
    os.makedirs(results_dir, exist_ok=True)
    paths = [os.path.join(results_dir, name) for name in ("bench.json", "bench.md", "bench.png")]
    with open(paths[0], "w") as f:
        json.dump(result, f, indent=1)
    with open(paths[1], "w") as f:
        f.write(markdown(result) + "\n")
    chart(result, paths[2])
    return paths


def replace_block(doc: str, begin: str, end: str, text: str) -> None:
    """Replaces what stands between the markers `begin` and `end` in `doc` with `text`."""
    with open(doc, encoding="utf-8") as f:
        content = f.read()
    new, count = re.subn(re.escape(begin) + r".*?" + re.escape(end),
                         lambda _: f"{begin}\n{text}\n{end}", content, flags=re.S)
    if count != 1:
        raise ValueError(f"{doc}: expected one {begin} … {end} block")
    with open(doc, "w", encoding="utf-8") as f:
        f.write(new)
