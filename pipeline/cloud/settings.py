"""Settings for running the same DAG on Vertex AI Pipelines or Kubeflow Pipelines 2.

They come from a TOML file (`--config cloud.toml`, see cloud.example.toml) and environment
variables, which win. Nothing has a default that names a real project, bucket or image: a
missing or placeholder value is an error that names the setting, the variable and the form it
expects. `problems()` lists every bad setting at once (what `make preflight` prints);
`validate()` raises them together.
"""

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from pipeline.cloud.tpu_types import TPU_TYPES
from pipeline.datasets import pipeline_name
from pipeline.env_settings import BOOL_WORDS
from pipeline.pipeline_config import (
    DEFAULT_DATASET,
    PIPELINE_NAME_RE,
    PIPELINE_ROOT_DIR,
    ConfigError,
    PipelineConfig,
    Settings,
    configure,
    direct_runner_args,
)

TARGETS = ("vertex", "kfp")
BEAM_RUNNERS = ("direct", "dataflow")
DATA_SOURCES = ("csv", "bigquery")
# TFX images are over 10 GB: a Dataflow worker pulls and unpacks one before it starts, and the
# default boot disk (25 GB with Dataflow Shuffle) is too small for it (tensorflow/tfx#6386).
MIN_DATAFLOW_DISK_GB = 50

_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_GCS_RE = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/[^\s]*)?$")
# registry/path:tag or registry/path@sha256:digest
_IMAGE_RE = re.compile(
    r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:(?P<tag>[A-Za-z0-9._-]+)|@sha256:[0-9a-f]{64})$")
_EMAIL_RE = re.compile(r"^[a-z0-9-]+@[a-z0-9-]+\.iam\.gserviceaccount\.com$")
# A Kubernetes object name (RFC 1123 subdomain), which is what a KFP run's service account is.
_K8S_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NETWORK_RE = re.compile(r"^projects/[0-9]+/global/networks/[a-z0-9-]+$")
_SUBNETWORK_RE = re.compile(
    r"^(https://www\.googleapis\.com/compute/v1/projects/[a-z0-9-]+/)?"
    r"regions/(?P<region>[a-z]+-[a-z]+[0-9]+)/subnetworks/[a-z0-9-]+$")
_TABLE_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]\.[A-Za-z0-9_]+\.[A-Za-z0-9_$-]+$")
_ENDPOINT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
_MACHINE_TYPE_RE = re.compile(r"^[a-z][a-z0-9]*-[a-z]+(-[0-9]+)?$")
# Vertex AI's prebuilt prediction images: <multi-region>-docker.pkg.dev/vertex-ai/prediction/
# <framework>-<cpu|gpu>.<version>:latest (the form google-cloud-aiplatform's
# constants/prediction.py matches; these images are published only under :latest).
PREBUILT_IMAGE_RE = re.compile(
    r"^(?P<geo>us|europe|asia)-docker\.pkg\.dev/vertex-ai/prediction/"
    r"(?P<framework>[a-z0-9]+)-(?P<accelerator>cpu|gpu)\.(?P<version>[0-9]+-[0-9]+):latest$")
