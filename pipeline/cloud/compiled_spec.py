"""Reading a compiled PipelineJob (the JSON `make compile` writes) back: its tasks and their
constant parameters, as the orchestrator will pass them."""

import json
from typing import Any

from pipeline import names


def tasks(job: dict) -> dict:
    return job["pipelineSpec"]["root"]["dag"]["tasks"]


def parameter(job: dict, task: str, name: str) -> Any:
    """A task's constant parameter, parsed from its compiled value (None when absent)."""
    runtime = (tasks(job).get(task, {}).get("inputs", {}).get("parameters", {})
               .get(name, {}).get("runtimeValue", {}))
    if "constant" in runtime:
        return runtime["constant"]
    # TFX writes the older form: constantValue with one typed field.
    typed = runtime.get("constantValue", {})
    return next(iter(typed.values()), None)


def endpoint_deployment(job: dict) -> dict[str, Any] | None:
    """What the Pusher step deploys to a Vertex AI endpoint (region, prediction image and the
    serving args), or None when it pushes to a filesystem."""
    from tfx.extensions.google_cloud_ai_platform import constants as vertex

    config = json.loads(parameter(job, names.PUSHER, names.CUSTOM_CONFIG) or "null") or {}
    if not config.get(vertex.ENABLE_VERTEX_KEY):
        return None
    return {"region": config.get(vertex.VERTEX_REGION_KEY),
            "serving_image": config.get(vertex.VERTEX_CONTAINER_IMAGE_URI_KEY),
            "serving_args": config.get(vertex.SERVING_ARGS_KEY)}
