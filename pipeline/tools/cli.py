"""`tpu-pipeline`: the project's commands with their own exit codes, for scripts.

    .venv/bin/tpu-pipeline run [--dataset NAME] [--data-dir D] [--output-dir O] ...
    .venv/bin/tpu-pipeline predict --data-dir D [--dataset NAME] [--output-dir O] ...
    .venv/bin/tpu-pipeline dataset | report | tpu-check | schema ...

`make` turns every failing command's code into its own 2, so a script calling `make run`
cannot tell a failed component (1) from a bad setting (2) or a busy output dir (3). This entry
point returns the command's code as it is (make prints it too). Settings come from the same
flags and environment variables as the make targets.
"""

import importlib
import sys

# Command → the module whose main(argv) runs it.
COMMANDS = {
    "run": "pipeline.local_runner",
    "predict": "pipeline.tools.predict",
    "dataset": "pipeline.tools.bootstrap",
    "report": "pipeline.runs.report",
    "tpu-check": "pipeline.tools.tpu_check",
    "schema": "pipeline.tools.infer_schema",
}
# What each exit code means, for every command.
EXIT_CODES = {0: "finished", 1: "a component or a scored row failed",
              2: "invalid settings or data (nothing ran)",
              3: "another run is using the same output dir (nothing ran)"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: tpu-pipeline {{{','.join(COMMANDS)}}} [options]; exit codes: "
              + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items()),
              file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


def entry_point() -> None:
    """The console script: ends the process with the command's code (after a run, without the
    interpreter's teardown of TensorFlow, TFX and Beam, as `make run` does)."""
    code = main()
    if sys.argv[1:2] == ["run"]:
        from pipeline import local_runner

        local_runner.exit_without_teardown(code)
    sys.exit(code)
