"""`make bench`: generate data, run this project's DAG and the TFX template's (at its defaults
and tuned) in rounds at each scale, measure the input pipeline and training, write
bench/results/ (JSON, Markdown, PNG) and the block in docs/benchmarks.md.

    python -m bench.run [--scales 1,10,100] [--rounds 1=3,10=3,100=2] [--update-docs]

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

from bench import dag_runs, generate, paths, tables, trainer_memory
from pipeline import names
from pipeline.pipeline_config import (
    METADATA_FILE,
    REPO_ROOT,
    SERVING_DIR,
    PipelineConfig,
    local_beam_args,
)
from pipeline.runs import run_summary
from trainer_module import keys

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


# The DAGs each round runs, in their first round's order (later rounds rotate it).
DAGS = tuple(tables.DAG_NAMES)
# Rounds of every DAG at a scale: fewer where one round takes most of an hour.
LARGE_SCALE, ROUNDS, ROUNDS_LARGE = 100, 3, 2


def default_rounds(times: float) -> int:
    return ROUNDS_LARGE if times >= LARGE_SCALE else ROUNDS


def scale_data(times: float) -> tuple[str, int]:
    """The data dir for a scale (generated once) and its rows."""
    if times == 1:
        return shipped_csv_dir(), len(generate.source_rows()[1])
    data_dir = os.path.join(WORK_DIR, f"data_{times:g}x")
    _say(f"generating {times:g}× the shipped data in {data_dir}")
    return data_dir, generate.generate(times, data_dir)


def _run_record(run: dag_runs.DagRun) -> dict:
    return {**dataclasses.asdict(run), "component_seconds": run.component_seconds}


def _template_dir(variant: str) -> str:
    return os.path.join(WORK_DIR, f"taxi_{variant}")


def run_scale(times: float, base_steps: int, rounds: int, dags: tuple[str, ...],
              prepared: set[str], config: PipelineConfig) -> tuple[dict, str]:
    """`rounds` rounds at one scale, each running every DAG in `dags` from scratch, the order
    rotated each round so no DAG always runs first; then this project's Trainer replayed alone
    with `config` (what the runs trained with). Returns the scale's record and this project's
    output dir (its last round's run)."""
    data_dir, rows = scale_data(times)
    steps = max(1, round(base_steps * times))
    output = os.path.join(WORK_DIR, f"ours_{times:g}x")
    record = {"label": _scale_label(times), "times": times, "rows": rows, "train_steps": steps,
              "beam_args": [tables.short_path(a) for a in local_beam_args(data_dir)],
              "rounds": []}
    _say(f"{_scale_label(times)}: {rows:,} rows, {steps:,} training steps, {rounds} round(s) "
         f"of {', '.join(dags)}")
    for index in range(rounds):
        first = index % len(dags)
        order = dags[first:] + dags[:first]
        runs = {}
        for who in order:
            if who == dag_runs.PROJECT:
                runs[who] = dag_runs.run_ours(data_dir, output, rows, steps)
            else:
                runs[who] = dag_runs.run_template(_template_dir(who), data_dir, rows, steps, who,
                                             prepare=who not in prepared)
                prepared.add(who)
        _say(f"  round {index + 1}: " + "; ".join(
            f"{who} {runs[who].component_seconds:.1f} s in components, "
            f"{runs[who].wall_seconds:.1f} s wall" for who in order))
        record["rounds"].append({"order": list(order),
                                 "runs": {who: _run_record(run) for who, run in runs.items()}})
    record["trainer_memory"] = {}
    for cache in ("auto", "none"):
        measured = trainer_memory.measure(output, dag_runs.pipeline_name(), config, steps, cache)
        record["trainer_memory"][cache] = measured
        _say(f"  Trainer alone, cache {cache}: peak RSS {measured['peak_rss_mb']:,.0f} MB "
             f"({measured['cache']})")
    return record, output


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
    full = dag_runs.run_ours(data_dir, output, rows, base_steps, repo=repo)
    with open(os.path.join(repo, EDITED_MODULE), "a") as f:
        f.write("\n# an edit: the model code changed\n")
    _say(f"  {full.wall_seconds:.1f} s; edited {EDITED_MODULE}, running again")
    rerun = dag_runs.run_ours(data_dir, output, rows, base_steps, fresh=False, repo=repo)
    ran = [n for n, state in rerun.states.items() if state == "COMPLETE"]
    _say(f"  rerun {rerun.wall_seconds:.1f} s wall; ran again: {', '.join(ran)}")
    return {"edited": EDITED_MODULE, "full": {"wall_seconds": full.wall_seconds,
                                              "seconds": full.seconds},
            "rerun": {"wall_seconds": rerun.wall_seconds, "seconds": rerun.seconds,
                      "states": rerun.states}}


def measure_predict(runs: list[tuple[float, str]]) -> dict | None:
    """`make predict` on the largest scale's data, with the model the largest run that pushed
    one left in its serving dir (in a fresh process, as a user runs it)."""
    def has_pushed(output: str) -> bool:
        serving = os.path.join(output, SERVING_DIR, dag_runs.pipeline_name())
        return os.path.isdir(serving) and bool(os.listdir(serving))

    pushed = [(times, output) for times, output in runs if has_pushed(output)]
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
    done = subprocess.run([sys.executable, "-m", "pipeline.tools.predict", "--data-dir", data_dir,
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
    summary = run_summary.latest_run(os.path.join(output_dir, METADATA_FILE),
                                     dag_runs.pipeline_name())
    graph = summary.output(names.TRANSFORM, names.TRANSFORM_GRAPH)
    examples = summary.output(names.TRANSFORM, names.TRANSFORMED_EXAMPLES)
    files = sorted(glob.glob(os.path.join(examples.uri, keys.split_dir(keys.TRAIN_SPLIT), "*")))
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
    _say(f"  raw read (the input function's parallel reading) {raw.examples_per_s:,.0f} ex/s")
    tfx = throughput.tfx_reader_in_own_process(graph_dir, files, spec.label_key, batch, batches,
                                               repetitions)
    _say(f"  TFX reader (own process, TensorFlow's default threads) "
         f"{tfx.examples_per_s:,.0f} ex/s")
    cold, cached = throughput.project_input(files, feature_spec, spec, batch, batches,
                                            repetitions)
    _say(f"  ours cold {cold.examples_per_s:,.0f}, cached {cached.examples_per_s:,.0f} ex/s")
    input_result = {
        "rows": rows, "batch_size": batch, "repetitions": repetitions,
        "raw_read": dataclasses.asdict(raw), "tfx_reader": dataclasses.asdict(tfx),
        "project_cold": dataclasses.asdict(cold), "project_cached": dataclasses.asdict(cached),
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
    tables.replace_block(doc, BLOCK_BEGIN, BLOCK_END, markdown)


def parse_scales(flag: str, text: str) -> list[float]:
    """A comma-separated list of data scales, smallest first; ValueError names the flag."""
    try:
        return sorted(float(s) for s in text.split(","))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected numbers separated by commas") from None


def parse_rounds(text: str, scales: list[float]) -> dict[float, int]:
    """Rounds per scale from 'N' (every scale) or 'SCALE=N,...' (the others at their default);
    ValueError names the flag."""
    rounds = {times: default_rounds(times) for times in scales}
    if not text:
        return rounds
    try:
        if "=" not in text:
            return dict.fromkeys(scales, _positive(int(text)))
        for part in text.split(","):
            times, count = part.split("=")
            if float(times) not in rounds:
                raise ValueError
            rounds[float(times)] = _positive(int(count))
    except ValueError:
        raise ValueError(f"--rounds {text!r}: expected a number of rounds >= 1, or SCALE=N pairs "
                         f"for scales of --scales, e.g. 1=3,100=2") from None
    return rounds


def _positive(count: int) -> int:
    if count < 1:
        raise ValueError
    return count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="1,10,100",
                        help="copies of the shipped data for the DAG runs; the largest one's "
                             "Transform output is what the throughput is measured on")
    parser.add_argument("--rounds", default="",
                        help=f"rounds of every DAG per scale: N for all, or SCALE=N,... "
                             f"(default {ROUNDS}, {ROUNDS_LARGE} from {LARGE_SCALE}×)")
    parser.add_argument("--train-steps", type=int, default=BASE_TRAIN_STEPS,
                        help="training steps on the shipped data (scaled with the data)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--fit-steps", type=int, help="steps per epoch in the fit measurements "
                        "(default: one pass over the data)")
    parser.add_argument("--no-anchor", action="store_true",
                        help="run this project's DAG only: no TFX template runs, no "
                             "edit-and-rerun")
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
        rounds = parse_rounds(args.rounds, scales)
    except ValueError as e:
        parser.error(str(e))
    if args.update_docs:
        if args.repetitions < 5:
            parser.error("the docs' table needs --repetitions 5 or more")
        short = [f"{t:g}×: {n}" for t, n in rounds.items() if n < default_rounds(t)]
        if short:
            parser.error(f"the docs' table needs at least {ROUNDS} rounds per scale "
                         f"({ROUNDS_LARGE} from {LARGE_SCALE}×); --rounds gives {short}")
    if not args.no_anchor and 1 not in scales:
        parser.error("the anchor compares with the run on the shipped data: add 1 to --scales, "
                     "or pass --no-anchor")

    from pipeline.env_settings import from_env
    from pipeline.pipeline_config import configure
    from trainer_module import host_threads

    # What this bench's runs of the DAG train with.
    config = configure(from_env(), dataset=dag_runs.DATASET)
    # The throughput measured in this process runs with the Trainer's threads.
    host_threads.apply(config.trainer)
    result = tables.stamp()
    started = time.monotonic()
    dags = (dag_runs.PROJECT,) if args.no_anchor else DAGS
    prepared: set[str] = set()
    outputs = []
    result["scale"] = []
    for times in scales:
        record, output = run_scale(times, args.train_steps, rounds[times], dags, prepared,
                                   config)
        result["scale"].append(record)
        outputs.append((times, output))
    from bench import quality, quality_report

    spec = config.spec
    # The raw columns each DAG's model reads: what its Transform and Trainer work on.
    result["model_columns"] = {
        who: (list(dict.fromkeys(f.column for f in spec.features)) if who == dag_runs.PROJECT
              else dag_runs.template_model_columns(_template_dir(who)))
        for who in dags}
    # Each DAG's Adam rate and what it does over the train steps.
    training = config.trainer.training
    result["learning_rate"] = {
        who: ({"rate": training.learning_rate, "decay": training.lr_decay}
              if who == dag_runs.PROJECT else
              {"rate": dag_runs.template_learning_rate(_template_dir(who)),
               "decay": dag_runs.TEMPLATE_LR_DECAY})
        for who in dags}
    if not args.no_anchor:
        result["edit_rerun"] = edit_and_rerun(args.train_steps)

    _say("model quality: HistGradientBoosting on each shipped dataset's own rows")
    shipped = [o for t, o in outputs if t == 1 and args.train_steps == BASE_TRAIN_STEPS]
    reuse = {dag_runs.DATASET: shipped[0]} if shipped else {}
    # The docs' quality table is the whole suite's (make bench-quality); this one is beside
    # the speed figures, on the same runs.
    quality_report.publish(quality.run_shipped(WORK_DIR, reuse=reuse), args.results_dir,
                           None, name="quality-shipped")
    predictions = measure_predict(outputs)
    if predictions:
        result["predict"] = predictions
    graph_dir, files = transform_outputs(outputs[-1][1])
    result["input"], result["fit"] = measure(graph_dir, files, config.trainer, spec,
                                             args.repetitions, args.fit_steps)
    result["bench_seconds"] = time.monotonic() - started
    return _publish(result, args.results_dir, args.update_docs)


def _publish(result: dict, results_dir: str, update_doc_page: bool) -> int:
    for path in tables.write(result, results_dir):
        _say(f"wrote {path}")
    if update_doc_page:
        update_doc(tables.markdown(result))
        _say(f"updated the table in {paths.BENCHMARKS_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
