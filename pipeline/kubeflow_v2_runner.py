"""Compiles the DAG for Kubeflow Pipelines 2 / Vertex AI Pipelines (KFP v2 IR, PipelineJob JSON).

    python pipeline/kubeflow_v2_runner.py [--config cloud.toml] [--output-dir build]
    tfx pipeline compile --engine vertex --pipeline_path pipeline/kubeflow_v2_runner.py

Settings come from the cloud config file (--config, or $CLOUD_CONFIG) and environment variables
(see pipeline/cloud_config.py); the file goes to build/ (or $BUILD_DIR). Nothing here talks
to Google Cloud: `pipeline/submit.py` sends the compiled file.
"""

import argparse
import os
import sys

from pipeline import cloud_config
from pipeline.pipeline_config import REPO_ROOT, ConfigError

# Where the pipeline image (Dockerfile) holds this project.
IMAGE_PROJECT_DIR = "/pipeline"
DEFAULT_OUTPUT_DIR = os.environ.get("BUILD_DIR") or os.path.join(REPO_ROOT, "build")


def compile_pipeline(cloud: cloud_config.CloudConfig, output_dir: str) -> str:
    """Writes <output_dir>/<pipeline_name>.json and returns its path."""
    from tfx import v1 as tfx

    from pipeline import dag

    pipeline = dag.create_pipeline(cloud.pipeline_config(), dag.KubeflowTarget(
        image_project_dir=IMAGE_PROJECT_DIR, vertex_region=cloud.region,
        vertex_training_args=cloud.vertex_training_args()))
    filename = f"{cloud.pipeline_name}.json"
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=cloud.pipeline_image),
        output_dir=output_dir, output_filename=filename)
    runner.run(pipeline)
    return os.path.join(output_dir, filename)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Compile the pipeline for Kubeflow/Vertex.")
    parser.add_argument("--config", default=os.environ.get("CLOUD_CONFIG"),
                        help="cloud settings (TOML); see pipeline/cloud.example.toml")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    try:
        cloud = cloud_config.load(args.config)
        path = compile_pipeline(cloud, os.path.abspath(args.output_dir))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Compiled {cloud.pipeline_name!r} to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
