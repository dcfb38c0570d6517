"""The TFX DAG, defined once: every runner (local, Kubeflow v2, Vertex) calls `create_pipeline`."""

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import tensorflow_model_analysis as tfma

# TFX classes come from their own modules, not `tfx.v1`: importing `tfx.v1` also loads the
# Google Cloud AI Platform SDK, seconds of every run, which only the Vertex Trainer needs.
from tfx.components import ExampleValidator, Pusher, StatisticsGen, Transform
from tfx.orchestration.metadata import sqlite_metadata_connection_config
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, range_config_pb2, trainer_pb2

from pipeline import csv_check, names
from pipeline.cache_keys import file_hash, key_step
from pipeline.components import eval_metrics
from pipeline.components.anomaly_gate import AnomalyGate
from pipeline.components.baseline_resolver import baseline_resolver, latest_blessed_model
from pipeline.components.evaluator import Evaluator
from pipeline.components.example_gen import CsvExampleGen
from pipeline.components.import_schema_gen import ImportSchemaGen
from pipeline.components.pusher import StagedPusher
from pipeline.components.served_model import served_model
from pipeline.components.trainer import Trainer
from pipeline.pipeline_config import REPO_ROOT, ConfigError, PipelineConfig, is_remote
from pipeline.spans.drift_validator import DriftValidator
from pipeline.spans.span_resolver import span_resolver
from pipeline.spans.span_window import SpanWindow
from trainer_module import keys, tf_names
from trainer_module.config import TUNER_TRIALS_KEY
from trainer_module.dataset_spec import DatasetSpec, Threshold

PREPROCESSING_FN = "trainer_module.preprocessing.preprocessing_fn"
RUN_FN = "trainer_module.run.run_fn"
TUNER_FN = "trainer_module.tuning.tuner_fn"


def csv_input_config(pattern: str = csv_check.CSV_PATTERN) -> example_gen_pb2.Input:
    """CsvExampleGen's input: every *.csv and *.csv.gz file of the folder (or, with a span
    pattern, of a span's folder), one split (the output is split by hash, train 2 : eval 1,
    TFX's default)."""
    return example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="csv",
                                                                      pattern=pattern)])


# A spec's bound is what a model must beat (the majority class's share, the label's spread,
# chance's AUC): TFMA's bounds include their value, so they move past it by this much, and a
# model that scores exactly the bound has learned nothing and is not blessed.
BEAT_BY = 1e-9


def _threshold(spec: DatasetSpec, threshold: Threshold) -> tfma.MetricThreshold:
    higher = threshold.eval_metric(spec.task).higher_is_better
    beaten = threshold.bound + BEAT_BY if higher else threshold.bound - BEAT_BY
    bound = {("lower_bound" if higher else "upper_bound"): {"value": beaten}}
    if threshold.allowed_change is None:
        return tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(**bound))
    # The allowed change, in the worse direction (plus a hair, so "no change" passes an equal
    # model). No baseline on the first run: TFMA then skips the change threshold.
    change = threshold.allowed_change + 1e-10
    return tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(**bound),
        change_threshold=tfma.GenericChangeThreshold(
            direction=(tfma.MetricDirection.HIGHER_IS_BETTER if higher
                       else tfma.MetricDirection.LOWER_IS_BETTER),
            absolute={"value": -change if higher else change}))


def eval_config(spec: DatasetSpec) -> tfma.EvalConfig:
    """The task's metrics overall and per slice of the spec; the spec's thresholds, on the
    overall slice, decide the blessing."""
    task = spec.task_info
    thresholds = {t.metric: t for t in spec.thresholds}
    metrics = [eval_metrics.metric_config("ExampleCount")]
    for key, metric in task.metrics.items():
        config = eval_metrics.metric_config(metric.tfma_class)
        if key in thresholds:
            # Gate on the overall slice only: small slices (a rare payment type) are
            # reported, not allowed to veto the model.
            config.per_slice_thresholds.append(tfma.PerSliceMetricThreshold(
                slicing_specs=[tfma.SlicingSpec()], threshold=_threshold(spec, thresholds[key])))
        metrics.append(config)
    metrics += [eval_metrics.metric_config(name) for name in task.extra_tfma]
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=keys.SERVING_SIGNATURE,
                label_key=spec.label_key,
                prediction_key=task.prediction_key,
                example_weight_key=(spec.label_weight_key if spec.missing_labels == "drop"
                                    else ""),
                preprocessing_function_names=[keys.TRANSFORM_SIGNATURE],
            )
        ],
        slicing_specs=[tfma.SlicingSpec()]
        + [tfma.SlicingSpec(feature_keys=[key]) for key in spec.slices],
        metrics_specs=[tfma.MetricsSpec(metrics=metrics)],
    )


