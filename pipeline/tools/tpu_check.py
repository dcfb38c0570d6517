"""`make tpu-check`: the TPU readiness report on the latest run's Transform output.

    python -m pipeline.tools.tpu_check [--output-dir O]

Finds the run's Transform output in its ML Metadata store and hands the plain paths, the
trainer settings and the dataset spec to trainer_module/tool_tpu_step.py, which builds and compiles
the Trainer's step.
"""

import argparse
import os
import sys

from pipeline import console, names
from pipeline.env_settings import for_output_dir
from pipeline.pipeline_config import ConfigError
from pipeline.runs import run_summary
from trainer_module import keys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="TPU readiness report for the Trainer.")
    parser.add_argument("--dataset", help="a name under schemas/ (default: taxi)")
    parser.add_argument("--output-dir", help="the pipeline's OUTPUT_DIR (default: output/)")
    args = parser.parse_args(argv)
    try:
        config = for_output_dir(args.dataset, args.output_dir)
        spec = config.spec
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = run_summary.latest_run(config.metadata_path, config.pipeline_name)
    examples = summary.output(names.TRANSFORM, names.TRANSFORMED_EXAMPLES) if summary else None
    graph = summary.output(names.TRANSFORM, names.TRANSFORM_GRAPH) if summary else None
    if examples is None or graph is None:
        print(f"error: no Transform output of pipeline {config.pipeline_name!r} recorded in "
              f"{config.metadata_path}: run `make run` (with the same OUTPUT_DIR and DATASET) "
              "first", file=sys.stderr)
        return 2
    with console.session(config.output_dir, "tpu-check") as log:
        from trainer_module import tool_tpu_step

        try:
            train = os.path.join(examples.uri, keys.split_dir(keys.TRAIN_SPLIT), "*")
            report = tool_tpu_step.check(graph.uri, train, config.trainer, spec)
        except Exception:
            console.show_tail(log)
            raise
        print(report.format())
        return 0 if report.ready else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
