"""Compiles the DAG for Vertex AI Pipelines or Kubeflow Pipelines 2 (KFP v2 IR, PipelineJob JSON).

    python pipeline/cloud/kubeflow_v2_runner.py [--target vertex|kfp] [--config cloud.toml]
    tfx pipeline compile --engine vertex --pipeline_path pipeline/cloud/kubeflow_v2_runner.py

Settings come from the cloud config file (--config, or $CLOUD_CONFIG) and environment variables
(see pipeline/cloud/settings.py); the file goes to build/<target>/ (or $BUILD_DIR/<target>/).
The two targets differ where their backends do: Kubeflow Pipelines' backend refuses resolver
executors, so its spec finds the baseline in the serving dir instead. Nothing here talks to
Google Cloud: `pipeline/cloud/submit.py` sends the compiled file.
"""

import argparse
import json
import os
import sys

from pipeline import names
from pipeline.cloud import settings
from pipeline.pipeline_config import REPO_ROOT, ConfigError

# Where the pipeline image (Dockerfile) holds this project.
IMAGE_PROJECT_DIR = "/pipeline"
DEFAULT_OUTPUT_DIR = os.environ.get("BUILD_DIR") or os.path.join(REPO_ROOT, "build")
TARGET_ENV = "TARGET"
# Kubeflow Pipelines' driver takes a task's constant parameters only in the pipeline spec 2.1
# form (`runtimeValue.constant`); the 2.0 form TFX writes by default (`constantValue`) stops it
# with "param runtime value spec ... not implemented" (kubeflow/pipelines
# backend/src/v2/driver/resolve.go, resolveInputParameter), and it hands executors only
# `parameterValues`, which TFX's entrypoint reads when the 2.1 spec passes the inputs spec.
SPEC_2_1_TARGETS = ("kfp",)
# Steps that read or write state outside their artifacts (the serving dir, the span store of
# the drift gate and the window) must never come from cache.
UNCACHED_TASKS = (names.WARM_START_RESOLVER, names.DRIFT_VALIDATOR, names.SPAN_WINDOW)


def pipeline_file(cloud: settings.CloudConfig, target: str,
                  output_dir: str = DEFAULT_OUTPUT_DIR) -> str:
    """Where the compiled file for `target` goes."""
    return os.path.join(output_dir, target, f"{cloud.pipeline_name}.json")


def create_pipeline(cloud: settings.CloudConfig, target: str):
    """The DAG as it runs on `target`: in the pipeline image, with the cloud settings."""
    from pipeline import dag

    return dag.create_pipeline(cloud.pipeline_config().validate(), dag.KubeflowTarget(
        image_project_dir=IMAGE_PROJECT_DIR, vertex_region=cloud.region,
        vertex_training_args=cloud.vertex_training_args(), resolvers=target == "vertex",
        vertex_serving_args=cloud.vertex_serving_args(), serving_image=cloud.serving_image,
        batch_predict_uri=cloud.batch_predict_uri))


def compile_pipeline(cloud: settings.CloudConfig, output_dir: str,
                     target: str = "vertex") -> str:
    """Writes <output_dir>/<target>/<pipeline_name>.json and returns its path."""
    from tfx import v1 as tfx

    if target not in settings.TARGETS:
        raise ConfigError(f"target={target!r}: expected one of {', '.join(settings.TARGETS)}")
    if cloud.endpoint_name and target != "vertex":
        raise ConfigError(
            f"endpoint_name={cloud.endpoint_name!r} (ENDPOINT_NAME) with target={target!r}: "
            "endpoint deployment needs target 'vertex'; on Kubeflow Pipelines the Pusher "
            "writes the serving dir, where the next run finds its baseline. Unset "
            "endpoint_name, or compile with TARGET=vertex")
    pipeline = create_pipeline(cloud, target)
    path = pipeline_file(cloud, target, output_dir)
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=cloud.pipeline_image,
            use_pipeline_spec_2_1=target in SPEC_2_1_TARGETS),
        output_dir=os.path.dirname(path), output_filename=os.path.basename(path))
    runner.run(pipeline)
    _disable_cache(path, UNCACHED_TASKS)
    return path


def _disable_cache(path: str, tasks: tuple[str, ...]) -> None:
    """TFX sets one caching option for every task; these tasks get caching off."""
    with open(path, encoding="utf-8") as f:
        job = json.load(f)
    dag_tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    changed = [t for t in tasks if t in dag_tasks]
    for task in changed:
        dag_tasks[task]["cachingOptions"] = {"enableCache": False}
    if changed:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(job, f, indent=2, sort_keys=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Compile the pipeline for Kubeflow/Vertex.")
    parser.add_argument("--target", choices=settings.TARGETS,
                        default=os.environ.get(TARGET_ENV) or "vertex")
    parser.add_argument("--config", default=os.environ.get("CLOUD_CONFIG"),
                        help="cloud settings (TOML); see pipeline/cloud/cloud.example.toml")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    try:
        cloud = settings.load(args.config)
        path = compile_pipeline(cloud, os.path.abspath(args.output_dir), args.target)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Compiled {cloud.pipeline_name!r} for {args.target} to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
