"""`make bench`: generate data, run both DAGs, measure the input pipeline and training, write
bench/results/ (JSON, Markdown, PNG) and the table in docs/benchmarks.md.

    python -m bench.run [--scales 1,10,100] [--repetitions 5] [--update-docs]

Order matters on a small machine: the DAG runs (separate processes) come first, the in-process
throughput measurements last, so no measurement shares the CPU with another.
"""

import argparse
import dataclasses
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from bench import dag, generate, paths, report, trainer_memory
from pipeline import names
from pipeline.pipeline_config import REPO_ROOT
from pipeline.runs import run_summary

WORK_DIR = paths.WORK_DIR
BLOCK_BEGIN, BLOCK_END = "<!-- bench:begin -->", "<!-- bench:end -->"
BASE_TRAIN_STEPS = 1000  # on the shipped data, as the TFX template trains by default


def _say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _scale_label(times: float) -> str:
    return "shipped data" if times == 1 else f"{times:g}× shipped data"


def shipped_csv_dir() -> str:
    """The shipped CSV files alone: the TFX template reads every file in its data dir, and
    data/ also holds a README."""
    out = os.path.join(WORK_DIR, "data_1x")
    os.makedirs(out, exist_ok=True)
    for path in glob.glob(os.path.join(generate.SHIPPED_DATA, "*.csv")):
        shutil.copy2(path, out)
    return out


def run_scales(scales: list[float], base_steps: int) -> list[tuple[float, str, dag.DagRun]]:
    """Our DAG from scratch at each scale; returns (times, output dir, run) per scale."""
    runs = []
    for times in scales:
        if times == 1:
            data_dir, rows = shipped_csv_dir(), len(generate.source_rows()[1])
        else:
            data_dir = os.path.join(WORK_DIR, f"data_{times:g}x")
            _say(f"generating {times:g}× the shipped data in {data_dir}")
            rows = generate.generate(times, data_dir)
        steps = max(1, round(base_steps * times))
        output = os.path.join(WORK_DIR, f"ours_{times:g}x")
        _say(f"this project's DAG on {rows:,} rows, {steps:,} training steps → {output}")
        run = dag.run_ours(data_dir, output, rows, steps)
        _say(f"  {run.component_seconds:.1f} s in components")
        for cache in ("auto", "none"):
            run.trainer_memory[cache] = trainer_memory.measure(output, "taxi-tpu", steps, cache)
            _say(f"  Trainer alone, cache {cache}: peak RSS "
                 f"{run.trainer_memory[cache]['peak_rss_mb']:,.0f} MB "
                 f"({run.trainer_memory[cache]['cache']})")
        runs.append((times, output, run))
    return runs


def _scale_record(times: float, run: dag.DagRun, template: dag.DagRun | None) -> dict:
    record = {"label": _scale_label(times), "rows": run.rows, "train_steps": run.train_steps,
              "component_seconds": run.component_seconds, "seconds": run.seconds,
              "wall_seconds": run.wall_seconds, "peak_rss_mb": run.peak_rss_mb,
              "blessed": run.blessed, "eval_accuracy": run.eval_accuracy,
              "trainer_memory": run.trainer_memory}
    if template is not None:
        record["template"] = {"component_seconds": template.component_seconds,
                              "seconds": template.seconds, "wall_seconds": template.wall_seconds,
                              "peak_rss_mb": template.peak_rss_mb,
                              "eval_accuracy": template.eval_accuracy}
    return record


def run_template_scales(scales: list[float], runs: list[tuple[float, str, dag.DagRun]]
                        ) -> dict[float, dag.DagRun]:
    """The TFX template on the same data and steps as this project's run at each scale."""
    work = os.path.join(WORK_DIR, "taxi_template")
    done: dict[float, dag.DagRun] = {}
    ours = {t: r for t, _, r in runs}
    for times in scales:
        if times not in ours:
            raise ValueError(f"--template-scales {times:g}: this project has no run at that "
                             "scale; pick from --scales")
        data_dir = shipped_csv_dir() if times == 1 else os.path.join(WORK_DIR,
                                                                      f"data_{times:g}x")
        steps = ours[times].train_steps
        _say(f"TFX taxi template on {ours[times].rows:,} rows, {steps:,} training steps → {work}")
        done[times] = dag.run_template(work, data_dir, ours[times].rows, steps,
                                       prepare=not done)
        _say(f"  {done[times].component_seconds:.1f} s in components, "
             f"{done[times].wall_seconds:.1f} s wall")
    return done


