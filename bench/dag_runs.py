"""Whole-DAG runs for the bench: this project's pipeline, and the TFX taxi template's.

Each run is a separate process, as a user starts it; component seconds are read from the run's
own MLMD store afterwards (execution registered → last update), the same numbers the run
summary prints. While it runs, the memory of the process and its descendants (Beam's worker
processes) is sampled the same way for every DAG, as their summed proportional set size (a page
shared by several processes counts once), so each component's peak can be read against its
MLMD times.

Three DAGs run: this project's; the TFX taxi template at its defaults; and the same template
tuned with this project's local Beam settings (running mode, workers, pickler, dependency file,
chosen by the data's size) and Transform without its statistics, so a ratio against it shows
what the code gains beyond those settings.
"""

import ast
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from pipeline import datasets
from pipeline.pipeline_config import METADATA_FILE, REPO_ROOT, local_beam_args
from pipeline.runs import eval_results, run_summary

RUNNER = os.path.join(REPO_ROOT, "pipeline", "local_runner.py")
# The dataset the speed bench runs this project's DAG on (its spec and shipped data).
DATASET = "taxi"


def pipeline_name(dataset: str = DATASET) -> str:
    """The name `make run` gives this project's pipeline on `dataset`: its runs in MLMD and
    its serving dir go by it."""
    return datasets.pipeline_name(dataset)


TEMPLATE_NAME = "taxi-template"
# The template's components that its pipeline.py ships commented out, for later tutorial steps.
TEMPLATE_COMPONENTS = ("statistics_gen", "schema_gen", "example_validator", "transform",
                       "trainer", "model_resolver", "evaluator", "pusher")


class BenchRunError(RuntimeError):
    """A pipeline run inside the bench failed; the message holds the end of its log."""


@dataclasses.dataclass
class DagRun:
    rows: int
    train_steps: int
    train_batch: int  # examples per training step
    seconds: dict[str, float]  # node id → seconds
    states: dict[str, str]
    blessed: bool | None
    eval_accuracy: float | None  # the Evaluator's overall accuracy (classification)
    wall_seconds: float = 0.0  # the whole process, start to exit
    # node id → peak memory (MB, proportional set size) of the run's processes while the
    # component ran
    peak_memory_mb: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def component_seconds(self) -> float:
        return sum(self.seconds.values())