# The newest TensorFlow CPU prediction image Vertex AI offers (its list ends at 2.15: there is
# no prebuilt 2.16 one); TF Serving 2.15 loads a TF 2.16 SavedModel that uses no newer op.
SERVING_TF_VERSION = "2-15"
_PLACEHOLDER_RE = re.compile(r"YOUR[-_]|CHANGE[-_]?ME|<[^>]*>", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class _Field:
    var: str
    form: str
    required: bool = False


_FIELDS: dict[str, _Field] = {
    "project": _Field("GCP_PROJECT", "a Google Cloud project id, e.g. 'my-ml-project'", True),
    "region": _Field("GCP_REGION", "a region such as 'us-central1'", True),
    "bucket": _Field("GCS_BUCKET", "a gs:// bucket (or folder) for the pipeline root", True),
    "pipeline_image": _Field(
        "PIPELINE_IMAGE", "the pipeline image built by `make image`, with a version tag or a "
        "digest, e.g. 'us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:1.0'", True),
    "data_source": _Field("DATA_SOURCE", "'csv' (CSV files under data_uri) or 'bigquery' "
                          "(bigquery_query or bigquery_table)"),
    "data_uri": _Field("DATA_URI", "a gs:// folder holding the CSV files"),
    "bigquery_query": _Field("BIGQUERY_QUERY", "a BigQuery SQL SELECT whose columns are the "
                             "dataset's schema features"),
    "bigquery_table": _Field("BIGQUERY_TABLE", "a table 'project.dataset.table'"),
    "pipeline_name": _Field("PIPELINE_NAME", "lowercase letters, digits and '-' (default "
                            "'<dataset>-tpu')"),
    "dataset": _Field("DATASET", "a dataset name with a spec under schemas/<name>/, e.g. "
                      "'taxi' or 'penguins'"),
    "tpu": _Field("TPU_TYPE", f"one of {', '.join(TPU_TYPES)}, or empty for no TPU"),
    "tpu_trainer_image": _Field(
        "TPU_TRAINER_IMAGE", "the TPU trainer image built by `make image-tpu`, with a version "
        "tag or a digest"),
    "service_account": _Field(
        "SERVICE_ACCOUNT", "a Google Cloud service account email for Vertex AI and Dataflow, "
        "e.g. 'pipelines@my-ml-project.iam.gserviceaccount.com'"),
    "kfp_service_account": _Field(
        "KFP_SERVICE_ACCOUNT", "a Kubernetes service account name in the Kubeflow namespace, "
        "e.g. 'pipeline-runner' (not an email: KFP runs pods as a Kubernetes account)"),
    "network": _Field("VPC_NETWORK",
                      "a peered VPC network: 'projects/<number>/global/networks/<name>'"),
    "kfp_host": _Field("KFP_HOST", "a Kubeflow Pipelines endpoint, e.g. 'https://kfp.example'"),
    "enable_cache": _Field("ENABLE_CACHE", "true or false"),
    "warm_start": _Field("WARM_START", "true or false (true: the Trainer starts from the "
                         "latest blessed model)"),
    "beam_runner": _Field("BEAM_RUNNER", "'direct' or 'dataflow'"),
    "beam_direct_workers": _Field(
        "BEAM_DIRECT_WORKERS", "a whole number >= 1 of DirectRunner worker processes in a "
        "Beam step's container (1: the step's own process, fastest on small data), or unset "
        "for one per core"),
    "dataflow_machine_type": _Field("DATAFLOW_MACHINE_TYPE",
                                    "a machine type, e.g. 'n1-standard-4'"),
    "dataflow_max_workers": _Field("DATAFLOW_MAX_WORKERS", "a whole number >= 1"),
    "dataflow_disk_size_gb": _Field(
        "DATAFLOW_DISK_SIZE_GB", f"a whole number of GB >= {MIN_DATAFLOW_DISK_GB} (workers "
        "unpack the >10 GB pipeline image on it)"),
    "dataflow_subnetwork": _Field(
        "DATAFLOW_SUBNETWORK", "'regions/<region>/subnetworks/<name>' (or its full "
        "https://www.googleapis.com/compute/v1/projects/<project>/... URL), in the "
        "pipeline's region"),
    "dataflow_public_ips": _Field(
        "DATAFLOW_PUBLIC_IPS", "true or false (false: workers get only internal IPs, which "
        "needs a subnetwork with Private Google Access)"),
    "train_steps": _Field("TRAIN_STEPS", "a whole number > 0, or unset for the dataset "
                          "spec's budget"),
    "tune": _Field("TUNE", "true or false (true: a Tuner step searches the network and "
                   "learning rate before the Trainer)"),
    "tune_trials": _Field("TUNE_TRIALS", "a whole number >= 1"),
    "batch_predict_uri": _Field(
        "BATCH_PREDICT_URI", "a gs:// folder of new CSV rows (the schema's columns, the label "
        "not needed): BulkInferrer scores them with each blessed model"),
    "endpoint_name": _Field(
        "ENDPOINT_NAME", "a Vertex AI endpoint display name (letters, digits, '-', '_', at "
        "most 128): the Pusher deploys each blessed model there (Vertex AI Pipelines only)"),
    "endpoint_machine_type": _Field("ENDPOINT_MACHINE_TYPE",
                                    "a prediction machine type, e.g. 'n1-standard-2'"),
    "endpoint_min_replicas": _Field("ENDPOINT_MIN_REPLICAS", "a whole number >= 1"),
    "endpoint_max_replicas": _Field("ENDPOINT_MAX_REPLICAS",
                                    "a whole number >= endpoint_min_replicas"),
    "endpoint_traffic_percentage": _Field(
        "ENDPOINT_TRAFFIC_PERCENTAGE", "a whole number 0..100: the new model's share of the "
        "endpoint's traffic (the models already there share the rest)"),
    "endpoint_serving_image": _Field(
        "ENDPOINT_SERVING_IMAGE", "a Vertex AI prebuilt TensorFlow CPU prediction image, "
        "e.g. 'us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest' ('' picks the "
        "newest one in the region's multi-region)"),
}
# Every environment variable a setting is read from.
ENV_VARS = tuple(f.var for f in _FIELDS.values())
_POSITIVE_INTS = ("beam_direct_workers", "dataflow_max_workers", "dataflow_disk_size_gb",
                  "train_steps", "tune_trials", "endpoint_min_replicas", "endpoint_max_replicas")
_INTS = (*_POSITIVE_INTS, "endpoint_traffic_percentage")  # 0..100, checked with the endpoint
# Positive whole numbers whose absence is a choice of its own.
_UNSET_INTS = ("beam_direct_workers", "train_steps")
_BOOLS = ("enable_cache", "warm_start", "dataflow_public_ips", "tune")


@dataclasses.dataclass(frozen=True)
class CloudConfig:
    """Where and how the DAG runs on Google Cloud; each field is documented in _FIELDS and in
    pipeline/cloud/cloud.example.toml."""

    project: str
    region: str
    bucket: str
    pipeline_image: str
    data_source: str = "csv"
    data_uri: str = ""
    bigquery_query: str = ""
    bigquery_table: str = ""
    pipeline_name: str = ""  # '' → '<dataset>-tpu', as for `make run`
    dataset: str = DEFAULT_DATASET
    tpu: str = ""
    tpu_trainer_image: str = ""
    service_account: str = ""
    kfp_service_account: str = ""
    network: str = ""
    kfp_host: str = ""
    enable_cache: bool = True
    warm_start: bool = False
    beam_runner: str = "direct"
    beam_direct_workers: int | None = None
    dataflow_machine_type: str = "n1-standard-4"
    dataflow_max_workers: int = 4
    dataflow_disk_size_gb: int = 100
    dataflow_subnetwork: str = ""
    dataflow_public_ips: bool = True
    train_steps: int | None = None
    tune: bool = False
    tune_trials: int = 10
    batch_predict_uri: str = ""
    endpoint_name: str = ""
    endpoint_machine_type: str = "n1-standard-2"
    endpoint_min_replicas: int = 1
    endpoint_max_replicas: int = 1
    endpoint_traffic_percentage: int = 100
    endpoint_serving_image: str = ""

    def __post_init__(self) -> None:
        if not self.pipeline_name and isinstance(self.dataset, str):
            object.__setattr__(self, "pipeline_name", pipeline_name(self.dataset))

    def problems(self) -> list[tuple[str, str]]:
        """(setting, what is wrong and the expected form) for every bad setting."""
        found: list[tuple[str, str]] = []

        def bad(name: str, detail: str = "") -> None:
            found.append((name, _message(name, getattr(self, name), detail)))

        for name in _FIELDS:
            value = getattr(self, name)
            if isinstance(value, str) and value and _PLACEHOLDER_RE.search(value):
                bad(name, "replace the placeholder")
        placeholders = {name for name, _ in found}
        checks = {"project": _PROJECT_RE, "region": _REGION_RE, "bucket": _GCS_RE,
                  "pipeline_name": PIPELINE_NAME_RE}
        for name, pattern in checks.items():
            if name not in placeholders and not pattern.match(getattr(self, name)):
                bad(name)
        for name in ("pipeline_image", "tpu_trainer_image"):
            if name in placeholders or (name == "tpu_trainer_image" and not self.tpu):
                continue
            problem = image_problem(getattr(self, name))
            if problem:
                bad(name, problem + (" (required when TPU_TYPE is set)"
                                     if name == "tpu_trainer_image" else ""))
        if self.tpu and self.tpu not in TPU_TYPES:
            bad("tpu")
        self._source_problems(bad, placeholders)
        if (self.batch_predict_uri and "batch_predict_uri" not in placeholders
                and not _GCS_RE.match(self.batch_predict_uri)):
            bad("batch_predict_uri")
        if self.service_account and not _EMAIL_RE.match(self.service_account):
            bad("service_account")
        if self.kfp_service_account and (len(self.kfp_service_account) > 253
                                         or not _K8S_NAME_RE.match(self.kfp_service_account)):
            bad("kfp_service_account")
        if self.network and not _NETWORK_RE.match(self.network):
            bad("network")
        if self.kfp_host and not re.match(r"^https?://\S+$", self.kfp_host):
            bad("kfp_host")
        if self.beam_runner not in BEAM_RUNNERS:
            bad("beam_runner")
        elif self.beam_runner != "direct" and self.beam_direct_workers is not None:
            bad("beam_direct_workers", f"it sets DirectRunner's workers, and beam_runner is "
                f"{self.beam_runner!r}: unset it")
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if name in _UNSET_INTS and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                bad(name)
        if (isinstance(self.dataflow_disk_size_gb, int)
                and 0 < self.dataflow_disk_size_gb < MIN_DATAFLOW_DISK_GB):
            bad("dataflow_disk_size_gb")
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                bad(name)
        self._network_problems(bad)
        self._endpoint_problems(bad)
        return found

    def _endpoint_problems(self, bad) -> None:
        if not self.endpoint_name:
            return
        if not _ENDPOINT_NAME_RE.match(self.endpoint_name):
            bad("endpoint_name")
        if not _MACHINE_TYPE_RE.match(self.endpoint_machine_type):
            bad("endpoint_machine_type")
        low, high = self.endpoint_min_replicas, self.endpoint_max_replicas
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) and (
                high < low):
            bad("endpoint_max_replicas", f"it is below endpoint_min_replicas={low}")
        traffic = self.endpoint_traffic_percentage
        if isinstance(traffic, bool) or not isinstance(traffic, int) or not 0 <= traffic <= 100:
            bad("endpoint_traffic_percentage")
        image = PREBUILT_IMAGE_RE.match(self.serving_image)
        if not image or image.group("framework") != "tf2" or image.group("accelerator") != "cpu":
            bad("endpoint_serving_image", "TFX's Vertex Pusher gives the image no port, route "
                "or arguments, so only Vertex AI's prebuilt TensorFlow images serve the "
                "SavedModel as uploaded")

    @property
    def serving_image(self) -> str:
        """The prediction image the endpoint runs: the setting, or the newest prebuilt
        TensorFlow CPU image in the multi-region of `region`."""
        if self.endpoint_serving_image:
            return self.endpoint_serving_image
        return (f"{multi_region(self.region)}-docker.pkg.dev/vertex-ai/prediction/"
                f"tf2-cpu.{SERVING_TF_VERSION}:latest")

    def vertex_serving_args(self) -> dict[str, Any] | None:
        """What TFX's Vertex Pusher passes to `aiplatform.Model.deploy` (its
        `ai_platform_serving_args`), or None when no endpoint is configured."""
        if not self.endpoint_name:
            return None
        args: dict[str, Any] = {
            "project": self.project,
            "endpoint_name": self.endpoint_name,
            "machine_type": self.endpoint_machine_type,
            "min_replica_count": self.endpoint_min_replicas,
            "max_replica_count": self.endpoint_max_replicas,
            "traffic_percentage": self.endpoint_traffic_percentage,
        }
        if self.service_account:
            args["service_account"] = self.service_account
        return args

    def _source_problems(self, bad, placeholders: set[str]) -> None:
        if self.data_source not in DATA_SOURCES:
            bad("data_source")
        elif self.data_source == "csv":
            if "data_uri" not in placeholders and not _GCS_RE.match(self.data_uri):
                bad("data_uri", "(required when data_source is 'csv')")
        elif bool(self.bigquery_query) == bool(self.bigquery_table):
            bad("bigquery_query", "set exactly one of bigquery_query (BIGQUERY_QUERY) and "
                "bigquery_table (BIGQUERY_TABLE) when data_source is 'bigquery'")
        elif self.bigquery_table and not _TABLE_RE.match(self.bigquery_table):
            bad("bigquery_table")
        elif self.bigquery_query and not re.match(r"^\s*(SELECT|WITH)\b", self.bigquery_query,
                                                  re.IGNORECASE):
            bad("bigquery_query")

    def _network_problems(self, bad) -> None:
        subnet = _SUBNETWORK_RE.match(self.dataflow_subnetwork)
        if self.dataflow_subnetwork and not subnet:
            bad("dataflow_subnetwork")
        elif subnet and subnet.group("region") != self.region:
            bad("dataflow_subnetwork", f"its region is {subnet.group('region')!r}, the "
                f"pipeline's is {self.region!r}: Dataflow workers start only in a subnetwork "
                "of the job's region")
        if self.beam_runner == "dataflow" and not self.dataflow_subnetwork:
            if self.network:
                bad("dataflow_subnetwork", "required when network (VPC_NETWORK) is set: "
                    "Dataflow workers on that network need one of its subnetworks")
            elif not self.dataflow_public_ips:
                bad("dataflow_subnetwork", "required when dataflow_public_ips is false")

    def validate(self) -> "CloudConfig":
        """Raises ConfigError listing every bad setting; returns self when all are good."""
        problems = self.problems()
        if problems:
            raise ConfigError("; ".join(message for _, message in problems))
        return self

    @property
    def output_dir(self) -> str:
        return f"{self.bucket.rstrip('/')}/{self.pipeline_name}"

    @property
    def pipeline_root(self) -> str:
        return f"{self.output_dir}/{PIPELINE_ROOT_DIR}"

    @property
    def temp_location(self) -> str:
        return f"{self.output_dir}/tmp"

    @property
    def bigquery_source(self) -> str:
        """The query BigQueryExampleGen runs ('' for CSV data)."""
        if self.data_source != "bigquery":
            return ""
        return self.bigquery_query or f"SELECT * FROM `{self.bigquery_table}`"

    def beam_pipeline_args(self) -> tuple[str, ...]:
        """DirectRunner in the component's container, or Dataflow workers running the pipeline
        image as their SDK container."""
        if self.beam_runner == "direct":
            args = direct_runner_args(self.beam_direct_workers)
            if self.data_source == "bigquery":
                # BigQuery's export needs a project and a gs:// temp location wherever it runs.
                args += (f"--project={self.project}", f"--temp_location={self.temp_location}")
            return args
        return (
            "--runner=DataflowRunner",
            f"--project={self.project}",
            f"--region={self.region}",
            f"--temp_location={self.temp_location}",
            f"--machine_type={self.dataflow_machine_type}",
            f"--max_num_workers={self.dataflow_max_workers}",
            f"--disk_size_gb={self.dataflow_disk_size_gb}",
            # Workers run the pipeline image (the project and the Beam SDK installed there):
            # custom containers need Runner v2, and the SDK is not staged from here.
            f"--sdk_container_image={self.pipeline_image}",
            "--experiments=use_runner_v2",
            "--sdk_location=container",
        ) + ((f"--subnetwork={self.dataflow_subnetwork}",) if self.dataflow_subnetwork else ()
             ) + (("--no_use_public_ips",) if not self.dataflow_public_ips else ()
                  ) + ((f"--service_account_email={self.service_account}",)
                       if self.service_account else ())

    def pipeline_config(self) -> PipelineConfig:
        """The PipelineConfig this cloud run trains with: gs:// paths, TPU settings."""
        # The dataset spec's own sizes (batch, budget, network) still apply under these.
        trainer: dict[str, object] = {"warm_start": self.warm_start}
        if self.tpu:
            trainer.update(strategy="tpu", tpu_address="local")
        return configure(
            Settings(trainer=trainer), pipeline_name=self.pipeline_name, dataset=self.dataset,
            data_dir=self.data_uri if self.data_source == "csv" else "",
            bigquery_query=self.bigquery_source, output_dir=self.output_dir,
            **({"train_steps": self.train_steps} if self.train_steps else {}),
            tune=self.tune, tune_trials=self.tune_trials,
            enable_cache=self.enable_cache,
            beam_pipeline_args=self.beam_pipeline_args())

    def vertex_training_args(self) -> dict[str, Any] | None:
        """The Vertex AI CustomJob the Trainer submits when a TPU is configured (TFX's
        `ai_platform_training_args`: the project, and the CustomJobSpec as `job_spec`).

        TFX's Vertex client replaces only `container_spec.command`, so the environment the TPU
        type's runtime needs (PJRT on v5e) goes in `container_spec.env`.
        """
        if not self.tpu:
            return None
        tpu = TPU_TYPES[self.tpu]
        machine_spec: dict[str, Any] = {"machine_type": tpu.machine_type,
                                        "accelerator_type": tpu.accelerator_type,
                                        "accelerator_count": tpu.accelerator_count}
        if tpu.topology:
            machine_spec["tpu_topology"] = tpu.topology
        container: dict[str, Any] = {"image_uri": self.tpu_trainer_image}
        if tpu.env:
            container["env"] = [{"name": k, "value": v} for k, v in tpu.env.items()]
        job_spec: dict[str, Any] = {
            "worker_pool_specs": [{
                "machine_spec": machine_spec,
                "replica_count": 1,
                "container_spec": container,
            }],
        }
        if self.service_account:
            job_spec["service_account"] = self.service_account
        if self.network:
            job_spec["network"] = self.network
        return {"project": self.project, "job_spec": job_spec}


