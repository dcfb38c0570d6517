"""The Trainer's peak memory: `run_fn` alone, in a fresh process, on a finished run's data.

    python -m bench.trainer_memory FN_ARGS.json

The local runner runs every component in one process, so its peak RSS mixes them all; this
replays the Trainer of a bench run (same Transform output, raw eval examples and settings, one
cache mode) in its own process, which reports its own peak RSS (getrusage, in KB on Linux) and
the input cache decision it made.
"""

import json
import logging as std_logging
import os
import resource
import subprocess
import sys
import tempfile

from pipeline import names
from pipeline.pipeline_config import METADATA_FILE, PipelineConfig
from pipeline.runs import run_summary
from trainer_module import keys

MARKER = "TRAINER MEMORY "
CACHE_PREFIX = "Input cache: "


def fn_args(output_dir: str, pipeline_name: str, config: PipelineConfig, train_steps: int,
            cache: str, work_dir: str) -> dict:
    """FnArgs fields replaying the Trainer of the latest run in `output_dir`, which ran with
    `config`."""
    from trainer_module.executor import RAW_EVAL_FILES_KEY

    summary = run_summary.latest_run(os.path.join(output_dir, METADATA_FILE),
                                     pipeline_name)
    transformed = summary.output(names.TRANSFORM, names.TRANSFORMED_EXAMPLES).uri
    raw = summary.output(names.CSV_EXAMPLE_GEN, names.EXAMPLES).uri
    return dict(
        train_files=[os.path.join(transformed, keys.split_dir(keys.TRAIN_SPLIT), "*")],
        eval_files=[os.path.join(transformed, keys.split_dir(keys.EVAL_SPLIT), "*")],
        train_steps=train_steps,
        eval_steps=None, transform_graph_path=summary.output(names.TRANSFORM,
                                                         names.TRANSFORM_GRAPH).uri,
        serving_model_dir=os.path.join(work_dir, "serving"),
        model_run_dir=os.path.join(work_dir, "run"),
        custom_config={**config.trainer.replace(cache=cache).to_custom_config(),
                       **config.spec.to_custom_config(),
                       RAW_EVAL_FILES_KEY: [
                           os.path.join(raw, keys.split_dir(keys.EVAL_SPLIT), "*")]})


def measure(output_dir: str, pipeline_name: str, config: PipelineConfig, train_steps: int,
            cache: str) -> dict:
    """{'peak_rss_mb', 'cache'} of the Trainer replayed with `config`'s settings and `cache`."""
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "fn_args.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(fn_args(output_dir, pipeline_name, config, train_steps, cache, work), f)
        result = subprocess.run([sys.executable, "-m", "bench.trainer_memory", path],
                                capture_output=True, text=True,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if result.returncode != 0:
        raise RuntimeError(f"the Trainer replay failed ({result.returncode}):\n"
                           f"{result.stderr[-3000:]}")
    [line] = [x for x in result.stdout.splitlines() if x.startswith(MARKER)]
    return json.loads(line[len(MARKER):])


class _CacheLine(std_logging.Handler):
    """Keeps the Trainer's "Input cache: ..." log lines."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: std_logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(CACHE_PREFIX):
            self.lines.append(message[len(CACHE_PREFIX):])


def main(argv: list[str]) -> int:
    from absl import logging
    from tfx.components.trainer.fn_args_utils import FnArgs

    from trainer_module import run

    decisions: list[str] = []
    with open(argv[0], encoding="utf-8") as f:
        args = FnArgs(**json.load(f))
    handler = _CacheLine(decisions)
    logging.get_absl_logger().addHandler(handler)
    logging.set_verbosity(logging.INFO)
    run.run_fn(args)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(MARKER + json.dumps({"peak_rss_mb": round(peak_kb / 1024, 1),
                               "cache": decisions[-1] if decisions else ""}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
