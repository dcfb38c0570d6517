"""The Evaluator: TFX's Evaluator whose executor decodes only the columns the slices read, and
treats a baseline artifact that holds no model (pipeline/components/served_model.py) as no
baseline."""

import os

import tensorflow_model_analysis as tfma
from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import types
from tfx.components import Evaluator as TfxEvaluator
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.utils import io_utils, json_utils, proto_utils

from pipeline.cache_keys import keyed_spec
from pipeline.components import eval_model
from trainer_module.executor import models_held


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


EvaluatorSpec = keyed_spec(standard_component_specs.EvaluatorSpec)


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
            blessing=types.Channel(type=standard_artifacts.ModelBlessing))
        base_component.BaseComponent.__init__(self, spec=spec)