class LocalTarget:
    """The DAG on this machine: LocalDagRunner, ML Metadata in the SQLite file under the output
    dir, TFX's resolvers, and a staged push into the serving dir. The other targets override
    what differs."""

    def schema_file(self, config: PipelineConfig) -> str:
        """Where ImportSchemaGen reads the schema when the step runs."""
        return config.schema_path

    def trainer(self, trainer_config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The Trainer's component factory and its custom_config."""
        return Trainer, trainer_config

    def warm_start_model(self, config: PipelineConfig) -> Any:
        """The node whose `model` output is the Trainer's base_model: the latest blessed model."""
        return latest_blessed_model()

    def baseline_model(self, config: PipelineConfig, candidate: Any) -> Any:
        """The node whose `model` output is the Evaluator's baseline."""
        return baseline_resolver(candidate)

    def pusher(self, config: PipelineConfig, model: Any, blessing: Any) -> Any:
        """A filesystem push to the serving dir: on a local disk staged, then renamed into
        place, so a version appears whole."""
        pusher_class = Pusher if is_remote(config.serving_model_dir) else StagedPusher
        return pusher_class(
            model=model, model_blessing=blessing,
            push_destination=pusher_pb2.PushDestination(
                filesystem=pusher_pb2.PushDestination.Filesystem(
                    base_directory=config.serving_model_dir)),
        ).with_id(names.PUSHER)

    def after_push(self, spec: DatasetSpec, trainer: Any, evaluator: Any) -> list[Any]:
        """Nodes after the Pusher (none here)."""
        return []

    def metadata_connection(self, config: PipelineConfig) -> Any:
        return sqlite_metadata_connection_config(config.metadata_path)


LOCAL = LocalTarget()


@dataclasses.dataclass(frozen=True)
class KubeflowTarget(LocalTarget):
    """The DAG in containers on Kubeflow Pipelines 2 / Vertex AI.

    image_project_dir: where the pipeline image holds this project (files such as the schema
      are read there at run time).
    vertex_region / vertex_training_args: when set, the Trainer runs as a Vertex AI CustomJob
      with these arguments (worker pool spec with the TPU machine and the TPU trainer image).
    resolvers: whether the orchestrator runs TFX resolvers (Vertex AI does; Kubeflow Pipelines'
      backend refuses them, so there the baseline and the warm-start model come from the
      serving dir: pipeline/components/served_model.py).
    vertex_serving_args / serving_image: when set, TFX's Vertex Pusher uploads each blessed
      model to the Model Registry with this prediction image and deploys it to an endpoint
      with these `aiplatform.Model.deploy` arguments (endpoint_name, machine type, replicas,
      traffic percentage), in vertex_region.
    batch_predict_uri: when set, a folder of new CSV rows: a second CsvExampleGen reads it and
      TFX's BulkInferrer scores it with each blessed model, writing the rows with the
      predictions appended (its output_examples).
    """

    image_project_dir: str
    vertex_region: str = ""
    vertex_training_args: Mapping[str, Any] | None = None
    resolvers: bool = True
    vertex_serving_args: Mapping[str, Any] | None = None
    serving_image: str = ""
    batch_predict_uri: str = ""

    def schema_file(self, config: PipelineConfig) -> str:
        """The schema's path inside the pipeline image."""
        relative = os.path.relpath(config.schema_path, REPO_ROOT)
        if relative.startswith(".."):
            raise ConfigError(f"dataset={config.dataset!r}: its schema {config.schema_path} "
                              "is outside the project, and the pipeline image holds only the "
                              "project's files; put the dataset's folder under schemas/")
        return f"{self.image_project_dir.rstrip('/')}/{relative}"

    def trainer(self, trainer_config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """With Vertex training args, the Trainer step submits a Vertex AI CustomJob (the TPU
        machine, the TPU trainer image) that runs run_fn, and waits for it."""
        if not self.vertex_training_args:
            return Trainer, trainer_config
        from tfx.v1.extensions import google_cloud_ai_platform as vertex

        from pipeline.components.vertex_trainer import vertex_trainer

        return vertex_trainer, {
            **trainer_config,
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: self.vertex_region,
            vertex.TRAINING_ARGS_KEY: dict(self.vertex_training_args),
        }

    def warm_start_model(self, config: PipelineConfig) -> Any:
        if self.resolvers:
            return latest_blessed_model()
        return served_model(config.serving_model_dir, names.WARM_START_RESOLVER)

    def baseline_model(self, config: PipelineConfig, candidate: Any) -> Any:
        """TFX's built-in baseline resolver, the only kind Vertex compiles (see
        pipeline/components/baseline_resolver.py); on Kubeflow Pipelines, which runs no
        resolvers, the newest model in the serving dir."""
        if self.resolvers:
            return baseline_resolver(candidate, portable=True)
        return served_model(config.serving_model_dir, names.BASELINE_RESOLVER,
                            candidate=candidate)

    def pusher(self, config: PipelineConfig, model: Any, blessing: Any) -> Any:
        """TFX's Vertex Pusher when an endpoint is configured; else the filesystem push."""
        if not self.vertex_serving_args:
            return super().pusher(config, model, blessing)
        from tfx.extensions.google_cloud_ai_platform import constants as vertex
        from tfx.extensions.google_cloud_ai_platform.pusher.component import (
            Pusher as VertexPusher,
        )

        return VertexPusher(model=model, model_blessing=blessing, custom_config={
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: self.vertex_region,
            vertex.VERTEX_CONTAINER_IMAGE_URI_KEY: self.serving_image,
            vertex.SERVING_ARGS_KEY: dict(self.vertex_serving_args),
        }).with_id(names.PUSHER)

    def after_push(self, spec: DatasetSpec, trainer: Any, evaluator: Any) -> list[Any]:
        """With batch_predict_uri, the new rows' ExampleGen and the BulkInferrer."""
        if not self.batch_predict_uri:
            return []
        return _batch_predict(self.batch_predict_uri, spec, trainer, evaluator)

    def metadata_connection(self, config: PipelineConfig) -> Any:
        return None  # the orchestrator's own metadata store


def _batch_predict(uri: str, spec: DatasetSpec, trainer: Any, evaluator: Any) -> list[Any]:
    """CsvExampleGen over `uri` (one split, 'predict') → BulkInferrer with the blessed model's
    serving_default, every serving output appended to each row under its own name.

    A row that does not parse as the schema (a text in a number column, a required feature
    missing) fails the step with TensorFlow's message naming the feature: nothing is skipped.
    """
    from tfx.components import BulkInferrer
    from tfx.proto import bulk_inferrer_pb2

    # Every row in one split (ExampleGen would otherwise keep a third of them as "eval").
    rows = CsvExampleGen(
        input_base=uri,
        input_config=csv_input_config(),
        delimiter=spec.delimiter, missing_values=spec.missing_values,
        number_formats=spec.number_formats,
        output_config=example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(
            splits=[example_gen_pb2.SplitConfig.Split(name=names.PREDICT_SPLIT,
                                                      hash_buckets=1)])),
    ).with_id(names.PREDICT_EXAMPLE_GEN)
    columns = [bulk_inferrer_pb2.PredictOutputCol(output_key=key, output_column=key)
               for key in spec.task_info.outputs]
    inferrer = BulkInferrer(
        examples=rows.outputs[names.EXAMPLES],
        model=trainer.outputs[names.MODEL],
        model_blessing=evaluator.outputs[names.BLESSING],
        data_spec=bulk_inferrer_pb2.DataSpec(example_splits=[names.PREDICT_SPLIT]),
        model_spec=bulk_inferrer_pb2.ModelSpec(model_signature_name=[keys.SERVING_SIGNATURE]),
        output_example_spec=bulk_inferrer_pb2.OutputExampleSpec(output_columns_spec=[
            bulk_inferrer_pb2.OutputColumnsSpec(
                signature_name=keys.SERVING_SIGNATURE,
                predict_output=bulk_inferrer_pb2.PredictOutput(output_columns=columns))]),
    ).with_id(names.BULK_INFERRER)
    return [rows, inferrer]


def create_pipeline(config: PipelineConfig, target: LocalTarget = LOCAL) -> Pipeline:
    """CsvExampleGen → StatisticsGen → ImportSchemaGen → ExampleValidator → AnomalyGate →
    Transform → Trainer → Resolver(baseline model) → Evaluator → Pusher; with warm_start, a
    resolver of the latest blessed model feeds the Trainer's base_model. With
    config.bigquery_query, BigQueryExampleGen reads the examples instead of CsvExampleGen.

    Args:
      config: this run's settings, validated (`PipelineConfig.validate`).
      target: where the DAG runs: LOCAL, or a KubeflowTarget (what changes in containers).

    Returns:
      The TFX Pipeline, for any TFX runner.

    Raises:
      ConfigError: the target cannot run this dataset (a schema outside the project, in an
        image).
    """
    spec = config.spec
    example_gen = _example_gen(config)
    statistics_gen = StatisticsGen(examples=example_gen.outputs[names.EXAMPLES])
    schema_gen = ImportSchemaGen(schema_file=target.schema_file(config),
                                 schema_hash=file_hash(config.schema_path),
                                 ignored_columns=spec.ignored_columns)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs[names.STATISTICS],
        schema=schema_gen.outputs[names.SCHEMA])
    # Anomalies, rows without a label and drift stop the run here, before anything is
    # transformed, trained or pushed.
    label_columns = spec.rule.sources if spec.rule else (spec.label,)
    # Drift from the previous span, recorded by its validator, stops the run at the same gate.
    drift_nodes = _drift_validator(config, example_gen, statistics_gen, schema_gen)
    anomaly_gate = AnomalyGate(anomalies=example_validator.outputs[names.ANOMALIES],
                               statistics=statistics_gen.outputs[names.STATISTICS],
                               schema=schema_gen.outputs[names.SCHEMA],
                               drift_report=(drift_nodes[-1].outputs[names.DRIFT_REPORT]
                                             if drift_nodes else None),
                               label_columns=",".join(label_columns),
                               missing_labels=spec.missing_labels)
    window, window_resolver = _window(config, example_gen)
    # A window of spans: the model trains on all of them, so the statistics it ships for
    # `make predict`'s skew report are Transform's of the rows it analyzed (the window's
    # training splits); StatisticsGen describes this span alone.
    window_statistics = window_resolver is not None
    transform = _transform(spec, window, schema_gen, statistics=window_statistics)
    transform.add_upstream_node(anomaly_gate)
    make_trainer, trainer_config = target.trainer(
        {**config.trainer.to_custom_config(), **spec.to_custom_config()})
    # Warm start: the Trainer begins from the latest blessed model. Every run then depends on
    # the last blessing, so it trains anew even when nothing else changed.
    warm_start = (target.warm_start_model(config) if config.trainer.training.warm_start
                  else None)
    tuner = _tuner(config, transform, trainer_config) if config.tune else None
    trainer = make_trainer(
        run_fn=RUN_FN,
        hyperparameters=tuner.outputs[names.BEST_HYPERPARAMETERS] if tuner else None,
        examples=transform.outputs[names.TRANSFORMED_EXAMPLES],
        raw_examples=example_gen.outputs[names.EXAMPLES],
        statistics=(transform.outputs[names.PRE_TRANSFORM_STATISTICS] if window_statistics
                    else statistics_gen.outputs[names.STATISTICS]),
        transform_graph=transform.outputs[names.TRANSFORM_GRAPH],
        schema=schema_gen.outputs[names.SCHEMA],
        base_model=warm_start.outputs[names.MODEL] if warm_start else None,
        # num_steps 0 reaches run_fn as None: the budget is the trainer's epochs.
        train_args=trainer_pb2.TrainArgs(num_steps=config.train_steps or 0),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.eval_steps or 0),
        custom_config=trainer_config,
    )
    model_resolver = target.baseline_model(config, trainer.outputs[names.MODEL])
    evaluator = Evaluator(
        examples=example_gen.outputs[names.EXAMPLES],
        model=trainer.outputs[names.MODEL],
        baseline_model=model_resolver.outputs[names.MODEL],
        schema=schema_gen.outputs[names.SCHEMA],
        eval_config=eval_config(spec),
    )
    pusher = target.pusher(config, trainer.outputs[names.MODEL],
                           evaluator.outputs[names.BLESSING])
    components = [example_gen, statistics_gen, schema_gen, example_validator, *drift_nodes,
                  anomaly_gate, *([window_resolver] if window_resolver else []), transform,
                  *([warm_start] if warm_start else []), *([tuner] if tuner else []),
                  trainer, model_resolver, evaluator, pusher,
                  *target.after_push(spec, trainer, evaluator)]
    for component in components:
        key_step(component)
    return Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=components,
        enable_cache=config.enable_cache,
        metadata_connection_config=target.metadata_connection(config),
        beam_pipeline_args=list(config.beam_pipeline_args),
    )


