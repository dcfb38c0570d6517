"""Runs the DAG as compiled for Kubeflow Pipelines (no resolvers: the baseline and the
warm-start model come from the serving dir) under TFX's LocalDagRunner.

A Kubeflow cluster cannot exist here; the local orchestrator runs the same components with
the same wiring, so the resolver-free path is exercised end to end. Settings come from the
environment as for `make run` (DATASET, OUTPUT_DIR, TRAIN_STEPS, WARM_START), and
BATCH_PREDICT_URI adds the BulkInferrer step.
"""

import os
import sys

from absl import logging
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.orchestration.metadata import sqlite_metadata_connection_config

from pipeline import dag
from pipeline.env_settings import from_env
from pipeline.pipeline_config import REPO_ROOT


def main() -> int:
    logging.set_verbosity(logging.INFO)
    config = from_env()
    pipeline = dag.create_pipeline(config, dag.KubeflowTarget(
        image_project_dir=REPO_ROOT, resolvers=False,
        batch_predict_uri=os.environ.get("BATCH_PREDICT_URI", "")))
    pipeline.metadata_connection_config = sqlite_metadata_connection_config(
        config.metadata_path)
    LocalDagRunner().run(pipeline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
