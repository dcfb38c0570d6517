"""The newest served model, read from the serving dir: the baseline and warm-start source where
the orchestrator runs no resolvers.

Kubeflow Pipelines' backend refuses resolver executors ("resolver executors not implemented",
kubeflow/pipelines backend/src/v2/compiler/argocompiler/dag.go), and TFX compiles every
Resolver into one. The Pusher only ever pushes a blessed model, so the newest version in the
serving dir is the latest blessed model that was pushed; `ServedModel` copies it into its
output Model artifact (under Format-Serving, where the Evaluator and the Trainer look). When
the serving dir holds no model yet, the artifact is marked `has_model` = 0: the Evaluator
(pipeline/components/evaluator.py) and the Trainer's executor (trainer_module/executor.py) then
run without a baseline / base model, as they do when a resolver finds nothing.

As the Evaluator's baseline it takes the candidate model as an input: a new candidate makes it
read the serving dir again, an unchanged (cached) one keeps the baseline it was compared with.
"""

import os

from absl import logging
from tfx import types
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts
from tfx.utils import io_utils, path_utils

from trainer_module.executor import HAS_MODEL_KEY

SAVED_MODEL_FILE = "saved_model.pb"
SOURCE_KEY = "served_from"  # Model custom property: the serving dir version it copies


def newest_version(serving_dir: str) -> str | None:
    """The newest complete version folder under `serving_dir` (Pusher names versions by their
    push time in seconds), or None."""
    if not fileio.exists(serving_dir):
        return None
    versions = []
    for name in fileio.listdir(serving_dir):
        name = name.rstrip("/")
        if name.isdigit() and fileio.exists(os.path.join(serving_dir, name, SAVED_MODEL_FILE)):
            versions.append(name)
    return max(versions, key=int) if versions else None


def copy_newest(serving_dir: str, model: standard_artifacts.Model) -> str | None:
    """Copies the newest served version into `model` and marks it; returns the version's path,
    or None (and marks `model` as holding none) when nothing was served yet."""
    version = newest_version(serving_dir)
    if version is None:
        model.set_int_custom_property(HAS_MODEL_KEY, 0)
        logging.info("No model served in %s yet: nothing to compare with or start from",
                     serving_dir)
        return None
    source = os.path.join(serving_dir, version)
    io_utils.copy_dir(source, path_utils.serving_model_dir(model.uri))
    model.set_int_custom_property(HAS_MODEL_KEY, 1)
    model.set_string_custom_property(SOURCE_KEY, source)
    logging.info("Newest served model: %s", source)
    return source


@component
def ServedModel(  # noqa: N802 (a component's name is its node id)
    model: OutputArtifact[standard_artifacts.Model],
    serving_dir: Parameter[str],
    candidate: InputArtifact[standard_artifacts.Model] = None,
    code_version: Parameter[str] = "",
) -> None:
    """Copies the newest model in `serving_dir` into `model` (see the module docstring).

    candidate: the model to be compared, when this is the Evaluator's baseline (it only orders
      the steps and keys the cache).
    code_version: the step's code hash (pipeline/cache_keys.py), so an edited component never
      runs from cache.
    """
    del candidate, code_version
    copy_newest(serving_dir, model)


def served_model(serving_dir: str, node_id: str,
                 candidate: types.BaseChannel | None = None) -> ServedModel:
    """The ServedModel node with id `node_id` (the id of the resolver it stands in for)."""
    kwargs = {"candidate": candidate} if candidate is not None else {}
    return ServedModel(serving_dir=serving_dir, **kwargs).with_id(node_id)