def create_intake_pipeline(config: PipelineConfig) -> Pipeline:
    """The DAG's first two nodes alone, CsvExampleGen and StatisticsGen, on `config.span`: a
    span's outputs stored for later runs' windows and drift gate (pipeline/spans/intake.py)."""
    example_gen = _example_gen(config)
    statistics_gen = StatisticsGen(examples=example_gen.outputs[names.EXAMPLES])
    components = [example_gen, statistics_gen]
    for component in components:
        key_step(component)
    return Pipeline(pipeline_name=config.pipeline_name, pipeline_root=config.pipeline_root,
                    components=components, enable_cache=config.enable_cache,
                    metadata_connection_config=LOCAL.metadata_connection(config),
                    beam_pipeline_args=list(config.beam_pipeline_args))


def _example_gen(config: PipelineConfig) -> Any:
    """CsvExampleGen over the data dir, or BigQueryExampleGen with the configured query."""
    if config.bigquery_query:
        from tfx.extensions.google_cloud_big_query.example_gen.component import (
            BigQueryExampleGen,
        )

        return BigQueryExampleGen(query=config.bigquery_query)
    pattern = config.span_pattern
    # TFX's span support reads one span and records it on the Examples artifact: the span the
    # settings chose and the checks read (the newest by default) when the folders are known
    # here; else (a gs:// data dir) the newest where the step runs, TFX's default.
    span = (range_config_pb2.RangeConfig(static_range=range_config_pb2.StaticRange(
        start_span_number=config.span, end_span_number=config.span))
        if config.span is not None else None)
    return CsvExampleGen(
        input_base=config.data_dir, input_config=csv_input_config(pattern or csv_check.CSV_PATTERN),
        delimiter=config.spec.delimiter, missing_values=config.spec.missing_values,
        number_formats=config.spec.number_formats, range_config=span)


