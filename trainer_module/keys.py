"""Names the pipeline and the Trainer both depend on, each spelled here once: the example
splits and their ratio, the exported model's signatures, and the custom_config keys that carry
the trainer settings and the dataset spec to `run_fn` and Transform.

The splits are CsvExampleGen's defaults (two hash buckets train, one eval); the signatures are
what the Evaluator, BulkInferrer, `make predict` and warm start call on an exported model.
"""

# ExampleGen's output splits, and how many hash buckets of three each gets.
TRAIN_SPLIT = "train"
EVAL_SPLIT = "eval"
TRAIN_BUCKETS, EVAL_BUCKETS = 2, 1

# The exported model's signatures.
SERVING_SIGNATURE = "serving_default"  # serialized tf.Examples in, predictions out
FEATURES_SIGNATURE = "serving_features"  # one named tensor per raw column (JSON serving)
TRANSFORM_SIGNATURE = "transform_features"  # serialized tf.Examples in, transformed features out

# custom_config keys.
TRAINER_CONFIG_KEY = "trainer_config"
DATASET_SPEC_KEY = "dataset_spec"
# What StatisticsGen writes in each split's folder.
STATISTICS_FILE = "FeatureStats.pb"


def split_dir(split: str) -> str:
    """The folder of an Examples artifact that holds `split` (TFX's rule:
    tfx/types/artifact_utils.py)."""
    return f"Split-{split}"


def train_share(rows: int) -> int:
    """How many of `rows` ExampleGen's hash split puts in the train split (about)."""
    return rows * TRAIN_BUCKETS // (TRAIN_BUCKETS + EVAL_BUCKETS)