def _tree_pss(pid: int) -> int:
    """Proportional set size (bytes) of a process and all its descendants, 0 once it has
    exited: a page mapped by several processes counts once across the tree (split between
    them), so the libraries Beam's worker processes load beside the runner's are not counted
    once per process."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) * 1024
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as f:
                    pending.extend(int(child) for child in f.read().split())
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total


@dataclasses.dataclass
class ProcessRun:
    """A finished process: its wall time and its memory samples (epoch seconds, bytes of the
    process tree's proportional set size)."""

    wall_seconds: float
    samples: list[tuple[float, int]]

    def peak_mb(self, started: float, finished: float) -> float:
        """The peak memory (MB) between two epoch times; for a step shorter than the sampling
        interval, the last sample before it ended."""
        inside = [rss for t, rss in self.samples if started <= t <= finished]
        if not inside:
            inside = [rss for t, rss in self.samples if t <= finished][-1:] or [0]
        return max(inside) / 2**20


# Memory samples come every SAMPLE_INTERVAL_S, or further apart where one sample takes longer
# (reading the proportional set size walks each process's page tables: ~20 ms for a 1 GB
# runner), so the sampler never takes more than SAMPLE_SHARE of a core from the run it measures.
SAMPLE_INTERVAL_S = 0.1
SAMPLE_SHARE = 0.05


def _run(command: list[str], cwd: str, env: dict[str, str], log_path: str,
         samples: list[tuple[float, int]] | None = None) -> ProcessRun:
    """Runs `command` to its end, sampling its process tree's memory into `samples` (a new
    list when None)."""
    samples = [] if samples is None else samples
    with open(log_path, "w") as log:
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        done = threading.Event()

        def sample() -> None:
            wait = SAMPLE_INTERVAL_S
            while not done.wait(wait):
                began = time.perf_counter()
                samples.append((time.time(), _tree_pss(process.pid)))
                cost = time.perf_counter() - began
                wait = max(SAMPLE_INTERVAL_S, cost * (1 - SAMPLE_SHARE) / SAMPLE_SHARE)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        returncode = process.wait()
        wall = time.monotonic() - started
        done.set()
        sampler.join()
    if returncode != 0:
        with open(log_path) as log:
            tail = log.read()[-3000:]
        raise BenchRunError(f"{' '.join(command)} exited {returncode} (log: {log_path})"
                            f":\n{tail}")
    return ProcessRun(wall, samples)


def _record(metadata_path: str, pipeline_name: str, rows: int, steps: int, batch: int,
            process: ProcessRun, cwd: str = REPO_ROOT) -> DagRun:
    """The run's record in MLMD; `cwd` is where the run started (the template's artifact URIs
    are relative to it)."""
    summary = run_summary.latest_run(metadata_path, pipeline_name)
    if summary is None or not summary.succeeded:
        raise BenchRunError(f"no successful run of {pipeline_name} in {metadata_path}")
    metrics = eval_results.overall_metrics(os.path.join(cwd, summary.evaluation_uri))
    accuracy = next((v for k, v in metrics.items() if k.endswith("accuracy")), None)
    nodes = summary.nodes.values()
    return DagRun(rows, steps, batch, {n.node_id: n.seconds for n in nodes},
                  {n.node_id: n.state for n in nodes}, summary.blessed, accuracy,
                  wall_seconds=process.wall_seconds,
                  peak_memory_mb={n.node_id: process.peak_mb(n.started, n.finished)
                               for n in nodes})


def _read_int(path: str, pattern: str) -> int:
    """A number a run printed or a file sets (the first group of `pattern`)."""
    with open(path) as f:
        match = re.search(pattern, f.read(), flags=re.M)
    if match is None:
        raise BenchRunError(f"{path}: no line matches {pattern!r}")
    return int(match.group(1))


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_ours(data_dir: str, output_dir: str, rows: int, train_steps: int | None,
             dataset: str = DATASET, fresh: bool = True, repo: str = REPO_ROOT,
             env: dict[str, str] | None = None) -> DagRun:
    """This project's DAG, as `make run` starts it; fresh: from scratch (a new output dir, so
    nothing is served from cache). train_steps None: the dataset spec's own. `repo`: the
    checkout whose code runs (a copy, for the bench's edit-and-rerun). `env`: settings for the
    run (e.g. SEED)."""
    if fresh:
        shutil.rmtree(output_dir, ignore_errors=True)
    os.makedirs(output_dir, exist_ok=True)
    steps = ["--train-steps", str(train_steps)] if train_steps else []
    log = os.path.join(output_dir, "run.log")
    process = _run([sys.executable, os.path.join(repo, "pipeline", "local_runner.py"),
                    "--dataset", dataset, "--data-dir", data_dir, "--output-dir", output_dir,
                    *steps], repo, _env(PYTHONPATH=repo, VERBOSE="1", **(env or {})), log)
    batch = _read_int(log, r"global batch=(\d+)") if fresh else 0
    return _record(os.path.join(output_dir, METADATA_FILE), pipeline_name(dataset),
                   rows,
                   train_steps or _read_int(log, r"\) (\d+) steps in \d+ epochs"), batch,
                   process)


# The DAGs the bench runs: this project's, and the template's two variants (as `tfx template
# copy` writes it, and tuned with this project's local Beam settings and Transform without
# statistics). Results are keyed by these names.
PROJECT, TUNED, TEMPLATE = "project", "tuned", "template"
# The line the tuned copy's local_runner.py sets its Beam arguments on (re-set per data dir).
_BEAM_ARGS_LINE = r"^BEAM_PIPELINE_ARGS = .*$"


def prepare_template(work_dir: str, data_dir: str, train_steps: int,
                     variant: str = TEMPLATE) -> str:
    """`tfx template copy --model=taxi`, with every component enabled, reading `data_dir` and
    training `train_steps` steps (its other settings as shipped); the TUNED variant also runs
    Transform with disable_statistics=True and passes this project's Beam arguments for
    `data_dir`. Returns the copy's folder."""
    if variant not in (TEMPLATE, TUNED):
        raise ValueError(f"variant={variant!r}: expected {TEMPLATE!r} or {TUNED!r}")
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(work_dir) or ".", exist_ok=True)
    _run(["tfx", "template", "copy", "--model=taxi", f"--pipeline_name={TEMPLATE_NAME}",
          f"--destination_path={work_dir}"], REPO_ROOT, _env(),
         work_dir.rstrip("/") + ".copy.log")
    pipeline_py = [(rf"^(\s*)# (components\.append\({name}\))", r"\1\2")
                   for name in TEMPLATE_COMPONENTS]
    if variant == TUNED:
        pipeline_py.append((r"preprocessing_fn=preprocessing_fn\)",
                            "preprocessing_fn=preprocessing_fn, disable_statistics=True)"))
        _patch(os.path.join(work_dir, "local_runner.py"), [
            (r"^(DATA_PATH = .*)$", r"\1\nBEAM_PIPELINE_ARGS = None"),
            (r"^(\s*)# beam_pipeline_args=configs\.\n"
             r"\s*# BIG_QUERY_WITH_DIRECT_RUNNER_BEAM_PIPELINE_ARGS,",
             r"\1beam_pipeline_args=BEAM_PIPELINE_ARGS,")])
    _patch(os.path.join(work_dir, "pipeline", "pipeline.py"), pipeline_py)
    point_template(work_dir, data_dir, train_steps, variant)
    return work_dir


