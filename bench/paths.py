"""Where the bench works and what it writes: one owner for every module of bench/."""

import os

from pipeline.pipeline_config import REPO_ROOT

WORK_DIR = os.path.join(REPO_ROOT, "bench", "work")  # generated data and runs; make clean
RESULTS_DIR = os.path.join(REPO_ROOT, "bench", "results")  # the latest results, committed
# The quality suite's finished datasets, committed too: <fingerprint>/<dataset>.json.
QUALITY_KEPT_DIR = os.path.join(RESULTS_DIR, "quality-kept")
# The trees' fits, committed too: <digest of the rows, the seeds and the tree code>.json.
TREES_KEPT_DIR = os.path.join(RESULTS_DIR, "trees-kept")
# The page whose generated blocks (figures, bench, quality) the bench rewrites.
BENCHMARKS_DOC = os.path.join(REPO_ROOT, "docs", "benchmarks.md")
