"""The newest served model, read from the serving dir: the baseline and warm-start source where
the orchestrator runs no resolvers.

Kubeflow Pipelines' backend refuses resolver executors ("resolver executors not implemented",
kubeflow/pipelines backend/src/v2/compiler/argocompiler/dag.go), and TFX compiles every
Resolver into one. The Pusher only ever pushes a blessed model, so the newest version in the
serving dir is the latest blessed model that was pushed; `ServedModel` copies it into its
output Model artifact (under Format-Serving, where the Evaluator and the Trainer look). When
the serving dir holds no model yet, the artifact is marked `has_model` = 0: the Evaluator below
and the Trainer's executor (trainer_module/executor.py) then run without a baseline / base
model, as they do when a resolver finds nothing.

As the Evaluator's baseline it takes the candidate model as an input: a new candidate makes it
read the serving dir again, an unchanged (cached) one keeps the baseline it was compared with.
"""

import os

import tensorflow_model_analysis as tfma
from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import types
from tfx.components import Evaluator as TfxEvaluator
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.components.base import base_component, executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from pipeline import eval_model
from pipeline.source_hash import CODE_VERSION_KEY, module_hash
from trainer_module.executor import HAS_MODEL_KEY, models_held

SAVED_MODEL_FILE = "saved_model.pb"
SOURCE_KEY = "served_from"  # Model custom property: the serving dir version it copies


def code_version() -> str:
    """Hash of this module and the executor helpers it uses: the steps it runs key on it."""
    return module_hash(__name__, "trainer_module.executor", eval_model.__name__)


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
    code_version: a hash of this module, so an edited component never runs from cache.
    """
    del candidate, code_version
    copy_newest(serving_dir, model)


def sliced_columns(eval_config: tfma.EvalConfig) -> set[str]:
    """The raw columns the eval config's slices (and per-slice thresholds) read."""
    columns: set[str] = set()

    def visit(message) -> None:
        if isinstance(message, tfma.SlicingSpec):
            columns.update(message.feature_keys, message.feature_values)
        for field, value in message.ListFields():
            if field.message_type is None or field.message_type.GetOptions().map_entry:
                continue
            for item in (value if field.label == field.LABEL_REPEATED else [value]):
                visit(item)

    visit(eval_config)
    return columns


def schema_of_columns(schema: schema_pb2.Schema, columns: set[str]) -> schema_pb2.Schema:
    """`schema` with only the features named in `columns`."""
    kept = schema_pb2.Schema()
    kept.CopyFrom(schema)
    del kept.feature[:]
    kept.feature.extend(f for f in schema.feature if f.name in columns)
    return kept


class EvaluatorExecutor(evaluator_executor.Executor):
    """TFX's Evaluator executor; a baseline artifact that holds no model is no baseline, and
    only the columns the slices read are decoded.

    The models read each example serialized (serving_default, and transform_features for the
    label), so decoded columns serve slicing only; TFMA carries every decoded column per
    example through its extracts, which costs the Evaluator more time the more columns the
    schema lists.
    """

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX API)
        key = standard_component_specs.BASELINE_MODEL_KEY
        if key in input_dict:
            input_dict = {**input_dict, key: models_held(input_dict[key])}
            if not input_dict[key]:
                del input_dict[key]
        if standard_component_specs.SCHEMA_KEY in input_dict:
            input_dict = {**input_dict, standard_component_specs.SCHEMA_KEY: [
                self._sliced_schema(input_dict, exec_properties)]}
        super().Do(input_dict, output_dict, exec_properties)

    def _sliced_schema(self, input_dict, exec_properties) -> standard_artifacts.Schema:
        schema_uri = artifact_utils.get_single_uri(
            input_dict[standard_component_specs.SCHEMA_KEY])
        schema = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_uri))
        eval_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.EVAL_CONFIG_KEY], tfma.EvalConfig())
        columns = sliced_columns(eval_config)
        artifact = standard_artifacts.Schema()
        artifact.uri = os.path.join(self._get_tmp_dir(), "sliced_schema")
        io_utils.write_pbtxt_file(os.path.join(artifact.uri, "schema.pbtxt"),
                                  schema_of_columns(schema, columns))
        logging.info("Evaluator decodes %s of the schema's %d columns (what the slices read)",
                     sorted(columns) or "none", len(schema.feature))
        return artifact


class EvaluatorSpec(standard_component_specs.EvaluatorSpec):
    """TFX's EvaluatorSpec plus the code hash of EvaluatorExecutor (pipeline/source_hash.py)."""

    PARAMETERS = {**standard_component_specs.EvaluatorSpec.PARAMETERS,
                  CODE_VERSION_KEY: ExecutionParameter(type=str)}


class Evaluator(TfxEvaluator):
    """TFX's Evaluator running EvaluatorExecutor (node id still "Evaluator")."""

    SPEC_CLASS = EvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(EvaluatorExecutor)

    def __init__(self, *, examples: types.BaseChannel, model: types.BaseChannel,
                 baseline_model: types.BaseChannel, schema: types.BaseChannel,
                 eval_config: tfma.EvalConfig) -> None:
        spec = EvaluatorSpec(
            examples=examples, model=model, baseline_model=baseline_model, schema=schema,
            eval_config=eval_config, example_splits=json_utils.dumps(None),
            fairness_indicator_thresholds=json_utils.dumps(None),
            # Its custom_eval_shared_model loads the models TFMA calls.
            module_path=eval_model.__name__,
            evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
            blessing=types.Channel(type=standard_artifacts.ModelBlessing),
            **{CODE_VERSION_KEY: code_version()})
        base_component.BaseComponent.__init__(self, spec=spec)


def served_model(serving_dir: str, node_id: str,
                 candidate: types.BaseChannel | None = None) -> ServedModel:
    """The ServedModel node with id `node_id` (the id of the resolver it stands in for)."""
    kwargs = {"candidate": candidate} if candidate is not None else {}
    return ServedModel(serving_dir=serving_dir,
                       code_version=code_version(),
                       **kwargs).with_id(node_id)