def point_template(work_dir: str, data_dir: str, train_steps: int, variant: str) -> None:
    """Points a prepared copy at `data_dir` and `train_steps` (and, tuned, at this project's
    Beam arguments for that data)."""
    runner = [(r"^DATA_PATH = .*$", f"DATA_PATH = {os.path.abspath(data_dir)!r}")]
    if variant == TUNED:
        beam_args = list(local_beam_args(data_dir))
        runner.append((_BEAM_ARGS_LINE, f"BEAM_PIPELINE_ARGS = {beam_args!r}"))
    _patch(os.path.join(work_dir, "local_runner.py"), runner)
    _patch(os.path.join(work_dir, "pipeline", "configs.py"),
           [(r"^TRAIN_NUM_STEPS = \d+", f"TRAIN_NUM_STEPS = {train_steps}")])


# The lists in the template's models/features.py that name the raw columns its model reads.
_TEMPLATE_FEATURE_LISTS = ("DENSE_FLOAT_FEATURE_KEYS", "BUCKET_FEATURE_KEYS",
                           "CATEGORICAL_FEATURE_KEYS", "VOCAB_FEATURE_KEYS")


def _assignments(path: str, names: tuple[str, ...]) -> dict:
    """The literal values a template file assigns to `names`; each must be there."""
    with open(path) as f:
        tree = ast.parse(f.read())
    values = {target.id: ast.literal_eval(node.value)
              for node in tree.body if isinstance(node, ast.Assign)
              for target in node.targets
              if isinstance(target, ast.Name) and target.id in names}
    missing = [name for name in names if name not in values]
    if missing:
        raise BenchRunError(f"{path}: no {', '.join(missing)}; the TFX template changed")
    return values


def template_model_columns(work_dir: str) -> list[str]:
    """The raw columns a prepared template copy's model reads, from its models/features.py."""
    lists = _assignments(os.path.join(work_dir, "models", "features.py"),
                         _TEMPLATE_FEATURE_LISTS)
    return [column for name in _TEMPLATE_FEATURE_LISTS for column in lists[name]]


# The line of the template's keras_model/model.py that compiles its optimizer: Adam at the
# rate its constants.py sets, with no schedule, which is this project's lr_decay 'none'
# (`template_learning_rate` checks the line is there).
_TEMPLATE_OPTIMIZER = "optimizer=tf.keras.optimizers.Adam(learning_rate=learning_rate)"
TEMPLATE_LR_DECAY = "none"


def template_learning_rate(work_dir: str) -> float:
    """The constant Adam rate a prepared template copy's model trains at."""
    keras_dir = os.path.join(work_dir, "models", "keras_model")
    with open(os.path.join(keras_dir, "model.py")) as f:
        if _TEMPLATE_OPTIMIZER not in f.read():
            raise BenchRunError(f"{keras_dir}/model.py: no `{_TEMPLATE_OPTIMIZER}`; the TFX "
                                "template changed")
    return _assignments(os.path.join(keras_dir, "constants.py"),
                        ("LEARNING_RATE",))["LEARNING_RATE"]


def _patch(path: str, substitutions: list[tuple[str, str]]) -> None:
    with open(path) as f:
        text = f.read()
    for pattern, replacement in substitutions:
        text, count = re.subn(pattern, lambda m, r=replacement: m.expand(r), text, flags=re.M)
        if count == 0:
            raise BenchRunError(f"{path}: no line matches {pattern!r}; the TFX template changed")
    with open(path, "w") as f:
        f.write(text)


def run_template(work_dir: str, data_dir: str, rows: int, train_steps: int,
                 variant: str = TEMPLATE, prepare: bool = True) -> DagRun:
    """The template's local_runner.py from scratch (its metadata and outputs removed first);
    prepare: copy the template anew (else reuse the copy in work_dir, pointed at data_dir)."""
    if prepare:
        prepare_template(work_dir, data_dir, train_steps, variant)
    else:
        point_template(work_dir, data_dir, train_steps, variant)
    for generated in ("tfx_metadata", "tfx_pipeline_output"):
        shutil.rmtree(os.path.join(work_dir, generated), ignore_errors=True)
    process = _run([sys.executable, "local_runner.py"], work_dir, _env(PYTHONPATH=work_dir),
                   os.path.join(work_dir, "run.log"))
    batch = _read_int(os.path.join(work_dir, "models", "keras_model", "constants.py"),
                      r"^TRAIN_BATCH_SIZE = (\d+)")
    return _record(os.path.join(work_dir, "tfx_metadata", TEMPLATE_NAME, "metadata.db"),
                   TEMPLATE_NAME, rows, train_steps, batch, process, cwd=work_dir)