def run_anchor(ours: dag.DagRun, template: dag.DagRun, pairs: list[dict]) -> dict:
    """The side-by-side table: each stage's median seconds over the whole-process pairs, and
    each DAG's model from its run at this scale."""
    def median(who: str, node: str) -> float | None:
        values = [p[f"{who}_seconds"][node] for p in pairs if node in p[f"{who}_seconds"]]
        return report.median(values) if values else None

    stages = [{"template_node": t, "project_node": p, "template": median("template", t),
               "project": median("project", p)} for t, p in dag.STAGES.items()]
    return {"rows": ours.rows, "train_steps": ours.train_steps, "stages": stages,
            "template_total": report.median([p["template_components"] for p in pairs]),
            "project_total": report.median([p["project_components"] for p in pairs]),
            "template_blessed": template.blessed,
            "template_batch": template.train_batch, "project_batch": ours.train_batch,
            "template_accuracy": template.eval_accuracy,
            "project_accuracy": ours.eval_accuracy, "whole_process": pairs}


def whole_process_pairs(ours: dag.DagRun, pairs: int) -> list[dict]:
    """Both DAGs on the shipped data, as whole processes from fresh output dirs, `pairs` times
    back to back, alternating which goes first: each pair's wall times, component totals and
    seconds per component. (The scale and anchor runs are not reused: they run far apart in
    the bench, the first of them on a cold disk cache.)"""
    measured = []
    data_dir, rows = shipped_csv_dir(), ours.rows
    work = os.path.join(WORK_DIR, "taxi_template")
    for pair in range(pairs):
        runs: dict[str, dag.DagRun] = {}
        order = ("project", "template") if pair % 2 == 0 else ("template", "project")
        for who in order:
            if who == "project":
                runs[who] = dag.run_ours(data_dir, os.path.join(WORK_DIR, "ours_wall"), rows,
                                         ours.train_steps)
            else:
                runs[who] = dag.run_template(work, data_dir, rows, ours.train_steps,
                                             prepare=False)
        _say(f"  pair {pair + 1} ({order[0]} first): this project "
             f"{runs['project'].wall_seconds:.1f} s wall, "
             f"{runs['project'].component_seconds:.1f} s in components; template "
             f"{runs['template'].wall_seconds:.1f} s, "
             f"{runs['template'].component_seconds:.1f} s")
        measured.append({**{who: run.wall_seconds for who, run in runs.items()},
                         **{f"{who}_components": run.component_seconds
                            for who, run in runs.items()},
                         **{f"{who}_seconds": run.seconds for who, run in runs.items()}})
    return measured


EDITED_MODULE = os.path.join("trainer_module", "model.py")


def edit_and_rerun(base_steps: int) -> dict:
    """A model-code edit in a copy of this checkout: a full run, then one line added to
    trainer_module/model.py and `make run` again on the same output dir. Returns both runs'
    component states and times, and the rerun's wall time."""
    repo = os.path.join(WORK_DIR, "edit_repo")
    shutil.rmtree(repo, ignore_errors=True)
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    for path in tracked:
        if os.path.isfile(os.path.join(REPO_ROOT, path)):  # not deleted from the work tree
            os.makedirs(os.path.dirname(os.path.join(repo, path)) or repo, exist_ok=True)
            shutil.copy2(os.path.join(REPO_ROOT, path), os.path.join(repo, path))
    output = os.path.join(WORK_DIR, "edit_run")
    data_dir, rows = shipped_csv_dir(), len(generate.source_rows()[1])
    _say(f"edit and rerun: a full run of a copy of this checkout ({repo})")
    full = dag.run_ours(data_dir, output, rows, base_steps, repo=repo)
    with open(os.path.join(repo, EDITED_MODULE), "a") as f:
        f.write("\n# an edit: the model code changed\n")
    _say(f"  {full.wall_seconds:.1f} s; edited {EDITED_MODULE}, running again")
    rerun = dag.run_ours(data_dir, output, rows, base_steps, fresh=False, repo=repo)
    ran = [n for n, state in rerun.states.items() if state == "COMPLETE"]
    _say(f"  rerun {rerun.wall_seconds:.1f} s wall; ran again: {', '.join(ran)}")
    return {"edited": EDITED_MODULE, "full": {"wall_seconds": full.wall_seconds,
                                              "seconds": full.seconds},
            "rerun": {"wall_seconds": rerun.wall_seconds, "seconds": rerun.seconds,
                      "states": rerun.states}}


