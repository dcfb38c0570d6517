"""ImportSchemaGen whose cache key sees the schema's content, not only its path.

On Kubeflow/Vertex the schema is read inside the pipeline image at a fixed path, and locally
from the dataset's folder: an edited schema behind the same path would otherwise be served from
cache, and Transform and the Trainer would go on with the old one.
"""

from tfx import types
from tfx.components.schema_gen.import_schema_gen import component as import_schema_gen
from tfx.dsl.components.base import base_component
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter

from pipeline import names
from pipeline.cache_keys import keyed_spec

_KeyedSpec = keyed_spec(standard_component_specs.ImportSchemaGenSpec)


class ImportSchemaGenSpec(_KeyedSpec):
    """TFX's ImportSchemaGenSpec plus the schema's content hash and the step's code hash
    (pipeline/cache_keys.py)."""

    PARAMETERS = {**_KeyedSpec.PARAMETERS, names.SCHEMA_HASH: ExecutionParameter(type=str)}


class ImportSchemaGen(import_schema_gen.ImportSchemaGen):
    """Imports `schema_file`; `schema_hash` (its content hash) only keys the cache."""

    SPEC_CLASS = ImportSchemaGenSpec

    def __init__(self, schema_file: str, schema_hash: str) -> None:
        spec = ImportSchemaGenSpec(schema_file=schema_file, **{names.SCHEMA_HASH: schema_hash},
                                   schema=types.Channel(type=standard_artifacts.Schema))
        base_component.BaseComponent.__init__(self, spec=spec)
