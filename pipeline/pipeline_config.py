"""The pipeline's one config object, validated before any component runs.

Runners build a `PipelineConfig` (from defaults, environment variables or flags) and pass it to
`create_pipeline`. `validate()` checks every path and number and names the setting, the bad
value and the expected form, so a typo fails in a second instead of minutes into a run.
"""

import csv
import dataclasses
import functools
import glob
import os
import re
from collections.abc import Mapping

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from trainer_module.config import TrainerConfig, TrainerConfigError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_DIR = os.path.join(REPO_ROOT, "data")
DEFAULT_OUTPUT_DIR = os.path.join(REPO_ROOT, "output")
DEFAULT_SCHEMA_PATH = os.path.join(REPO_ROOT, "schemas", "schema.pbtxt")

# Kubeflow Pipelines / Vertex AI accept only these names.
PIPELINE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")


class ConfigError(ValueError):
    """A pipeline setting is missing or has a value outside its expected form."""


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything that varies between runs of the DAG.

    Outputs all go under `output_dir`: the pipeline root (artifacts), the SQLite MLMD store and
    the serving dir the Pusher writes blessed models to.
    """

    pipeline_name: str = "taxi-tpu"
    data_dir: str = DEFAULT_DATA_DIR
    output_dir: str = DEFAULT_OUTPUT_DIR
    schema_path: str = DEFAULT_SCHEMA_PATH
    train_steps: int = 1000
    eval_steps: int | None = None  # None: one full pass over the eval split
    min_eval_accuracy: float = 0.85
    max_accuracy_regression: float = 0.0  # allowed drop vs. the last blessed model
    enable_cache: bool = True
    beam_pipeline_args: tuple[str, ...] = (
        "--direct_running_mode=in_memory",
        "--direct_num_workers=1",
    )
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)

    @property
    def pipeline_root(self) -> str:
        return os.path.join(self.output_dir, "pipeline_root")

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.output_dir, "metadata", "metadata.db")

    @property
    def serving_model_dir(self) -> str:
        return os.path.join(self.output_dir, "serving_model")

    def validate(self) -> "PipelineConfig":
        """Raises ConfigError for the first bad setting; returns self when all are good."""
        if not isinstance(self.pipeline_name, str) or not PIPELINE_NAME_RE.match(
            self.pipeline_name
        ):
            raise ConfigError(
                f"pipeline_name={self.pipeline_name!r}: expected lowercase letters, digits and "
                "'-', starting with a letter or digit, at most 128 characters (the form "
                "Kubeflow Pipelines and Vertex AI accept), e.g. 'taxi-tpu'"
            )
        _positive_int("train_steps", self.train_steps)
        if self.eval_steps is not None:
            _positive_int("eval_steps", self.eval_steps)
        for name in ("min_eval_accuracy", "max_accuracy_regression"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ConfigError(f"{name}={value!r}: expected a number between 0 and 1")
        if not isinstance(self.trainer, TrainerConfig):
            raise ConfigError(f"trainer={self.trainer!r}: expected a TrainerConfig")
        schema = load_schema(self.schema_path)
        if is_remote(self.data_dir):
            # Not reachable from here: CsvExampleGen reads and checks it where it runs.
            if not self.data_dir.startswith("gs://"):
                raise ConfigError(f"data_dir={self.data_dir!r}: expected a local folder or a "
                                  "gs:// folder of CSV files")
        else:
            check_data_dir(self.data_dir, schema, self.schema_path)
        return self


def is_remote(path: str) -> bool:
    """A URL (gs://, s3://, ...) rather than a path on this machine."""
    return "://" in path


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name}={value!r}: expected a whole number > 0")


def load_schema(path: str) -> schema_pb2.Schema:
    """Parses a text-format TFMD schema, naming the file and the parse error on failure."""
    if not os.path.isfile(path):
        raise ConfigError(f"schema_path={path!r}: no such file; expected a text-format "
                          "schema such as schemas/schema.pbtxt")
    try:
        with open(path, encoding="utf-8") as f:
            schema = text_format.Parse(f.read(), schema_pb2.Schema())
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"schema_path={path!r} does not parse as a text-format tensorflow_metadata "
            f"Schema: {e}"
        ) from e
    if not schema.feature:
        raise ConfigError(f"schema_path={path!r} defines no features: expected one "
                          "`feature {{ name: ... type: ... }}` block per CSV column")
    return schema


def csv_files(data_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(data_dir, "*.csv")))


def check_data_dir(data_dir: str, schema: schema_pb2.Schema, schema_path: str) -> None:
    """The data dir holds well-formed UTF-8 CSV files that CsvExampleGen can read as one split.

    Every file must have the same header (CsvExampleGen rejects a split whose files differ),
    naming every column of the schema, and every row as many fields as the header; together
    they must hold at least one data row. One pass over each file, so a typo or a truncated
    copy fails here, naming the file and line, instead of minutes into a run.
    """
    if not os.path.isdir(data_dir):
        raise ConfigError(f"data_dir={data_dir!r}: no such directory; expected a folder of "
                          "CSV files with a header row")
    files = csv_files(data_dir)
    if not files:
        raise ConfigError(f"data_dir={data_dir!r} holds no *.csv files: expected one or more "
                          "CSV files with a header row")
    expected = [f.name for f in schema.feature]
    first_header: list[str] | None = None
    data_rows = 0
    for path in files:
        header, rows = _scan_csv(path)
        if header is None:
            raise ConfigError(f"data file {path!r} is empty: expected a header row naming "
                              f"the columns {expected}")
        missing = [c for c in expected if c not in header]
        if missing:
            raise ConfigError(f"data file {path!r} lacks column(s) {missing} that the schema "
                              f"{schema_path!r} names; its header is {header}")
        if first_header is None:
            first_header = header
        elif header != first_header:
            raise ConfigError(
                f"data file {path!r} has the header {header}, but {files[0]!r} has "
                f"{first_header}: every CSV file in data_dir={data_dir!r} must have the same "
                "columns in the same order"
            )
        data_rows += rows
    if data_rows == 0:
        raise ConfigError(f"data_dir={data_dir!r}: its CSV files hold a header but no data "
                          "rows; expected at least one row of data")


