"""Submits a compiled pipeline to Vertex AI Pipelines or to a Kubeflow Pipelines 2 endpoint.

    python -m pipeline.cloud.submit --target vertex [--config cloud.toml] [--dry-run]
    python -m pipeline.cloud.submit --target kfp --host http://localhost:8080 [--dry-run]

The pipeline file is the one `make compile` wrote for the target
(build/<target>/<pipeline_name>.json). Caching follows the `enable_cache` setting; a KFP run
runs as `kfp_service_account` (a Kubernetes service account), a Vertex run as
`service_account` (a Google Cloud email). Credentials
come only from Application Default Credentials or the environment (the SDKs find them); nothing
secret is read from flags, written to disk or printed. --dry-run builds the same request
objects with the real SDKs and prints them, without any network call.
"""

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from pipeline.cloud import compiled_spec, settings
from pipeline.cloud.kubeflow_v2_runner import pipeline_file as compiled_file
from pipeline.pipeline_config import ConfigError


def compiled_pipeline_file(cloud: settings.CloudConfig, target: str, path: str | None) -> str:
    path = path or compiled_file(cloud, target)
    if not os.path.isfile(path):
        raise ConfigError(f"pipeline file {path!r} does not exist: run `make compile "
                          f"TARGET={target}` first (or pass --pipeline-file)")
    return path


def vertex_job(cloud: settings.CloudConfig, pipeline_file: str, dry_run: bool):
    """The aiplatform PipelineJob, with the service account and network `submit` would set."""
    from google.cloud import aiplatform

    credentials = None
    if dry_run:  # no lookup of Application Default Credentials, no call
        from google.auth.credentials import AnonymousCredentials

        credentials = AnonymousCredentials()
    job = aiplatform.PipelineJob(
        display_name=cloud.pipeline_name,
        template_path=pipeline_file,
        pipeline_root=cloud.pipeline_root,
        project=cloud.project,
        location=cloud.region,
        enable_caching=cloud.enable_cache,
        credentials=credentials,
    )
    if cloud.service_account:
        job._gca_resource.service_account = cloud.service_account
    if cloud.network:
        job._gca_resource.network = cloud.network
    return job


def describe_vertex(job) -> dict[str, Any]:
    """The request, and what its Pusher step will deploy to an endpoint (null: none)."""
    resource = job._gca_resource
    body = json.loads(type(resource).to_json(resource))
    return {"parent": job._parent, "pipeline_job_id": job.job_id, "pipeline_job": body,
            "endpoint_deployment": compiled_spec.endpoint_deployment(body)}


def kfp_package(pipeline_file: str, directory: str) -> str:
    """KFP's client reads a PipelineSpec; the compiled file is a PipelineJob holding one."""
    with open(pipeline_file, encoding="utf-8") as f:
        job = json.load(f)
    path = os.path.join(directory, "pipeline_spec.yaml")  # JSON is YAML; kfp wants the suffix
    with open(path, "w", encoding="utf-8") as f:
        json.dump(job["pipelineSpec"], f)
    return path


def kfp_run_request(client, cloud: settings.CloudConfig, package: str, experiment_id: str):
    """The V2beta1Run body `create_run_from_pipeline_package` sends, built by the kfp client."""
    import kfp_server_api

    job_config = client._create_job_config(
        params={}, pipeline_package_path=package, pipeline_id=None, version_id=None,
        enable_caching=cloud.enable_cache, cache_key="",
        pipeline_root=cloud.pipeline_root)
    return kfp_server_api.V2beta1Run(
        experiment_id=experiment_id, display_name=cloud.pipeline_name,
        pipeline_spec=job_config.pipeline_spec, runtime_config=job_config.runtime_config,
        service_account=cloud.kfp_service_account or None)


def kfp_host(host: str) -> str:
    """The Kubeflow Pipelines endpoint, when one is given.

    Raises:
      ConfigError: none is.
    """
    if not host:
        raise ConfigError("no Kubeflow Pipelines endpoint: pass --host or set kfp_host "
                          "(KFP_HOST), e.g. http://localhost:8080")
    return host


def submit_kfp(cloud: settings.CloudConfig, pipeline_file: str, host: str,
               experiment: str, dry_run: bool) -> dict[str, Any]:
    import kfp

    with tempfile.TemporaryDirectory() as tmp:
        package = kfp_package(pipeline_file, tmp)
        if dry_run:
            # kfp.Client.__init__ asks the endpoint for its health; the request body needs no
            # connection, so the dry run uses a client that never connected.
            offline = kfp.Client.__new__(kfp.Client)
            request = kfp_run_request(offline, cloud, package,
                                      experiment_id=f"<id of experiment {experiment!r}>")
            return {"host": host, "experiment": experiment, "run": request.to_dict()}
        client = kfp.Client(host=host)
        result = client.create_run_from_pipeline_package(
            package, arguments={}, run_name=cloud.pipeline_name, experiment_name=experiment,
            pipeline_root=cloud.pipeline_root,
            enable_caching=cloud.enable_cache,
            service_account=cloud.kfp_service_account or None)
        return {"host": host, "experiment": experiment, "run_id": result.run_id}


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of every command that sends the compiled pipeline to a backend."""
    parser.add_argument("--target", choices=settings.TARGETS, default="vertex")
    parser.add_argument("--config", default=os.environ.get("CLOUD_CONFIG"),
                        help="cloud settings (TOML); see pipeline/cloud/cloud.example.toml")
    parser.add_argument("--pipeline-file",
                        help="default: build/<target>/<pipeline_name>.json")
    parser.add_argument("--host", help="Kubeflow Pipelines endpoint (default: kfp_host / "
                        "$KFP_HOST)")
    parser.add_argument("--experiment", help="KFP experiment name (default: the pipeline's)")
    parser.add_argument("--dry-run", action="store_true",
                        help="build and print the request; send nothing")


def answer(body: Callable[[], Any]) -> int:
    """Runs a command's body: prints the report it returns as JSON (exit 0), or its
    ConfigError (exit 2)."""
    try:
        report = body()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report if isinstance(report, str) else json.dumps(report, indent=2, default=str))
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Submit the compiled pipeline.")
    add_job_arguments(parser)
    args = parser.parse_args(argv)

    def body() -> Any:
        cloud = settings.load(args.config)
        pipeline_file = compiled_pipeline_file(cloud, args.target, args.pipeline_file)
        if args.target == "vertex":
            job = vertex_job(cloud, pipeline_file, args.dry_run)
            if args.dry_run:
                return describe_vertex(job)
            job.submit(service_account=cloud.service_account or None,
                       network=cloud.network or None)
            return f"Submitted {job.resource_name}"
        return submit_kfp(cloud, pipeline_file, kfp_host(args.host or cloud.kfp_host),
                          args.experiment or cloud.pipeline_name, args.dry_run)

    return answer(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
