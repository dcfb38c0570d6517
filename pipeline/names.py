"""Names the DAG and everything that reads its records share: node ids, output keys, and the
custom properties TFX's components write on their artifacts.

Node ids are TFX's default ids (each component's class name) unless the DAG sets one; output
keys and properties are TFX's own (tfx/types/standard_component_specs.py,
tfx/components/evaluator/constants.py, tfx/components/pusher/executor.py).
"""

# Node ids.
CSV_EXAMPLE_GEN = "CsvExampleGen"
STATISTICS_GEN = "StatisticsGen"
SCHEMA_GEN = "ImportSchemaGen"
EXAMPLE_VALIDATOR = "ExampleValidator"
ANOMALY_GATE = "AnomalyGate"
DRIFT_VALIDATOR = "DriftValidator"
TRANSFORM = "Transform"
TRAINER = "Trainer"
TUNER = "Tuner"
BEST_HYPERPARAMETERS = "best_hyperparameters"
BASELINE_RESOLVER = "baseline_resolver"
WARM_START_RESOLVER = "warm_start_resolver"
WINDOW_RESOLVER = "window_resolver"  # the window's older spans' Examples, from the store
PREVIOUS_SPAN_RESOLVER = "previous_span_resolver"  # the previous span's statistics
SPAN_WINDOW = "SpanWindow"  # the window's Examples where no resolver runs (compiled specs)
EVALUATOR = "Evaluator"
PUSHER = "Pusher"
PREDICT_EXAMPLE_GEN = "PredictExampleGen"  # new rows to score (optional)
BULK_INFERRER = "BulkInferrer"

# Output keys.
EXAMPLES = "examples"
STATISTICS = "statistics"
SCHEMA = "schema"
ANOMALIES = "anomalies"
DRIFT_REPORT = "drift_report"  # DriftValidator: each column's distance from the previous span
TRANSFORMED_EXAMPLES = "transformed_examples"
TRANSFORM_GRAPH = "transform_graph"
PRE_TRANSFORM_STATISTICS = "pre_transform_stats"  # Transform: the rows it analyzed (train)
MODEL = "model"
MODEL_RUN = "model_run"
EVALUATION = "evaluation"
BLESSING = "blessing"
PUSHED_MODEL = "pushed_model"
OUTPUT_EXAMPLES = "output_examples"  # BulkInferrer: the rows with predictions appended

# Split names.
PREDICT_SPLIT = "predict"

# Custom properties.
BLESSED = "blessed"  # ModelBlessing: 1 blessed, 0 not
CURRENT_MODEL_ID = "current_model_id"  # ModelBlessing: the id of the model it judged
PUSHED = "pushed"  # PushedModel: 1 pushed, 0 not
PUSHED_DESTINATION = "pushed_destination"  # PushedModel: where the version went
PUSHED_VERSION = "pushed_version"  # PushedModel: the version's folder name

# Execution properties.
PUSH_DESTINATION = "push_destination"  # Pusher: the PushDestination proto, as JSON
CUSTOM_CONFIG = "custom_config"  # Transform, Trainer: their custom_config, as JSON
CODE_VERSION = "code_version"  # a step's code hash (pipeline/cache_keys.py); in custom_config
# for Transform and the Trainer
SCHEMA_HASH = "schema_hash"  # ImportSchemaGen: the schema file's content hash
IGNORED_COLUMNS = "ignored_columns"  # ImportSchemaGen: the columns it marks DISABLED
