"""Runs the DAG on this machine: LocalDagRunner, SQLite MLMD, Beam DirectRunner.

    python pipeline/local_runner.py [--dataset NAME] [--data-dir D] [--output-dir O]
                                    [--train-steps N]
    tfx pipeline create --engine local --pipeline_path pipeline/local_runner.py

Settings come from flags, else environment variables (DATASET, DATA_DIR, OUTPUT_DIR, ...:
see pipeline/env_settings.py), else defaults.

By default the terminal shows what the run will do, each component as it starts and ends, and
the summary; everything else goes to OUTPUT_DIR/logs/ (VERBOSE=1 shows it all: pipeline/console.py).

Exit codes: 0 the run finished (blessed and pushed, or not blessed and nothing pushed: the
summary says which); 1 a component failed; 2 a setting is invalid (nothing ran); 3 another run
is using the same output dir (nothing ran).
"""

import argparse
import logging as py_logging
import os
import sys

from pipeline import console
from pipeline.env_settings import from_env
from pipeline.pipeline_config import ConfigError, PipelineConfig, configure
from pipeline.runs import run_lock, run_summary, store_check
from pipeline.spans import intake

# TensorFlow and TFX take seconds to import: they load only after the settings and the output
# dir's lock are checked, so a bad setting or a busy output dir is reported in about a second.


def parse_config(argv: list[str]) -> PipelineConfig:
    parser = argparse.ArgumentParser(description="Run the TFX pipeline locally.")
    parser.add_argument("--dataset", help="a name under schemas/ or a folder with spec.toml "
                        "and schema.pbtxt (default: taxi)")
    parser.add_argument("--data-dir", help="folder of CSV files (default: data/<dataset>)")
    parser.add_argument("--output-dir", help="where pipeline root, MLMD and serving dir go")
    parser.add_argument("--pipeline-name")
    parser.add_argument("--train-steps", type=int)
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("dataset", args.dataset), ("data_dir", args.data_dir),
                                   ("output_dir", args.output_dir),
                                   ("pipeline_name", args.pipeline_name),
                                   ("train_steps", args.train_steps)) if v is not None}
    return configure(from_env(), **overrides)


def check_local_batch(config: PipelineConfig) -> None:
    """Off-TPU, the Trainer runs here, so its replica count is known now: check the batch."""
    if not config.trainer.data.global_batch_size:
        return  # per-replica batches divide by any replica count (and TensorFlow stays unloaded)
    from trainer_module import host_threads, plan, strategy

    host_threads.apply(config.trainer)  # before counting devices starts TensorFlow
    try:
        replicas = strategy.local_replica_count(config.trainer)
        if replicas is None:
            return  # on a TPU or across workers, run_fn checks it when it starts
        plan.per_replica_batch_size(config.trainer, replicas)
    except ValueError as e:
        raise ConfigError(f"trainer setting {e}") from e


def _running_under_tfx_cli() -> bool:
    """`tfx pipeline create` executes this file with LocalDagRunner.run patched to record it."""
    runner = sys.modules.get("tfx.orchestration.local.local_dag_runner")
    return runner is not None and hasattr(runner.LocalDagRunner.run, "__wrapped__")


def main(argv: list[str]) -> int:
    py_logging.getLogger().setLevel(py_logging.INFO)
    try:
        config = parse_config(argv).validate()
        check_local_batch(config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if _running_under_tfx_cli():  # it only records the pipeline: nothing runs
        _run_dag(config)
        return 0
    try:
        with run_lock.exclusive_run(config.output_dir):
            store_check.check_store(config.metadata_path)
            with console.session(config.output_dir, "run") as log:
                return _run(config, log)
    except run_lock.RunInProgressError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except ConfigError as e:  # the store: checked under the lock, before any component
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run_dag(config: PipelineConfig, bars: bool = False) -> None:
    from absl import logging
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import beam_signatures, dag
    from trainer_module import host_threads

    # The Trainer runs in this process, and TensorFlow fixes this when it starts.
    host_threads.apply(config.trainer)
    beam_signatures.install()
    logging.set_verbosity(logging.INFO)
    progress = console.ComponentProgress(bars)
    py_logging.getLogger("absl").addHandler(progress)
    try:
        LocalDagRunner().run(dag.create_pipeline(config))
    finally:
        py_logging.getLogger("absl").removeHandler(progress)


def _run(config: PipelineConfig, log: str | None) -> int:
    for execution in run_lock.cancel_abandoned_executions(config.metadata_path):
        print(f"Marked {execution} CANCELED: an earlier run stopped before it finished",
              flush=True)
    span = (f" (span {config.spans.name(config.span)}"
            + (", the newest" if config.span == config.spans.newest else "")
            + f" of {len(config.spans.folders)})" if config.spans else "")
    print(f"Running pipeline {config.pipeline_name!r} on {config.data_dir}{span} "
          f"→ outputs under {config.output_dir}", flush=True)
    if len(config.window) > 1:
        print(f"Window: Transform and the Trainer read {len(config.window)} spans, "
              f"{', '.join(config.spans.name(s) for s in config.window)}", flush=True)
    unread = intake.missing(config)
    if unread:
        print(f"Reading span(s) {', '.join(config.spans.name(s) for s in unread)} first "
              "(CsvExampleGen, StatisticsGen): this run reads them from the store", flush=True)
    beam = dict(a.lstrip("-").split("=", 1) for a in config.beam_pipeline_args if "=" in a)
    if "direct_running_mode" in beam:
        print(f"Beam steps: DirectRunner {beam['direct_running_mode']}, "
              f"{beam.get('direct_num_workers', '1')} worker(s)", flush=True)
    error = None
    try:
        if unread:
            intake.read_spans(config, unread)
        _run_dag(config, bars=log is not None and sys.stdout.isatty())
    except Exception as e:  # the summary below names the failed component
        error = e
    logged = console.mark(log)
    summary = run_summary.latest_run(config.metadata_path, config.pipeline_name)
    if summary is not None:
        print(run_summary.format_summary(summary), flush=True)
        _write_report(config)
    if error is not None or summary is None or not summary.succeeded:
        failed = ", ".join(summary.failed_nodes) if summary else ""
        console.error(f"error: the pipeline run failed{f' at {failed}' if failed else ''}: "
                      f"{error or 'see the component states above'}")
        console.show_tail(log, logged)
        return 1
    return 0


def _write_report(config: PipelineConfig) -> None:
    """The data's changes that did not stop the run (a `Data:` line each), then the HTML report
    of the run, both from one reading of what the run left; a report that cannot be written is
    said, not hidden, but it does not change the run's exit code (the run's own outcome is
    already recorded)."""
    from pipeline.runs import report

    try:
        data = report.collect(config)
        for line in data.changes.lines() if data.changes else []:
            print(f"Data: {line}", flush=True)
        print(f"Run report: {report.write_report(config, data)}", flush=True)
    except Exception as e:  # the report must not mask the run's own result
        console.error(f"error: the run report could not be written: {type(e).__name__}: {e}")


def exit_without_teardown(code: int) -> None:
    """Ends the process once everything is written, skipping the interpreter's teardown.

    MLMD commits each execution as it happens and the report is closed before this, but
    finalizing the modules TensorFlow, TFX and Beam loaded adds seconds to every run.
    """
    py_logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_code = main(sys.argv[1:])
    if _running_under_tfx_cli():
        sys.exit(exit_code)  # the CLI records the pipeline after this file returns
    exit_without_teardown(exit_code)
