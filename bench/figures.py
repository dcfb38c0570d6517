"""`make figures`: the times docs/benchmarks.md quotes, measured again and written into it.

    python -m bench.figures [--tests] [--update-docs]

A fresh run of the taxi DAG (its printed summary, component times included), the unchanged
rerun after it, a run stopped by a bad setting, and with --tests the whole `make test` suite:
each timed as wall-clock seconds of the command a user types, on this machine, into
bench/results/figures.json and the figures block of docs/benchmarks.md; the fresh run's console
also becomes the README's example of what `make run` prints.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from bench import paths, tables
from pipeline.pipeline_config import REPO_ROOT

RUNNER = os.path.join(REPO_ROOT, "pipeline", "local_runner.py")
BLOCK_BEGIN, BLOCK_END = "<!-- figures:begin -->", "<!-- figures:end -->"
# The README's example of what `make run` prints, taken from the same fresh run.
README = os.path.join(REPO_ROOT, "README.md")
CONSOLE_BEGIN, CONSOLE_END = "<!-- console:begin -->", "<!-- console:end -->"


def _timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str, int]:
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    return time.monotonic() - started, result.stdout, result.returncode


def measure(with_tests: bool) -> dict:
    figures: dict = {**tables.stamp()}
    with tempfile.TemporaryDirectory() as output:
        runner = [sys.executable, RUNNER, "--output-dir", output]
        seconds, out, code = _timed(runner)
        if code != 0:
            raise RuntimeError(f"the taxi run failed (exit {code}):\n{out[-3000:]}")
        out = re.sub(r"Run report: .*", "Run report: output/report/index.html",
                     out.replace(output, "output").replace(REPO_ROOT + os.sep, ""))
        figures["first_run"] = {"seconds": seconds,
                                "summary": out[out.index("\nRun ") + 1:].strip(),
                                "console": console_excerpt(out)}
        seconds, out, code = _timed(runner)
        states = re.findall(r"^  \S+ +(COMPLETE|CACHED|FAILED|RUNNING|CANCELED) ", out, re.M)
        figures["cached_rerun"] = {"seconds": seconds, "cached_components": states.count("CACHED"),
                                   "components": len(states)}
        seconds, _, code = _timed(runner, {"PIPELINE_NAME": "Bad_Name"})
        figures["bad_setting"] = {"seconds": seconds, "exit_code": code}
    if with_tests:
        seconds, _, code = _timed(["make", "test"])
        figures["make_test"] = {"seconds": seconds, "exit_code": code}
    return figures


def console_excerpt(out: str) -> str:
    """A run's console as the README shows it: its lines up to the first finished component,
    then from the eval metrics on (the log's time stamp as <time>)."""
    lines = re.sub(r"run-\S+\.log", "run-<time>.log", out).strip().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("✓ "))
    metrics = next(i for i, line in enumerate(lines) if line.startswith("Eval metrics:"))
    return "\n".join([*lines[:first + 1], "…", *lines[metrics:]])


def markdown(figures: dict) -> str:
    m = figures["machine"]
    rows = [
        ("`make run` on the shipped taxi data, fresh output dir", figures["first_run"]["seconds"]),
        (f"the same command again ({figures['cached_rerun']['cached_components']} of "
         f"{figures['cached_rerun']['components']} components CACHED; the baseline lookup "
         "always runs)", figures["cached_rerun"]["seconds"]),
        (f"a run stopped by a bad setting (exit {figures['bad_setting']['exit_code']})",
         figures["bad_setting"]["seconds"]),
    ]
    if "make_test" in figures:
        rows.append((f"`make test` (exit {figures['make_test']['exit_code']})",
                     figures["make_test"]["seconds"]))
    lines = [f"Measured {figures['measured_at']} by `make figures` on {m['cpu']}, "
             f"{m['cores']} cores (wall-clock seconds, TensorFlow's start-up included):", "",
             "| command | seconds |", "|---|---:|"]
    lines += [f"| {what} | {seconds:.1f} |" for what, seconds in rows]
    lines += ["", "The first run's summary:", "", "```", figures["first_run"]["summary"], "```"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", action="store_true", help="time `make test` too (~10 min)")
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--results-dir", default=paths.RESULTS_DIR)
    args = parser.parse_args(argv)
    figures = measure(args.tests)
    os.makedirs(args.results_dir, exist_ok=True)
    with open(os.path.join(args.results_dir, "figures.json"), "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=2)
    text = markdown(figures)
    if args.update_docs:
        tables.replace_block(paths.BENCHMARKS_DOC, BLOCK_BEGIN, BLOCK_END, text)
        tables.replace_block(README, CONSOLE_BEGIN, CONSOLE_END,
                             f"```\n{figures['first_run']['console']}\n```")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