def measure_predict(runs: list[tuple[float, str, "dag.DagRun"]]) -> dict | None:
    """`make predict` on the largest scale's data, with the model the largest run that pushed
    one left in its serving dir (in a fresh process, as a user runs it)."""
    def has_pushed(output: str) -> bool:
        serving = os.path.join(output, "serving_model", "taxi-tpu")
        return os.path.isdir(serving) and bool(os.listdir(serving))

    pushed = [(times, output) for times, output, _ in runs if has_pushed(output)]
    if not pushed:
        _say("batch predictions: no run pushed a model, nothing to score with")
        return None
    times, output = pushed[-1]
    largest = runs[-1][0]
    data_dir = (shipped_csv_dir() if largest == 1
                else os.path.join(WORK_DIR, f"data_{largest:g}x"))
    _say(f"batch predictions: make predict on {data_dir} with the model of the "
         f"{_scale_label(times)} run")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pipeline.predict", "--data-dir", data_dir,
                           "--output-dir", output], capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"make predict failed: {done.stderr[-2000:]}")
    [folder] = sorted(glob.glob(os.path.join(output, "predictions", "*")))[-1:]
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    shutil.rmtree(folder)  # hundreds of MB of scored rows: the figures are what counts
    return {"label": _scale_label(largest), "rows": summary["rows"],
            "files": len(summary["files"]), "seconds": summary["seconds"],
            "rows_per_second": summary["rows_per_second"], "rejected": summary["rejected"],
            "wall_seconds": wall}


def transform_outputs(output_dir: str) -> tuple[str, list[str]]:
    """Transform's graph dir and the transformed train-split files of a finished run."""
    summary = run_summary.latest_run(os.path.join(output_dir, "metadata", "metadata.db"),
                                     "taxi-tpu")
    graph = summary.output(names.TRANSFORM, names.TRANSFORM_GRAPH)
    examples = summary.output(names.TRANSFORM, names.TRANSFORMED_EXAMPLES)
    files = sorted(glob.glob(os.path.join(examples.uri, "Split-train", "*")))
    return graph.uri, files


def measure(graph_dir: str, files: list[str], config, spec, repetitions: int,
            fit_steps: int | None) -> tuple[dict, dict]:
    """Input rows, the input-bound fraction and the knobs, on Transform's output, with the
    Trainer's settings `config` (a TrainerConfig) and the dataset's spec."""
    import tensorflow_transform as tft

    from bench import throughput
    from trainer_module import data, plan

    tf_transform_output = tft.TFTransformOutput(graph_dir)
    feature_spec = tf_transform_output.transformed_feature_spec()
    batch = config.data.per_replica_batch_size
    batches = data.count_batches(files, batch)
    rows = batches * batch  # what every pass reads: full batches only
    _say(f"input throughput on {rows:,} transformed rows ({len(files)} files, full batches), "
         f"batch {batch}")
    raw = throughput.raw_read(files, batch, batches, repetitions)
    _say(f"  raw read {raw.examples_per_s:,.0f} ex/s")
    tfx = throughput.tfx_reader(files, tf_transform_output, spec.label_key, batch, batches,
                                repetitions)
    _say(f"  TFX reader {tfx.examples_per_s:,.0f} ex/s")
    cold, cached = throughput.project_input(files, feature_spec, spec, batch, batches,
                                            repetitions)
    _say(f"  ours cold {cold.examples_per_s:,.0f}, cached {cached.examples_per_s:,.0f} ex/s")
    input_result = {
        "rows": rows, "batch_size": batch, "repetitions": repetitions,
        "raw_read": dataclasses.asdict(raw), "tfx_reader": dataclasses.asdict(tfx),
        "project_cold": dataclasses.asdict(cold), "project_cached": dataclasses.asdict(cached),
        "targets": {"cold_vs_tfx": cold.examples_per_s >= 12 * tfx.examples_per_s,
                    "cached_vs_raw": cached.examples_per_s >= 2 * raw.examples_per_s},
    }

    setup = throughput.FitSetup(tf_transform_output, files, config, spec)
    steps = fit_steps or batches  # a full pass: the epochs after the first are served cached
    configured = plan.make_plan(config, spec, train_steps=1).steps_per_execution
    real, synthetic, fraction = throughput.input_bound(setup, steps, repetitions)
    fit_rows = [("synthetic in-memory batch, steps_per_execution "
                 f"{configured}", synthetic),
                (f"input function, steps_per_execution {configured} (the Trainer's setting)",
                 real)]
    _say(f"  fit, input function {real.examples_per_s:,.0f} ex/s, synthetic batch "
         f"{synthetic.examples_per_s:,.0f} ex/s: input-bound fraction {fraction:.3f}")
    for label, kwargs in (
        ("input function, steps_per_execution 1", dict(steps_per_execution=1)),
        (f"input function, steps_per_execution {configured}, XLA (jit_compile)",
         dict(jit_compile=True)),
    ):
        rate = throughput.fit_rate(setup, steps, repetitions, **kwargs)
        _say(f"  fit, {label}: {rate.examples_per_s:,.0f} ex/s")
        fit_rows.append((label, rate))
    gpus = throughput.gpu_names()
    device = "GPU" if gpus else "CPU"
    fit_result = {"steps": steps, "repetitions": repetitions, "gpus": gpus,
                  "rows": [{"label": f"{device}: {label}", **dataclasses.asdict(rate)}
                           for label, rate in fit_rows],
                  "input_bound_fraction": fraction}
    return input_result, fit_result


