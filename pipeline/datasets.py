"""Where a dataset's files live, and reading them: `schemas/<name>/spec.toml` and
`schemas/<name>/schema.pbtxt`, the reviewed pair that drives the whole DAG.

A dataset is named (`DATASET=penguins` → schemas/penguins/) or given as a folder holding the
two files. Both are read and checked against each other here, before TensorFlow loads; errors
name the file, the key, the value and the expected form.
"""

import json
import os
import re
import textwrap

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import REPO_ROOT
from pipeline.errors import ConfigError
from trainer_module import dataset_spec
from trainer_module.dataset_spec import DatasetSpec, SpecError

SCHEMAS_DIR = os.path.join(REPO_ROOT, "schemas")
DATA_ROOT = os.path.join(REPO_ROOT, "data")
SPEC_FILE = "spec.toml"
SCHEMA_FILE = "schema.pbtxt"
DEFAULT_DATASET = "taxi"
# Every pipeline is named after its dataset: Kubeflow Pipelines and Vertex AI key runs and
# caches by it, and the serving dir has a folder per pipeline.
PIPELINE_NAME_SUFFIX = "-tpu"
# A dataset's name becomes part of its pipeline's name, which Kubeflow and Vertex restrict.
# The widest comment line a written spec holds, after its "# ".
COMMENT_WIDTH = 96
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,60}$")


def dataset_dir(dataset: str) -> str:
    """schemas/<dataset> for a name; the folder itself for a path."""
    if os.sep in dataset or dataset.startswith("."):
        return os.path.abspath(dataset)
    return os.path.join(SCHEMAS_DIR, dataset)


def check_name(name: str, setting: str) -> str:
    """`name` if it is a dataset name: lowercase letters, digits and '-' (it becomes a folder
    under schemas/ and part of the pipeline name)."""
    if not NAME_RE.match(name):
        raise ConfigError(f"{setting}: the dataset's name {name!r} must be lowercase letters, "
                          "digits and '-' (at most 61), e.g. 'taxi' or 'house-prices'")
    return name


def dataset_name(dataset: str) -> str:
    """The dataset's name: the folder's name, checked for use in a pipeline name."""
    name = os.path.basename(os.path.normpath(dataset_dir(dataset)))
    return check_name(name, f"dataset={dataset!r}")


def shipped_data_dir(dataset: str) -> str:
    """data/<name>: where a shipped dataset's CSV files are."""
    return os.path.join(DATA_ROOT, dataset_name(dataset))


def load_schema(path: str) -> schema_pb2.Schema:
    """Parses a text-format TFMD schema, naming the file and the parse error on failure."""
    if not os.path.isfile(path):
        raise ConfigError(f"schema {path!r}: no such file; expected a text-format schema "
                          f"beside the dataset spec ({SCHEMA_FILE}); `make dataset` writes one")
    try:
        with open(path, encoding="utf-8") as f:
            schema = text_format.Parse(f.read(), schema_pb2.Schema())
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"schema {path!r} does not parse as a text-format tensorflow_metadata Schema: {e}"
        ) from e
    if not schema.feature:
        raise ConfigError(f"schema {path!r} defines no features: expected one "
                          "`feature {{ name: ... type: ... }}` block per CSV column")
    return schema