def _window(config: PipelineConfig, example_gen: Any) -> tuple[Any, Any]:
    """Transform's examples, and the node that gives them: this span's, or with
    `[training] window_spans` > 1 the newest spans up to it, the older ones from the store
    (their ExampleGen does not run again). With the spans listed here, a resolver finds them
    in ML Metadata; with spans only found where the run happens (a gs:// data dir, on backends
    that run no span resolver), SpanWindow copies them from its own record of each span's
    Examples."""
    spans = config.spec.window_spans or 1
    if config.spans is None and config.span_pattern and spans > 1 and not config.bigquery_query:
        window = SpanWindow(examples=example_gen.outputs[names.EXAMPLES],
                            store=config.span_examples_store,
                            window_spans=spans).with_id(names.SPAN_WINDOW)
        return window.outputs["window"], window
    if len(config.window) <= 1:
        return example_gen.outputs[names.EXAMPLES], None
    resolver = span_resolver(names.WINDOW_RESOLVER, config.window, example_gen)
    return resolver.outputs[names.EXAMPLES], resolver


def _drift_validator(config: PipelineConfig, example_gen: Any, statistics_gen: Any,
                     schema_gen: Any) -> list[Any]:
    """The drift validator of this span's statistics against the previous span's, when the
    spec sets thresholds. With the spans listed here, the previous span's statistics come from
    ML Metadata through a resolver (none when this is the first span); with spans only found
    where the run happens (a gs:// data dir, resolved by TFX at run time, on backends that run
    no span resolver), from the validator's own statistics store in the pipeline root."""
    if (not config.spec.drift_thresholds or not config.span_pattern
            or config.bigquery_query):
        return []
    measures = {"examples": example_gen.outputs[names.EXAMPLES],
                "statistics": statistics_gen.outputs[names.STATISTICS],
                "schema": schema_gen.outputs[names.SCHEMA],
                "thresholds": json.dumps(dict(config.spec.drift_thresholds)),
                "warn_only": ",".join(config.spec.drift_warn_only)}
    if config.spans is None:
        return [DriftValidator(**measures, statistics_store=config.span_statistics_store
                               ).with_id(names.DRIFT_VALIDATOR)]
    if config.previous_span is None:
        return []
    previous = span_resolver(names.PREVIOUS_SPAN_RESOLVER, (config.previous_span,),
                             example_gen, statistics_gen)
    return [previous, DriftValidator(**measures,
                                     previous_examples=previous.outputs[names.EXAMPLES],
                                     previous_statistics=previous.outputs[names.STATISTICS]
                                     ).with_id(names.DRIFT_VALIDATOR)]


