"""Bench results: one JSON record, a Markdown table and a PNG chart, stamped with the machine
and the library versions they were measured with."""

import datetime
import importlib.metadata
import json
import os
import platform
import re
import textwrap

LIBRARIES = ("tfx", "tensorflow", "tensorflow-transform", "tfx-bsl", "apache-beam",
             "tensorflow-model-analysis", "ml-metadata", "tf-keras")
# One color per DAG in every chart panel, so this project and the template read the same
# everywhere; grey for what is not a run (the raw read, the linear line).
PROJECT_COLOR = "#1f6feb"
TEMPLATE_COLOR = "#d1242f"
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


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "—"}[value]


def _target(ok: bool | None) -> str:
    return "" if ok is None else (" ✅" if ok else " ❌")


def _wall(run: dict) -> str:
    return f"{run['wall_seconds']:.1f}" if run.get("wall_seconds") else "—"


def _memory_table(scale: list[dict]) -> list[str]:
    """Peak RSS per component (rows) at each scale (columns), the template's beside ours."""
    if not any(run.get("peak_rss_mb") for run in scale):
        return []
    columns = []
    for run in scale:
        columns.append((run["label"], run.get("peak_rss_mb") or {}))
        if run.get("template"):
            columns.append((f"{run['label']}, TFX template", run["template"]["peak_rss_mb"]))
    nodes = list(dict.fromkeys(n for _, peaks in columns for n in peaks))
    lines = ["**Memory**: peak resident memory (MB) of the run's processes (the runner and any "
             "Beam workers) while each component ran, sampled every 0.1 s; components run one "
             "after another in one process, so a peak includes what earlier ones left:", "",
             "| component | " + " | ".join(label for label, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for node in nodes:
        cells = [f"{peaks[node]:,.0f}" if node in peaks else "—" for _, peaks in columns]
        lines.append(f"| {node} | " + " | ".join(cells) + " |")
    return lines + [""]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


# The 100× rate the speed targets are set against: 1,587 rows/s in the bench of 2026-11-22.
RATE_100X_BEFORE = 1587


def _paired(pairs: list[dict], ours: str, theirs: str) -> tuple[str, bool]:
    """The median of the pairs' ratios ours ÷ theirs, worded with its range and medians, and
    whether it is ≤ 0.8."""
    ratios = [p[ours] / p[theirs] for p in pairs]
    ratio = median(ratios)
    return (f"median {ratio:.2f}× over {len(pairs)} alternating pairs (range "
            f"{min(ratios):.2f}–{max(ratios):.2f}; ours {median([p[ours] for p in pairs]):.1f} "
            f"s, template {median([p[theirs] for p in pairs]):.1f} s)", ratio <= 0.8)


def targets(result: dict) -> list[tuple[str, str, bool | None]]:
    """Each speed target of the bench: (target, measured, met); None: not measured."""
    out: list[tuple[str, str, bool | None]] = []
    anchor = result.get("anchor")
    if anchor:
        pairs = anchor["whole_process"]
        out.append(("shipped data: component time ≤ 0.8× the TFX template's",
                    *_paired(pairs, "project_components", "template_components")))
        out.append(("shipped data: whole-process wall of `make run` ≤ 0.8× the template's "
                    "`local_runner.py`", *_paired(pairs, "project", "template")))
    largest = (result.get("scale") or [None])[-1]
    if largest and largest["rows"] >= 100 * result["scale"][0]["rows"]:
        rate = largest["rows"] / largest["component_seconds"]
        out.append((f"{largest['label']}: rows/s ≥ 2× {RATE_100X_BEFORE:,}",
                    f"{rate:,.0f} rows/s ({rate / RATE_100X_BEFORE:.2f}×)",
                    rate >= 2 * RATE_100X_BEFORE))
    if "input" in result:
        i = result["input"]
        share = i["project_cold"]["examples_per_s"] / i["raw_read"]["examples_per_s"]
        out.append(("cold input epoch ≥ 0.9× the raw GZIP read",
                    f"{share:.2f}× ({_rate(i['project_cold']['examples_per_s'])} vs "
                    f"{_rate(i['raw_read']['examples_per_s'])} examples/s)", share >= 0.9))
    edit = result.get("edit_rerun")
    if edit:
        states = edit["rerun"]["states"]
        ran = [n for n, state in states.items() if state == "COMPLETE"]
        ok = (states.get("Transform") == "CACHED" and states.get("Trainer") == "COMPLETE")
        out.append((f"editing {edit['edited']} re-runs the Trainer onward, not Transform",
                    f"ran again: {', '.join(ran)}; {edit['rerun']['wall_seconds']:.1f} s wall "
                    f"vs {edit['full']['wall_seconds']:.1f} s for the full run", ok))
    return out


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
    if "input" in result:
        i = result["input"]
        lines += [
            f"**Input throughput** ({i['rows']:,} transformed rows, batch {i['batch_size']}, "
            f"median of {i['repetitions']} after a warm-up):",
            "",
            "| reader | examples/s | vs TFX's reader | target |",
            "|---|---:|---:|---|",
        ]
        tfx = i["tfx_reader"]["examples_per_s"]
        for key, label, target in (
            ("raw_read", "raw GZIP TFRecord read, no parsing (cold-path limit)", ""),
            ("tfx_reader", "TFX's reader (tfxio TensorFlowDataset, defaults)", ""),
            ("project_cold", "this project's input function, first (cold) epoch",
             f"≥ 12× TFX's reader{_target(i['targets']['cold_vs_tfx'])}"),
            ("project_cached", "this project's input function, cached epochs",
             f"≥ 2× the raw read{_target(i['targets']['cached_vs_raw'])}"),
        ):
            rate = i[key]["examples_per_s"]
            lines.append(f"| {label} | {_rate(rate)} | {rate / tfx:.1f}× | {target} |")
        lines.append("")
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
    if "scale" in result:
        first = result["scale"][0]
        lines += ["**Scale**: the whole DAG from scratch, training steps scaled with the data "
                  "(cost ÷ linear: seconds relative to the smallest run, divided by rows "
                  "relative to it; ≤ 1 is no worse than linear); the TFX template on the same "
                  "data and steps where it ran; accuracy is the Evaluator's on the eval split:",
                  "", "| data | rows | train steps | component seconds | rows/s | cost ÷ linear "
                  "| TFX template's component seconds | ours ÷ template | wall seconds "
                  "(ours / template) | eval accuracy (ours / template) | blessed |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for run in result["scale"]:
            vs_linear = ((run["component_seconds"] / first["component_seconds"])
                         / (run["rows"] / first["rows"]))
            template = run.get("template")
            lines.append(
                f"| {run['label']} | {run['rows']:,} | {run['train_steps']:,} | "
                f"{run['component_seconds']:.1f} | "
                f"{run['rows'] / run['component_seconds']:,.0f} | {vs_linear:.2f} | "
                + (f"{template['component_seconds']:.1f} | "
                   f"{run['component_seconds'] / template['component_seconds']:.2f} | "
                   f"{run.get('wall_seconds', 0):.1f} / {template['wall_seconds']:.1f} | "
                   f"{_num(run['eval_accuracy'])} / {_num(template['eval_accuracy'])} | "
                   if template else
                   f"— (not run) | — | {_wall(run)} | {_num(run['eval_accuracy'])} | ")
                + f"{_yes_no(run['blessed'])} |")
        lines.append("")
        lines += _memory_table(result["scale"])
        memory = [run for run in result["scale"] if run.get("trainer_memory")]
        if memory:
            lines += ["**Trainer memory**: the Trainer replayed alone in a fresh process on "
                      "each run's Transform output (peak RSS), with the input cache as "
                      "`cache='auto'` decides it, and with `cache='none'` (streamed):", "",
                      "| data | peak RSS, cache auto | auto's decision | peak RSS, cache none |",
                      "|---|---:|---|---:|"]
            for run in memory:
                auto, none = run["trainer_memory"]["auto"], run["trainer_memory"]["none"]
                lines.append(f"| {run['label']} | {auto['peak_rss_mb']:,.0f} MB | "
                             f"{auto['cache']} | {none['peak_rss_mb']:,.0f} MB |")
            lines.append("")
    if "predict" in result:
        p = result["predict"]
        lines += [f"**Batch predictions** (`make predict` on the {p['label']}: "
                  f"{p['rows']:,} rows in {p['files']} CSV files, the model pushed by that "
                  f"scale's run): **{_rate(p['rows_per_second'])} rows/s** reading, checking, "
                  f"scoring and writing ({p['seconds']:.1f} s); {p['wall_seconds']:.1f} s "
                  f"for the whole command, with loading TensorFlow and the model; "
                  f"{p['rejected']:,} rows rejected.", ""]
    if "anchor" in result:
        a = result["anchor"]
        lines += [
            f"**Anchor**: TFX taxi template (`tfx template copy --model=taxi`, every component "
            f"enabled) and this project, same data ({a['rows']:,} rows), "
            f"{a['train_steps']} training steps each, seconds per component (the median over "
            f"the {len(a['whole_process'])} alternating whole-process pairs):",
            "",
            "| stage | TFX template | this project |",
            "|---|---:|---:|",
        ]
        for stage in a["stages"]:
            names = dict.fromkeys((stage["template_node"], stage["project_node"]))
            lines.append(f"| {' / '.join(names)} | {_seconds(stage['template'])} | "
                         f"{_seconds(stage['project'])} |")
        lines.append(f"| all components | {a['template_total']:.1f} | "
                     f"{a['project_total']:.1f} |")
        trainer = {s["template_node"]: s for s in a["stages"]}["Trainer"]
        lines.append(f"| Trainer examples/s (steps × batch ÷ seconds) | "
                     f"{a['train_steps'] * a['template_batch'] / trainer['template']:,.0f} "
                     f"(batch {a['template_batch']}) | "
                     f"{a['train_steps'] * a['project_batch'] / trainer['project']:,.0f} "
                     f"(batch {a['project_batch']}) |")
        lines.append(f"| Evaluator's overall binary accuracy | {_num(a['template_accuracy'])} "
                     f"| {_num(a['project_accuracy'])} |")
        lines.append("")
    return "\n".join(lines)


def chart(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in ("input", "fit", "scale", "anchor") if k in result]
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
            labels = ("raw read", "TFX's\nreader", "ours,\ncold epoch", "ours,\ncached")
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
            runs = result["scale"]
            ax.plot([r["rows"] for r in runs], [r["component_seconds"] for r in runs], "o-",
                    label="this project", color=PROJECT_COLOR)
            template = [r for r in runs if "template" in r]
            if template:
                ax.plot([r["rows"] for r in template],
                        [r["template"]["component_seconds"] for r in template], "s-",
                        label="TFX template", color=TEMPLATE_COLOR)
            first = runs[0]
            ax.plot([r["rows"] for r in runs],
                    [first["component_seconds"] * r["rows"] / first["rows"] for r in runs],
                    "--", color=REFERENCE_COLOR, label="this project, linear from the smallest")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("rows")
            ax.set_title("DAG component seconds")
            ax.legend()
        else:
            stages = result["anchor"]["stages"]
            y = range(len(stages))
            ax.barh([v - 0.2 for v in y], [s["template"] or 0 for s in stages], height=0.4,
                    label="TFX template", color=TEMPLATE_COLOR)
            ax.barh([v + 0.2 for v in y], [s["project"] or 0 for s in stages], height=0.4,
                    label="this project", color=PROJECT_COLOR)
            ax.set_yticks(list(y), [s["template_node"] for s in stages])
            ax.invert_yaxis()
            ax.set_xlabel("seconds")
            ax.set_title("per component, same data and steps")
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
