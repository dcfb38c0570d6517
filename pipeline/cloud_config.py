"""Settings for running the same DAG on Vertex AI Pipelines or Kubeflow Pipelines 2.

They come from a TOML file (`--config cloud.toml`, see cloud.example.toml) and environment
variables, which win. Nothing has a default that names a real project, bucket or image: a
missing or placeholder value is an error that names the setting, the variable and the form it
expects.
"""

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from pipeline.env_settings import from_env
from pipeline.pipeline_config import PIPELINE_NAME_RE, ConfigError, PipelineConfig
from trainer_module.config import TrainerConfig

# Vertex AI TPU machines: name → (machine_type, accelerator_type, accelerator_count, topology).
# accelerator_type is the Vertex API enum (google.cloud.aiplatform_v1 AcceleratorType).
TPU_MACHINES: dict[str, tuple[str, str, int, str]] = {
    "v2-8": ("cloud-tpu", "TPU_V2", 8, ""),
    "v3-8": ("cloud-tpu", "TPU_V3", 8, ""),
    "v5e-1": ("ct5lp-hightpu-1t", "TPU_V5_LITEPOD", 1, "1x1"),
    "v5e-4": ("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, "2x2"),
    "v5e-8": ("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", 8, "2x4"),
}
BEAM_RUNNERS = ("direct", "dataflow")

_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_GCS_RE = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/[^\s]*)?$")
# registry/path:tag or registry/path@sha256:digest
_IMAGE_RE = re.compile(
    r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$")
_PLACEHOLDER_RE = re.compile(r"YOUR[-_]|CHANGE[-_]?ME|<[^>]*>", re.IGNORECASE)

# setting → (environment variable, required, description of the expected form)
_FIELDS: dict[str, tuple[str, bool, str]] = {
    "project": ("GCP_PROJECT", True, "a Google Cloud project id, e.g. 'my-ml-project'"),
    "region": ("GCP_REGION", True, "a region such as 'us-central1'"),
    "bucket": ("GCS_BUCKET", True, "a gs:// bucket (or folder) for the pipeline root"),
    "pipeline_image": ("PIPELINE_IMAGE", True,
                       "the pipeline image built by `make image`, e.g. "
                       "'us-docker.pkg.dev/my-ml-project/tfx/taxi-tpu:1.0'"),
    "data_uri": ("DATA_URI", True, "a gs:// folder holding the CSV files"),
    "pipeline_name": ("PIPELINE_NAME", False, "lowercase letters, digits and '-'"),
    "tpu": ("TPU_TYPE", False, f"one of {', '.join(TPU_MACHINES)}, or empty for no TPU"),
    "tpu_trainer_image": ("TPU_TRAINER_IMAGE", False,
                          "the TPU trainer image built by `make image-tpu`"),
    "service_account": ("SERVICE_ACCOUNT", False,
                        "a service account email, e.g. 'pipelines@my-ml-project.iam."
                        "gserviceaccount.com'"),
    "network": ("VPC_NETWORK", False,
                "a peered VPC network: 'projects/<number>/global/networks/<name>'"),
    "kfp_host": ("KFP_HOST", False, "a Kubeflow Pipelines endpoint, e.g. 'https://kfp.example'"),
    "beam_runner": ("BEAM_RUNNER", False, "'direct' or 'dataflow'"),
    "dataflow_machine_type": ("DATAFLOW_MACHINE_TYPE", False, "a machine type, e.g. "
                              "'n1-standard-4'"),
    "dataflow_max_workers": ("DATAFLOW_MAX_WORKERS", False, "a whole number >= 1"),
    "train_steps": ("TRAIN_STEPS", False, "a whole number > 0"),
}


@dataclasses.dataclass(frozen=True)
class CloudConfig:
    project: str
    region: str
    bucket: str
    pipeline_image: str
    data_uri: str
    pipeline_name: str = "taxi-tpu"
    tpu: str = ""
    tpu_trainer_image: str = ""
    service_account: str = ""
    network: str = ""
    kfp_host: str = ""
    beam_runner: str = "direct"
    dataflow_machine_type: str = "n1-standard-4"
    dataflow_max_workers: int = 4
    train_steps: int = 1000

    def validate(self) -> "CloudConfig":
        for name, (_, _, form) in _FIELDS.items():
            value = getattr(self, name)
            if isinstance(value, str) and value and _PLACEHOLDER_RE.search(value):
                raise _error(name, value, f"replace the placeholder with {form}")
        checks = {
            "project": _PROJECT_RE, "region": _REGION_RE, "bucket": _GCS_RE,
            "data_uri": _GCS_RE, "pipeline_image": _IMAGE_RE, "pipeline_name": PIPELINE_NAME_RE,
        }
        for name, pattern in checks.items():
            if not pattern.match(getattr(self, name)):
                raise _error(name, getattr(self, name), _FIELDS[name][2])
        if self.tpu and self.tpu not in TPU_MACHINES:
            raise _error("tpu", self.tpu, _FIELDS["tpu"][2])
        if self.tpu and not _IMAGE_RE.match(self.tpu_trainer_image):
            raise _error("tpu_trainer_image", self.tpu_trainer_image,
                         _FIELDS["tpu_trainer_image"][2] + " (required when TPU_TYPE is set)")
        if self.service_account and not re.match(r"^[^@\s]+@[^@\s]+\.iam\.gserviceaccount\.com$",
                                                 self.service_account):
            raise _error("service_account", self.service_account, _FIELDS["service_account"][2])
        if self.network and not re.match(r"^projects/[0-9]+/global/networks/[a-z0-9-]+$",
                                         self.network):
            raise _error("network", self.network, _FIELDS["network"][2])
        if self.kfp_host and not re.match(r"^https?://\S+$", self.kfp_host):
            raise _error("kfp_host", self.kfp_host, _FIELDS["kfp_host"][2])
        if self.beam_runner not in BEAM_RUNNERS:
            raise _error("beam_runner", self.beam_runner, _FIELDS["beam_runner"][2])
        for name in ("dataflow_max_workers", "train_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _error(name, value, _FIELDS[name][2])
        return self

    @property
    def output_dir(self) -> str:
        return f"{self.bucket.rstrip('/')}/{self.pipeline_name}"

    def beam_pipeline_args(self) -> tuple[str, ...]:
        """DirectRunner in the component's container, or Dataflow workers."""
        if self.beam_runner == "direct":
            return ("--direct_running_mode=multi_processing", "--direct_num_workers=0")
        return (
            "--runner=DataflowRunner",
            f"--project={self.project}",
            f"--region={self.region}",
            f"--temp_location={self.output_dir}/tmp",
            f"--machine_type={self.dataflow_machine_type}",
            f"--max_num_workers={self.dataflow_max_workers}",
            # Dataflow workers run the pipeline image, which has the project installed.
            f"--sdk_container_image={self.pipeline_image}",
        ) + ((f"--service_account_email={self.service_account}",)
             if self.service_account else ())

    def pipeline_config(self) -> PipelineConfig:
        """The PipelineConfig this cloud run trains with: gs:// paths, TPU settings."""
        trainer = (TrainerConfig.create(strategy="tpu", tpu_address="local")
                   if self.tpu else None)
        return from_env(
            {}, pipeline_name=self.pipeline_name, data_dir=self.data_uri,
            output_dir=self.output_dir, train_steps=self.train_steps,
            beam_pipeline_args=self.beam_pipeline_args(),
            **({"trainer": trainer} if trainer else {}),
        )

    def vertex_training_args(self) -> dict[str, Any] | None:
        """The Vertex AI CustomJob the Trainer submits when a TPU is configured (TFX's
        `ai_platform_training_args`: the project, and the CustomJobSpec as `job_spec`)."""
        if not self.tpu:
            return None
        machine_type, accelerator, count, topology = TPU_MACHINES[self.tpu]
        machine_spec: dict[str, Any] = {"machine_type": machine_type,
                                        "accelerator_type": accelerator,
                                        "accelerator_count": count}
        if topology:
            machine_spec["tpu_topology"] = topology
        job_spec: dict[str, Any] = {
            "worker_pool_specs": [{
                "machine_spec": machine_spec,
                "replica_count": 1,
                "container_spec": {"image_uri": self.tpu_trainer_image},
            }],
        }
        if self.service_account:
            job_spec["service_account"] = self.service_account
        if self.network:
            job_spec["network"] = self.network
        return {"project": self.project, "job_spec": job_spec}


def _error(name: str, value: object, form: str) -> ConfigError:
    var = _FIELDS[name][0]
    return ConfigError(f"{name}={value!r} ({var} or `{name}` in the cloud config): expected {form}")


def load(path: str | None = None, env: Mapping[str, str] | None = None) -> CloudConfig:
    """CloudConfig from a TOML file, then environment variables; validated."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    if path:
        if not os.path.isfile(path):
            raise ConfigError(f"cloud config {path!r}: no such file; copy "
                              "pipeline/cloud.example.toml and fill it in")
        try:
            with open(path, "rb") as f:
                values = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"cloud config {path!r} is not valid TOML: {e}") from e
        unknown = sorted(set(values) - set(_FIELDS))
        if unknown:
            raise ConfigError(f"cloud config {path!r}: unknown setting(s) {unknown}; expected "
                              f"only {sorted(_FIELDS)}")
    for name, (var, _, form) in _FIELDS.items():
        if env.get(var):
            raw = env[var]
            if name in ("dataflow_max_workers", "train_steps"):
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise _error(name, raw, form) from None
            else:
                values[name] = raw
    missing = [n for n, (_, required, _) in _FIELDS.items() if required and not values.get(n)]
    if missing:
        raise ConfigError(
            "missing cloud setting(s): " + "; ".join(
                f"{n} ({_FIELDS[n][0]}): {_FIELDS[n][2]}" for n in missing)
            + ". Set them in the cloud config file (--config) or as environment variables."
        )
    return CloudConfig(**values).validate()
