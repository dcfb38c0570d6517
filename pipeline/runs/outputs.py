"""`make clean-outputs`: what an output dir holds, and deleting it only when told to.

    python -m pipeline.runs.outputs [--output-dir O] [--confirm]

An output dir holds every pipeline's pushed models and the ML Metadata store, whose history is
what the next run compares against (its baseline) and reuses (its cache): nothing rebuilds
them. Without --confirm this lists what would go (pipelines, pushed versions, sizes) and deletes
nothing; `make clean` never touches an output dir.
"""

import argparse
import os
import shutil
import sys

from pipeline.pipeline_config import (
    DEFAULT_OUTPUT_DIR,
    METADATA_FILE,
    PIPELINE_ROOT_DIR,
    PREDICTIONS_DIR,
    SERVING_DIR,
)
from pipeline.runs import run_lock


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, files in os.walk(path) for name in files)


def _mib(size: int) -> str:
    return f"{size / 2 ** 20:.1f} MiB"


def describe(output_dir: str) -> list[str]:
    """One line per thing an output dir holds: pushed versions per pipeline, the store (with
    the pipelines it records), artifacts, reports."""
    lines = []
    serving = os.path.join(output_dir, SERVING_DIR)
    for pipeline in sorted(os.listdir(serving)) if os.path.isdir(serving) else []:
        versions = sorted(os.listdir(os.path.join(serving, pipeline)))
        lines.append(f"pushed models of {pipeline}: {len(versions)} version(s) "
                     f"{', '.join(versions)} ({_mib(_size(os.path.join(serving, pipeline)))})")
    store = os.path.join(output_dir, METADATA_FILE)
    if os.path.exists(store):
        lines.append(f"ML Metadata store {store} ({_mib(_size(store))}): the run history of "
                     f"{', '.join(_pipelines(store)) or 'no pipeline'}")
    for name, what in ((PIPELINE_ROOT_DIR, "artifacts"), ("report", "run report"),
                       (PREDICTIONS_DIR, "batch predictions")):
        path = os.path.join(output_dir, name)
        if os.path.exists(path):
            lines.append(f"{what} {path} ({_mib(_size(path))})")
    return lines


def _pipelines(store_path: str) -> list[str]:
    from pipeline.runs import run_summary

    try:
        store = run_summary.open_store(store_path)
        return sorted(c.name for c in store.get_contexts_by_type("pipeline"))
    except Exception as e:  # a damaged store is still listed, with what is wrong
        return [f"(unreadable: {type(e).__name__})"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="List, or with --confirm delete, an output dir.")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("--confirm", action="store_true", help="delete it")
    args = parser.parse_args(argv)
    output_dir = os.path.abspath(args.output_dir)
    if not os.path.isdir(output_dir):
        print(f"{output_dir}: nothing to delete (no such folder)")
        return 0
    lines = describe(output_dir)
    print(f"{output_dir} holds:")
    print("\n".join(f"  {line}" for line in lines) or "  nothing the pipeline wrote")
    if not args.confirm:
        print("Nothing was deleted. This cannot be rebuilt: pushed models, and the run history "
              "later runs compare with and reuse. To delete it: make clean-outputs CONFIRM=1"
              + ("" if output_dir == DEFAULT_OUTPUT_DIR else f" OUTPUT_DIR={args.output_dir}"))
        return 0
    try:
        with run_lock.exclusive_run(output_dir):
            for entry in os.listdir(output_dir):
                path = os.path.join(output_dir, entry)
                if entry != run_lock.LOCK_FILE:
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    except run_lock.RunInProgressError as e:
        print(f"error: {e}; nothing was deleted", file=sys.stderr)
        return 3
    os.remove(os.path.join(output_dir, run_lock.LOCK_FILE))
    os.rmdir(output_dir)
    print(f"Deleted {output_dir}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