def load_spec(dataset: str) -> tuple[DatasetSpec, schema_pb2.Schema]:
    """The dataset's spec, checked against its schema, and the schema.

    Args:
      dataset: a name under schemas/ or a folder holding spec.toml and schema.pbtxt.

    Returns:
      (spec, schema).

    Raises:
      ConfigError: naming the file, the key, the value and the expected form.
    """
    import tomllib  # Python 3.11+: specs are read where pipelines are defined, not in the images

    folder = dataset_dir(dataset)
    name = dataset_name(dataset)
    if not os.path.isdir(folder):
        known = sorted(d for d in os.listdir(SCHEMAS_DIR)
                       if os.path.isfile(os.path.join(SCHEMAS_DIR, d, SPEC_FILE)))
        raise ConfigError(f"dataset={dataset!r}: no folder {folder}; expected one of "
                          f"{', '.join(known)} or a folder with {SPEC_FILE} and {SCHEMA_FILE} "
                          "(`make dataset NAME=… DATA_DIR=… LABEL=… TASK=…` writes one)")
    spec_path = os.path.join(folder, SPEC_FILE)
    schema_path = os.path.join(folder, SCHEMA_FILE)
    try:
        with open(spec_path, "rb") as f:
            values = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"dataset spec {spec_path!r}: no such file; expected the TOML spec "
                          "of the dataset (docs/dataset-spec.md)") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"dataset spec {spec_path!r} is not valid TOML: {e}") from e
    schema = load_schema(schema_path)
    try:
        spec = dataset_spec.from_dict(values, source=spec_path, name=name)
        dataset_spec.check_against_schema(spec, schema, spec_path, schema_path)
    except SpecError as e:
        raise ConfigError(str(e)) from e
    return spec, schema


def pipeline_name(dataset: str) -> str:
    """The pipeline name a run on `dataset` gets unless a setting names one: '<name>-tpu'."""
    return dataset_name(dataset) + PIPELINE_NAME_SUFFIX


# A TOML key TOML accepts unquoted.
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# The [csv] table as a spec without one reads it: written only when it differs.
_DEFAULT_CSV = {"delimiter": ",", "missing_values": []}


def spec_text(values: dict, notes: dict[str, list[str]] | None = None,
              header: list[str] | None = None) -> str:
    """The spec file's text for its dict form (`DatasetSpec.to_dict()`, where a feature's
    entry may carry a `why`), the one writer of that form: `load_spec` reads what it writes.

    Args:
      values: the spec's tables (label, features, evaluation, training, model, tpu, csv,
        spans, drift); `name` is the folder's, not written.
      notes: comments to write before a key or a table, by its dotted path (e.g.
        "training.epochs", "evaluation.thresholds.accuracy", "csv"), each wrapped to
        COMMENT_WIDTH.
      header: comment lines at the top of the file.

    Returns:
      The TOML text.
    """
    lines = [f"# {line}" for line in header or []]

    def comments(path: str) -> list[str]:
        return [f"# {line}" for note in (notes or {}).get(path, [])
                for line in textwrap.wrap(note, COMMENT_WIDTH) or [""]]

    def table(path: str, entries: dict) -> None:
        lines.extend(["", *comments(path), f"[{path}]"])
        for key, value in entries.items():
            if isinstance(value, dict) and key == "thresholds" and path in ("evaluation",
                                                                            "drift"):
                continue
            lines.extend(comments(f"{path}.{key}"))
            lines.append(f"{_toml_key(key)} = {_toml(value)}")

    table("label", values["label"])
    table("features", {column: entries[0] if len(entries) == 1 else entries
                       for column, entries in values["features"].items()})
    table("evaluation", values["evaluation"])
    table("evaluation.thresholds", values["evaluation"].get("thresholds", {}))
    for section in ("training", "model", "tpu"):
        if values.get(section):
            table(section, values[section])
    if values.get("csv", _DEFAULT_CSV) != _DEFAULT_CSV:
        table("csv", values["csv"])
    if values.get("spans"):
        table("spans", values["spans"])
    if values.get("drift"):
        table("drift", values["drift"])
        table("drift.thresholds", values["drift"].get("thresholds", {}))
    return "\n".join(lines) + "\n"


def _toml_key(name: str) -> str:
    """A TOML key for a column name: bare where TOML allows it, else quoted."""
    return name if _BARE_KEY.match(name) else _toml(name)


def _toml(value: object) -> str:
    if isinstance(value, str):  # a JSON string is a TOML basic string
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return repr(value)