def update_doc(markdown: str, doc: str = paths.BENCHMARKS_DOC) -> None:
    report.replace_block(doc, BLOCK_BEGIN, BLOCK_END, markdown)


def parse_scales(flag: str, text: str) -> list[float]:
    """A comma-separated list of data scales, smallest first; ValueError names the flag."""
    try:
        return sorted(float(s) for s in text.split(","))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected numbers separated by commas") from None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="1,10,100",
                        help="copies of the shipped data for the DAG runs; the largest one's "
                             "Transform output is what the throughput is measured on")
    parser.add_argument("--train-steps", type=int, default=BASE_TRAIN_STEPS,
                        help="training steps on the shipped data (scaled with the data)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--fit-steps", type=int, help="steps per epoch in the fit measurements "
                        "(default: one pass over the data)")
    parser.add_argument("--no-anchor", action="store_true",
                        help="skip the TFX template runs, the whole-process pairs and the "
                             "edit-and-rerun")
    parser.add_argument("--template-scales",
                        help="scales the TFX template runs at too (each one of --scales; "
                             "default: every one)")
    parser.add_argument("--wall-pairs", type=int, default=3,
                        help="whole-process runs of each DAG on the shipped data, alternating; "
                             "the shipped-data targets are their medians")
    parser.add_argument("--results-dir", default=paths.RESULTS_DIR)
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--from-json", metavar="BENCH_JSON",
                        help="measure nothing: write the table, chart (and docs page) again from "
                             "an earlier bench.json")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            return _publish(json.load(f), args.results_dir, args.update_docs)
    try:
        scales = parse_scales("--scales", args.scales)
        template_scales = parse_scales("--template-scales",
                                       args.template_scales or args.scales)
    except ValueError as e:
        parser.error(str(e))
    if args.repetitions < 5 and args.update_docs:
        parser.error("the docs' table needs --repetitions 5 or more")

    if not args.no_anchor and 1 not in scales:
        parser.error("the anchor compares with the run on the shipped data: add 1 to --scales, "
                     "or pass --no-anchor")
    if not args.no_anchor and (1 not in template_scales
                               or not set(template_scales) <= set(scales)):
        parser.error(f"--template-scales {args.template_scales!r}: expected 1 (the anchor) and "
                     f"other scales of --scales {args.scales!r}")
    if args.wall_pairs < 1:
        parser.error(f"--wall-pairs {args.wall_pairs}: expected 1 or more pairs of "
                     "whole-process runs")

    from trainer_module import host_threads
    from trainer_module.config import TrainerConfig

    # The throughput measured in this process runs with the Trainer's threads.
    host_threads.apply(TrainerConfig.create())
    result = report.stamp()
    started = time.monotonic()
    runs = run_scales(scales, args.train_steps)
    templates = {} if args.no_anchor else run_template_scales(template_scales, runs)
    result["scale"] = [_scale_record(t, r, templates.get(t)) for t, _, r in runs]
    if not args.no_anchor:
        ours_1x = next(r for t, _, r in runs if t == 1)
        pairs = whole_process_pairs(ours_1x, args.wall_pairs)
        result["anchor"] = run_anchor(ours_1x, templates[1], pairs)
        result["edit_rerun"] = edit_and_rerun(args.train_steps)
    from bench import quality
    from pipeline.pipeline_config import PipelineConfig

    _say("model quality: HistGradientBoosting on each shipped dataset's own rows")
    shipped = [o for t, o, _ in runs if t == 1 and args.train_steps == BASE_TRAIN_STEPS]
    reuse = {"taxi": shipped[0]} if shipped else {}
    # The docs' quality table is the whole suite's (make bench-quality); this one is beside
    # the speed figures, on the same runs.
    quality.publish(quality.run_shipped(WORK_DIR, reuse=reuse), args.results_dir, None,
                    name="quality-shipped")
    predictions = measure_predict(runs)
    if predictions:
        result["predict"] = predictions
    graph_dir, files = transform_outputs(runs[-1][1])
    result["input"], result["fit"] = measure(graph_dir, files, TrainerConfig.create(),
                                             PipelineConfig().dataset_spec(), args.repetitions,
                                             args.fit_steps)
    result["bench_seconds"] = time.monotonic() - started
    return _publish(result, args.results_dir, args.update_docs)


def _publish(result: dict, results_dir: str, update_doc_page: bool) -> int:
    for path in report.write(result, results_dir):
        _say(f"wrote {path}")
    if update_doc_page:
        update_doc(report.markdown(result))
        _say(f"updated the table in {paths.BENCHMARKS_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
