"""ImportSchemaGen whose cache key sees the schema's content, and whose schema holds the
spec's ignored columns to nothing.

On Kubeflow/Vertex the schema is read inside the pipeline image at a fixed path, and locally
from the dataset's folder: an edited schema behind the same path would otherwise be served from
cache, and Transform and the Trainer would go on with the old one.

A column the spec ignores is read by no model, so its values are no contract: a daily export
may start filling a column that was empty, or change its type. The imported schema marks each
such column's lifecycle stage DISABLED, which TFDV's validation, TFT and tfx-bsl's readers all
skip (`tfx_bsl/tfxio/tensor_representation_util.py`, `_DISQUALIFYING_LIFECYCLE_STAGES`): the
column neither stops the run nor is parsed. The run's summary and report still say when it
changed (pipeline/spans/changes.py).
"""

import os

from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import types
from tfx.components.schema_gen import executor as schema_gen_executor
from tfx.components.schema_gen.import_schema_gen import component as import_schema_gen
from tfx.components.schema_gen.import_schema_gen import executor as import_schema_gen_executor
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import io_utils

from pipeline import names
from pipeline.cache_keys import keyed_spec

_KeyedSpec = keyed_spec(standard_component_specs.ImportSchemaGenSpec)


class ImportSchemaGenSpec(_KeyedSpec):
    """TFX's ImportSchemaGenSpec plus the schema's content hash, the spec's ignored columns and
    the step's code hash (pipeline/cache_keys.py)."""

    PARAMETERS = {**_KeyedSpec.PARAMETERS, names.SCHEMA_HASH: ExecutionParameter(type=str),
                  names.IGNORED_COLUMNS: ExecutionParameter(type=str, optional=True)}


def disable(schema: schema_pb2.Schema, columns: list[str]) -> None:
    """Marks each of `columns` DISABLED in `schema`: validated, parsed and served by none."""
    for feature in schema.feature:
        if feature.name in columns:
            feature.lifecycle_stage = schema_pb2.DISABLED


class Executor(import_schema_gen_executor.Executor):
    """TFX's import, then the ignored columns marked DISABLED in the imported copy."""

    def Do(self, input_dict: dict[str, list[types.Artifact]],
           output_dict: dict[str, list[types.Artifact]], exec_properties: dict) -> None:
        super().Do(input_dict, output_dict, exec_properties)
        columns = [c for c in (exec_properties.get(names.IGNORED_COLUMNS) or "").split(",") if c]
        if not columns:
            return
        path = os.path.join(artifact_utils.get_single_uri(
            output_dict[standard_component_specs.SCHEMA_KEY]),
            schema_gen_executor.DEFAULT_FILE_NAME)
        schema = io_utils.SchemaReader().read(path)
        disable(schema, columns)
        io_utils.write_pbtxt_file(path, schema)


class ImportSchemaGen(import_schema_gen.ImportSchemaGen):
    """Imports `schema_file` with `ignored_columns` DISABLED; `schema_hash` (its content hash)
    only keys the cache."""

    SPEC_CLASS = ImportSchemaGenSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(self, schema_file: str, schema_hash: str,
                 ignored_columns: tuple[str, ...] = ()) -> None:
        spec = ImportSchemaGenSpec(schema_file=schema_file, **{
            names.SCHEMA_HASH: schema_hash, names.IGNORED_COLUMNS: ",".join(ignored_columns)},
            schema=types.Channel(type=standard_artifacts.Schema))
        base_component.BaseComponent.__init__(self, spec=spec)