def _transform(spec: DatasetSpec, examples: Any, schema_gen: Any, statistics: bool
               ) -> Transform:
    """Transform; with `statistics`, it also describes the rows it analyzes (TFX computes
    its pre- and post-transform statistics together or neither)."""
    return Transform(
        examples=examples,
        schema=schema_gen.outputs[names.SCHEMA],
        preprocessing_fn=PREPROCESSING_FN,
        # For one span StatisticsGen already describes the raw data; TFT's own
        # pre/post-transform statistics would more than double Transform's time. The TF1
        # graph path traces the plain-op preprocessing_fn in a third of the TF2 tf.function
        # time; the exported transform graph serves the same way from TF2. Its signature takes
        # the raw columns as keyword arguments, though, which a served model cannot load back
        # for some names (a column named `class`): those datasets take the TF2 path, whose
        # graph takes one dict. Unchanged inputs are skipped by the pipeline cache, which makes
        # TFT's per-analyzer cache (written every run) dead weight.
        disable_statistics=not statistics,
        force_tf_compat_v1=tf_names.loadable_as_keywords(spec.columns()),
        disable_analyzer_cache=True,
        custom_config=spec.to_custom_config(),
    )


def _tuner(config: PipelineConfig, transform: Transform, trainer_config: dict[str, Any]) -> Any:
    """TFX's Tuner: KerasTuner's search on the Trainer's own plan; the Trainer starts from its
    best values."""
    from tfx.components import Tuner

    return Tuner(
        tuner_fn=TUNER_FN,
        examples=transform.outputs[names.TRANSFORMED_EXAMPLES],
        transform_graph=transform.outputs[names.TRANSFORM_GRAPH],
        train_args=trainer_pb2.TrainArgs(num_steps=config.train_steps or 0),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.eval_steps or 0),
        custom_config={**trainer_config, TUNER_TRIALS_KEY: config.tune_trials},
    ).with_id(names.TUNER)