def multi_region(region: str) -> str:
    """The Artifact Registry multi-region (us, europe, asia) nearest a Google Cloud region."""
    geo = region.split("-")[0]
    return {"northamerica": "us", "southamerica": "us", "australia": "asia",
            "me": "europe", "africa": "europe"}.get(geo, geo)


def image_problem(image: str) -> str:
    """Why `image` cannot be a pipeline or trainer image ('' when it can)."""
    match = _IMAGE_RE.match(image)
    if not match:
        return "expected registry/path:tag or registry/path@sha256:<digest>"
    if match.group("tag") == "latest":
        return ("':latest' moves on every build, and Vertex AI and Kubeflow cache steps by the "
                "image name: a rebuilt :latest would be served from cache; use a version tag "
                "(e.g. :1.0) or a digest (@sha256:...)")
    return ""


def _message(name: str, value: object, detail: str = "") -> str:
    field = _FIELDS[name]
    return (f"{name}={value!r} ({field.var} or `{name}` in the cloud config): "
            + (f"{detail}; " if detail else "") + f"expected {field.form}")


def _parse(name: str, raw: str) -> object:
    if name in _INTS:
        try:
            return int(raw)
        except ValueError:
            return raw  # reported by problems() with the expected form
    if name in _BOOLS:
        return BOOL_WORDS.get(raw.strip().lower(), raw)
    return raw


