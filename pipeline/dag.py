"""The TFX DAG, defined once: every runner (local, Kubeflow v2, Vertex) calls `create_pipeline`."""

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from typing import Any

import tensorflow_model_analysis as tfma

# TFX classes come from their own modules, not `tfx.v1`: importing `tfx.v1` also loads the
# Google Cloud AI Platform SDK (~9 s per run), which only the Vertex Trainer below needs.
from tfx.components import (
    CsvExampleGen,
    Evaluator,
    ExampleValidator,
    Pusher,
    StatisticsGen,
    Trainer,
    Transform,
)
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.orchestration.metadata import sqlite_metadata_connection_config
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, trainer_pb2

from pipeline.anomaly_gate import AnomalyGate
from pipeline.baseline_resolver import baseline_resolver
from pipeline.pipeline_config import REPO_ROOT, ConfigError, PipelineConfig, is_remote
from pipeline.staged_pusher import StagedPusher
from trainer_module import features

PREPROCESSING_FN = "trainer_module.preprocessing.preprocessing_fn"
RUN_FN = "trainer_module.run.run_fn"
SLICE_FEATURES = ("payment_type",)


def code_version() -> str:
    """Hash of trainer_module's sources: a code change invalidates Transform/Trainer caches."""
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "trainer_module")
    digest = hashlib.sha256()
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            digest.update(name.encode())
            with open(os.path.join(package, name), "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    """AUC, accuracy and calibration overall and per slice; accuracy gates the blessing."""
    accuracy_threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(
            lower_bound={"value": config.min_eval_accuracy}),
        # No baseline on the first run: TFMA then skips the change threshold.
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -config.max_accuracy_regression - 1e-10}),
    )
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name="serving_default",
                label_key=features.LABEL_KEY,
                preprocessing_function_names=["transform_features"],
            )
        ],
        slicing_specs=[tfma.SlicingSpec()]
        + [tfma.SlicingSpec(feature_keys=[key]) for key in SLICE_FEATURES],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    # Gate on the overall slice only: small slices (a rare payment type) are
                    # reported, not allowed to veto the model.
                    tfma.MetricConfig(
                        class_name="BinaryAccuracy",
                        per_slice_thresholds=[
                            tfma.PerSliceMetricThreshold(
                                slicing_specs=[tfma.SlicingSpec()], threshold=accuracy_threshold)
                        ],
                    ),
                    tfma.MetricConfig(class_name="AUC"),
                    tfma.MetricConfig(class_name="Calibration"),
                ]
            )
        ],
    )


@dataclasses.dataclass(frozen=True)
class KubeflowTarget:
    """What changes when the DAG runs in containers on Kubeflow Pipelines 2 / Vertex AI.

    image_project_dir: where the pipeline image holds this project (files such as the schema
      are read there at run time).
    vertex_region / vertex_training_args: when set, the Trainer runs as a Vertex AI CustomJob
      with these arguments (worker pool spec with the TPU machine and the TPU trainer image).
    """

    image_project_dir: str
    vertex_region: str = ""
    vertex_training_args: Mapping[str, Any] | None = None


def create_pipeline(config: PipelineConfig,
                    kubeflow: KubeflowTarget | None = None) -> Pipeline:
    """CsvExampleGen → StatisticsGen → ImportSchemaGen → ExampleValidator → AnomalyGate →
    Transform → Trainer → Resolver(baseline model) → Evaluator → Pusher.

    Local runs (kubeflow=None) keep ML Metadata in the SQLite file under the output dir.
    Kubeflow/Vertex runs use the orchestrator's metadata, TFX's built-in baseline resolver
    (the only kind they compile; see pipeline/baseline_resolver.py) and paths inside the image.
    """
    config.validate()
    schema_file = config.schema_path
    if kubeflow is not None:
        relative = os.path.relpath(config.schema_path, REPO_ROOT)
        if relative.startswith(".."):
            raise ConfigError(f"schema_path={config.schema_path!r} is outside the project: the "
                              "pipeline image holds only the project's files; put it under "
                              "schemas/")
        schema_file = f"{kubeflow.image_project_dir.rstrip('/')}/{relative}"
    version = {"code_version": code_version()}

    example_gen = CsvExampleGen(
        input_base=config.data_dir,
        input_config=example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="csv", pattern="*.csv")]),
    )
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = ImportSchemaGen(schema_file=schema_file)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"])
    # Anomalies stop the run here, before anything is transformed, trained or pushed.
    anomaly_gate = AnomalyGate(anomalies=example_validator.outputs["anomalies"],
                               statistics=statistics_gen.outputs["statistics"])
    transform = Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        # StatisticsGen already describes the raw data; TFT's own pre/post-transform
        # statistics would more than double Transform's time. The TF1 graph path traces the
        # plain-op preprocessing_fn in a third of the TF2 tf.function time; the exported
        # transform graph serves the same way from TF2. Unchanged inputs are skipped by the
        # pipeline cache, which makes TFT's per-analyzer cache (written every run) dead weight.
        disable_statistics=True,
        force_tf_compat_v1=True,
        disable_analyzer_cache=True,
        custom_config=version,
    )
    transform.add_upstream_node(anomaly_gate)
    trainer_config = {**config.trainer.to_custom_config(), **version}
    trainer_class = Trainer
    if kubeflow is not None and kubeflow.vertex_training_args:
        # The Trainer step submits a Vertex AI CustomJob (the TPU machine, the TPU trainer
        # image) that runs run_fn, and waits for it.
        from tfx.v1.extensions import google_cloud_ai_platform as vertex

        trainer_class = vertex.Trainer
        trainer_config.update({
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: kubeflow.vertex_region,
            vertex.TRAINING_ARGS_KEY: dict(kubeflow.vertex_training_args),
        })
    trainer = trainer_class(
        run_fn=RUN_FN,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=trainer_pb2.TrainArgs(num_steps=config.train_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.eval_steps or 0),
        custom_config=trainer_config,
    )
    model_resolver = baseline_resolver(trainer.outputs["model"], portable=kubeflow is not None)
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=model_resolver.outputs["model"],
        eval_config=eval_config(config),
    )
    # On a local disk a new version appears whole (staged, then renamed into place).
    pusher_class = Pusher if is_remote(config.serving_model_dir) else StagedPusher
    pusher = pusher_class(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(
                base_directory=config.serving_model_dir)),
    ).with_id("Pusher")
    return Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=[example_gen, statistics_gen, schema_gen, example_validator, anomaly_gate,
                    transform, trainer, model_resolver, evaluator, pusher],
        enable_cache=config.enable_cache,
        metadata_connection_config=None if kubeflow is not None else (
            sqlite_metadata_connection_config(config.metadata_path)),
        beam_pipeline_args=list(config.beam_pipeline_args),
    )
