"""`make report` outside a run: what it says when there is nothing to report on.

The report of real runs (blessed, not blessed, stopped by bad data) is checked in headless
Chromium by tests/test_e2e.py, on the runs it makes anyway.
"""

import subprocess
import sys

from pipeline.pipeline_config import REPO_ROOT
from pipeline.runs import run_summary


def test_report_without_a_run_names_the_store_and_what_to_do(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pipeline.runs.report", "--output-dir",
                             str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert f"no run of pipeline 'taxi-tpu' is recorded in {tmp_path}/metadata/metadata.db" \
        in result.stderr
    assert "make run" in result.stderr
    assert not (tmp_path / "report").exists()


def test_component_time_does_not_depend_on_the_order_of_the_nodes():
    """These durations' float seconds sum to 310.65000000000003 in one order and 310.65 in the
    other, which the report's one decimal shows as 310.7 and 310.6."""
    milliseconds = [866, 30909, 44649, 26864, 58989, 37298, 57332, 33332, 20411]

    def summary(order: list[int]) -> run_summary.RunSummary:
        return run_summary.RunSummary("run", {
            f"node{i}": run_summary.NodeRun(f"node{i}", "COMPLETE", {}, 1000.0,
                                            1000.0 + milliseconds[i] / 1000)
            for i in order})

    forward = summary(list(range(len(milliseconds))))
    backward = summary(list(reversed(range(len(milliseconds)))))
    assert forward.component_seconds == backward.component_seconds == 310.65
    assert f"{forward.component_seconds:.1f}" == f"{backward.component_seconds:.1f}"


def test_a_component_that_failed_is_said_to_have_failed():
    """A failed Trainer is reported as failed, not as one that did not run; one that never
    started names where the run stopped."""
    from pipeline import names
    from pipeline.runs import report, run_summary

    def node(node_id: str, state: str) -> run_summary.NodeRun:
        return run_summary.NodeRun(node_id, state, {}, 0.0, 1.0)

    summary = run_summary.RunSummary("run", {names.TRANSFORM: node(names.TRANSFORM, "COMPLETE"),
                                             names.TRAINER: node(names.TRAINER, "FAILED")})
    assert "The Trainer failed in this run (FAILED)" in report._no_output(
        summary, names.TRAINER, "Trainer")
    assert "The Evaluator did not run in this run (stopped at Trainer)" in report._no_output(
        summary, names.EVALUATOR, "Evaluator")
