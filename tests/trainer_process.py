"""Runs the real Trainer `run_fn` in its own process, as the TFX Trainer executor would.

    python tests/trainer_process.py FN_ARGS.json [--logical-cpus N]

The JSON holds FnArgs fields and `custom_config`. A fresh process lets a test split the CPU
into logical devices (only possible before TensorFlow starts) or kill the Trainer mid-run.
"""

import argparse
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("fn_args")
    parser.add_argument("--logical-cpus", type=int, default=1)
    args = parser.parse_args()

    import tensorflow as tf

    if args.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus)

    from absl import logging
    from tfx.components.trainer.fn_args_utils import FnArgs

    from trainer_module import run

    logging.set_verbosity(logging.INFO)
    with open(args.fn_args, encoding="utf-8") as f:
        run.run_fn(FnArgs(**json.load(f)))
    print("TRAINER DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