def read(path: str | None = None, env: Mapping[str, str] | None = None,
         defaults: Mapping[str, str] = ()) -> CloudConfig:
    """CloudConfig from a TOML file, then environment variables, then `defaults` (values by
    variable name) for what neither sets; not yet validated.

    Raises:
      ConfigError: the file is missing or not TOML, it names an unknown setting, or a required
        setting is missing.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    if path:
        if not os.path.isfile(path):
            raise ConfigError(f"cloud config {path!r}: no such file; copy "
                              "pipeline/cloud/cloud.example.toml and fill it in")
        try:
            with open(path, "rb") as f:
                values = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"cloud config {path!r} is not valid TOML: {e}") from e
        unknown = sorted(set(values) - set(_FIELDS))
        if unknown:
            raise ConfigError(f"cloud config {path!r}: unknown setting(s) {unknown}; expected "
                              f"only {sorted(_FIELDS)}")
    defaults = dict(defaults)
    for name, field in _FIELDS.items():
        if env.get(field.var):
            values[name] = _parse(name, env[field.var])
        elif name not in values and defaults.get(field.var):
            values[name] = _parse(name, defaults[field.var])
    missing = [n for n, f in _FIELDS.items() if f.required and not values.get(n)]
    if missing:
        raise ConfigError(
            "missing cloud setting(s): " + "; ".join(
                f"{n} ({_FIELDS[n].var}): {_FIELDS[n].form}" for n in missing)
            + ". Set them in the cloud config file (--config) or as environment variables."
        )
    return CloudConfig(**values)


def load(path: str | None = None, env: Mapping[str, str] | None = None) -> CloudConfig:
    """CloudConfig from a TOML file, then environment variables; validated.

    Raises:
      ConfigError: as `read`, or listing every setting outside its expected form.
    """
    return read(path, env).validate()