def _scan_csv(path: str) -> tuple[list[str] | None, int]:
    """(header, number of data rows) of a CSV file; ConfigError at the first malformed line.

    Each runner validates its config and then `create_pipeline` validates it again: a file
    whose size and modification time are unchanged is read once per process.
    """
    try:
        stat = os.stat(path)
    except OSError as e:
        raise ConfigError(f"data file {path!r} cannot be read as CSV: {e}") from e
    header, rows = _scan_csv_once(path, stat.st_size, stat.st_mtime_ns)
    return (list(header) if header is not None else None), rows


@functools.lru_cache(maxsize=256)
def _scan_csv_once(path: str, size: int, mtime_ns: int) -> tuple[tuple[str, ...] | None, int]:

    def decoded_lines(f):
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"data file {path!r}, line {number}: bytes {raw[e.start:e.end]!r} are not "
                    "UTF-8; expected UTF-8 text (re-encode the file, e.g. with "
                    "`iconv -f latin1 -t utf-8`)"
                ) from None

    try:
        with open(path, "rb") as f:
            reader = csv.reader(decoded_lines(f))
            header = next(reader, None)
            if not header:
                return None, 0
            rows = 0
            for row in reader:
                if len(row) != len(header):
                    raise ConfigError(
                        f"data file {path!r}, line {reader.line_num}: {len(row)} field(s) "
                        f"where the header has {len(header)}; expected one value (possibly "
                        "empty) per column: is the line cut short or does a value hold an "
                        "unquoted comma?"
                    )
                rows += 1
    except (OSError, csv.Error) as e:
        raise ConfigError(f"data file {path!r} cannot be read as CSV: {e}") from e
    return tuple(header), rows


_ENV_INTS = {"TRAIN_STEPS": "train_steps", "EVAL_STEPS": "eval_steps"}
_ENV_TRAINER_INTS = {
    "PER_REPLICA_BATCH_SIZE": "per_replica_batch_size",
    "GLOBAL_BATCH_SIZE": "global_batch_size",
    "STEPS_PER_EXECUTION": "steps_per_execution",
}
_ENV_FLOATS = {
    "MIN_EVAL_ACCURACY": "min_eval_accuracy",
    "MAX_ACCURACY_REGRESSION": "max_accuracy_regression",
}


def from_env(env: Mapping[str, str] | None = None, **overrides: object) -> PipelineConfig:
    """Config from defaults, then environment variables, then keyword overrides.

    Variables: PIPELINE_NAME, DATA_DIR, OUTPUT_DIR, SCHEMA_PATH, TRAIN_STEPS, EVAL_STEPS,
    MIN_EVAL_ACCURACY, MAX_ACCURACY_REGRESSION, PER_REPLICA_BATCH_SIZE, GLOBAL_BATCH_SIZE,
    STEPS_PER_EXECUTION, STRATEGY, TPU_ADDRESS, REQUIRE_TPU. Empty variables count as unset
    (so `make run DATA_DIR=` keeps the default).
    """
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    trainer: dict[str, object] = {}
    for var, field in (("PIPELINE_NAME", "pipeline_name"), ("DATA_DIR", "data_dir"),
                       ("OUTPUT_DIR", "output_dir"), ("SCHEMA_PATH", "schema_path")):
        if env.get(var):
            keep = field == "pipeline_name" or is_remote(env[var])
            values[field] = env[var] if keep else os.path.abspath(env[var])
    for var, field in _ENV_INTS.items():
        if env.get(var):
            values[field] = _env_int(var, env[var])
    for var, field in _ENV_FLOATS.items():
        if env.get(var):
            values[field] = _env_float(var, env[var])
    for var, field in _ENV_TRAINER_INTS.items():
        if env.get(var):
            trainer[field] = _env_int(var, env[var])
    if env.get("STRATEGY"):
        trainer["strategy"] = env["STRATEGY"]
    if env.get("TPU_ADDRESS"):
        trainer["tpu_address"] = env["TPU_ADDRESS"]
    if env.get("REQUIRE_TPU"):
        trainer["require_tpu"] = _env_bool("REQUIRE_TPU", env["REQUIRE_TPU"])
    trainer_overrides = overrides.pop("trainer", None)
    values.update(overrides)
    try:
        values["trainer"] = trainer_overrides or TrainerConfig(**trainer)
        return PipelineConfig(**values)
    except TrainerConfigError as e:
        raise ConfigError(f"trainer setting {e}") from e


def _env_int(var: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a whole number") from None


def _env_float(var: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a number") from None


def _env_bool(var: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ConfigError(f"{var}={raw!r}: expected true/false (or 1/0)")
