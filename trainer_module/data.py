"""Input pipeline over Transform's materialized examples (GZIP TFRecords).

Order: read blocks of records per file → parse_example (vectorized) and unpack the model's
inputs from Transform's packed vectors, a block at a time → rebatch(drop_remainder) → cache →
shuffle → repeat → mix examples across batches → prefetch. Parsing whole blocks is several
times faster than tfx-bsl's per-example reader (`make bench` measures both); every tensor has a
fully static shape, so a TPU compiles the step once.
"""

import functools
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from trainer_module import tasks
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.model import model_inputs

# Batches kept in the shuffle buffer, and global batches (train steps) whose examples are
# re-mixed each epoch.
SHUFFLE_BUFFER_BATCHES = 64
MIX_WINDOW_STEPS = 8

# The parts of the training split: the rows the model fits and the validation slice that
# scores each epoch (early stopping). ALL: every row (the eval split, tools).
ALL, FIT, VALIDATION = "all", "fit", "validation"
# An example's part is decided by a hash of its file's name and its position in that file
# into this many buckets: the same rows land in the validation slice in every epoch, every
# reader and every sharding of the files, and a file's repeated rows (the same bytes) fall
# on both sides in the slice's share, as distinct rows do.
_PART_BUCKETS = 10_000


class InputError(ValueError):
    """The transformed examples cannot feed a static-shape train step."""


def check_static_feature_spec(feature_spec: dict) -> None:
    """Every transformed feature must parse to a fixed shape (a TPU cannot take anything else)."""
    for name, spec in feature_spec.items():
        if not isinstance(spec, tf.io.FixedLenFeature) or not tf.TensorShape(
            spec.shape
        ).is_fully_defined():
            raise InputError(
                f"transformed feature {name!r} has spec {spec!r}: the train step needs a "
                "fixed-length feature; make preprocessing_fn output a dense tensor of shape "
                "[batch] or [batch, n] for it (fill missing values, e.g. with "
                "tf.sparse.to_dense)."
            )


def list_files(file_patterns: str | list[str]) -> list[str]:
    patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
    files = sorted({f for p in patterns for f in tf.io.gfile.glob(p)})
    if not files:
        raise InputError(f"no files match {patterns}: expected Transform's transformed_examples")
    return files


# Bytes read from a file at a time: TFRecordDataset's default (256 KB for compressed files)
# leaves the cold epoch waiting on small reads; a few MB keeps the decompression busy
# (docs/benchmarks.md measures the cold epoch against the raw read).
READ_BUFFER_BYTES = 8 * 2**20
# Records parsed per parse_example call. Each call has a fixed cost that a 256-record batch
# does not amortize: blocks of 4,096 are parsed, then cut into batches.
PARSE_BLOCK_RECORDS = 4096


# The input functions have no Python control flow on tensors (their loops run over the spec),
# so AutoGraph has nothing to rewrite in them, and converting them and every function they
# call costs time in every Trainer. A mistake would fail at trace time, never silently.
_plain_graph = tf.autograph.experimental.do_not_convert


def held_out(path: tf.Tensor, positions: tf.Tensor, validation_fraction: float,
             validation_start: float = 0.0) -> tf.Tensor:
    """Which records of the file at `path`, at these 0-based positions in it, are in the
    validation slice (bool, the positions' shape): the validation_fraction of the hash's
    buckets from validation_start (a share of them) on, wrapping past the last. Slices that
    start 1/k apart are k disjoint folds when each holds 1/k of the rows.

    The position, not the record's bytes, decides: rows that repeat (a file with a few
    thousand distinct rows among a million) would otherwise all fall on one side, and the
    slice would score rows the model never fits, in groups, instead of a sample of the rows.
    """
    name = tf.strings.regex_replace(path, r"^.*/", "")
    keys = tf.strings.join([name, tf.strings.as_string(positions)], separator=":")
    start = round(validation_start * _PART_BUCKETS)
    return (tf.math.floormod(tf.strings.to_hash_bucket_fast(keys, _PART_BUCKETS) - start,
                             _PART_BUCKETS)
            < round(validation_fraction * _PART_BUCKETS))


def _marked_blocks(path: tf.Tensor, block: int, shard: tf.distribute.InputContext | None,
                   validation_fraction: float, validation_start: float) -> tf.data.Dataset:
    """Blocks of `block` records of one file (of this pipeline's share of its records when
    `shard`); with a validation_fraction, (records, held_out) for each block."""
    records = tf.data.TFRecordDataset(path, compression_type="GZIP",
                                      buffer_size=READ_BUFFER_BYTES)
    stride, offset = (shard.num_input_pipelines, shard.input_pipeline_id) if shard else (1, 0)
    if shard:
        records = records.shard(stride, offset)
    blocks = records.batch(block)
    if not validation_fraction:
        return blocks

    @_plain_graph
    def mark(index: tf.Tensor, block_records: tf.Tensor) -> tuple:
        # A shard holds every stride-th record of the file from `offset`.
        first = index * block * stride + offset
        positions = first + tf.range(tf.size(block_records, out_type=tf.int64)) * stride
        return block_records, held_out(path, positions, validation_fraction, validation_start)

    return blocks.enumerate().map(mark)


def _split_label(parsed: dict[str, tf.Tensor], spec: DatasetSpec) -> tuple:
    """(inputs, label [batch, 1]) or, when rows without a label are dropped, (inputs, label,
    weight [batch]) with weight 0 for those rows."""
    dtype = tf.int32 if spec.task == tasks.MULTICLASS else tf.float32
    label = tf.cast(tf.expand_dims(parsed[spec.label_key], -1), dtype)
    if spec.missing_labels == "drop":
        return model_inputs(parsed, spec), label, parsed[spec.label_weight_key]
    return model_inputs(parsed, spec), label


def _mix_examples(seed: int, window_index: tf.Tensor, batch_parts: tuple) -> tuple:
    """Permutes examples across a window of [W, B, ...] batches, keeping every shape static.

    Cached batches keep the composition of the first epoch; this re-mixes them every epoch at
    the cost of one gather per window. The permutation is a function of the seed and the
    window's index in the run, never of which parallel call drew first, so a seed repeats the
    run's batches.
    """
    label = batch_parts[1]
    window, batch = label.shape[0], label.shape[1]
    perm = tf.random.experimental.stateless_shuffle(
        tf.range(window * batch), seed=tf.stack([tf.constant(seed, tf.int64), window_index]))

    def mix(t: tf.Tensor) -> tf.Tensor:
        flat = tf.reshape(t, [window * batch] + t.shape[2:].as_list())
        return tf.reshape(tf.gather(flat, perm), t.shape)

    return tuple(tf.nest.map_structure(mix, part) for part in batch_parts)


def read_blocks(file_patterns: str | list[str], batch_size: int,
                input_context: tf.distribute.InputContext | None = None, *,
                part: str = ALL, validation_fraction: float = 0.0,
                validation_start: float = 0.0) -> tf.data.Dataset:
    """The serialized records of this replica's share of the files, in blocks of up to
    max(batch_size, PARSE_BLOCK_RECORDS), files read in parallel: the input function's reading,
    before any parsing (the bench's raw read is this, rebatched). part: FIT or VALIDATION
    keeps only that part of a training split (`held_out`, the slice of validation_fraction
    from validation_start), ALL every record."""
    block = max(batch_size, PARSE_BLOCK_RECORDS)
    if part == ALL or not validation_fraction:
        blocks = _read_marked(file_patterns, block, input_context, 0.0, 0.0)
        return blocks.take(0) if part == VALIDATION else blocks  # no slice holds no rows
    keep_held_out = part == VALIDATION
    return _read_marked(file_patterns, block, input_context, validation_fraction,
                        validation_start).map(
        _plain_graph(lambda records, held: tf.boolean_mask(
            records, held if keep_held_out else tf.logical_not(held))))


def _read_marked(file_patterns: str | list[str], block: int,
                 input_context: tf.distribute.InputContext | None,
                 validation_fraction: float, validation_start: float) -> tf.data.Dataset:
    """Blocks of up to `block` records, as (records, held_out) with a validation_fraction,
    for `read_blocks` and `count_examples` alike, so the slice they serve and count is one."""
    files = list_files(file_patterns)
    ds = tf.data.Dataset.from_tensor_slices(files)
    shard_records = False
    if input_context and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        else:
            shard_records = True
    # Records cross threads in blocks, never one by one (a per-record parallel interleave is
    # far slower): each file is read, cut into blocks and marked where it is decompressed, and
    # the caller's rebatch makes every batch full again across file ends.
    return ds.interleave(
        _plain_graph(lambda f: _marked_blocks(f, block, input_context if shard_records else None,
                                              validation_fraction, validation_start)),
        cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def make_dataset(
    file_patterns: str | list[str],
    feature_spec: dict,
    batch_size: int,
    *,
    spec: DatasetSpec,
    training: bool,
    seed: int = 42,
    cache: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    part: str = ALL,
    validation_fraction: float = 0.0,
    validation_start: float = 0.0,
) -> tf.data.Dataset:
    """Batches of ({model input: [batch_size]}, label [batch_size, 1]) for one replica (and a
    weight [batch_size] per example when the spec drops rows without a label).

    training=True: reshuffled every epoch, in the order `seed` fixes (tf.data keeps its
    parallel stages in order, so a seed repeats a run's batches; the bench's input rows at 10×
    read as fast in order as out of order), and every row in each pass. training=False:
    in file order, whole batches only. Both repeat endlessly, so a caller takes
    `count_batches(...)` steps for exactly one pass over the eval data.
    cache=True keeps the parsed batches in memory after the first pass; False re-reads the
    files every pass (a split larger than memory). part: FIT or VALIDATION reads only that part
    of a training split (`held_out`), ALL every example.
    """
    check_static_feature_spec(feature_spec)
    ds = read_blocks(file_patterns, batch_size, input_context, part=part,
                     validation_fraction=validation_fraction, validation_start=validation_start)

    def parse(records: tf.Tensor) -> tuple:
        return _split_label(tf.io.parse_example(records, feature_spec), spec)

    ds = ds.map(_plain_graph(parse), num_parallel_calls=tf.data.AUTOTUNE)
    if training and batch_size > 1:
        # The rows past the last full batch are completed with the pass's first rows (read
        # again, once per pass that is not served from the cache), not dropped: each pass
        # trains on every row, and on at most batch_size - 1 rows twice. The cached batches
        # stay whole, so later passes copy nothing to stitch them.
        ds = ds.concatenate(ds.rebatch(batch_size - 1).take(1))
    ds = ds.rebatch(batch_size, drop_remainder=True)
    if cache:
        ds = ds.cache()
    if training:
        ds = ds.shuffle(SHUFFLE_BUFFER_BATCHES, seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat()
    if training:
        # A pipeline feeds each of its replicas a batch per step: a window of fewer batches
        # than that would only permute the examples of one step.
        replicas = (input_context.num_replicas_in_sync // input_context.num_input_pipelines
                    if input_context else 1)
        ds = ds.batch(MIX_WINDOW_STEPS * replicas, drop_remainder=True).enumerate()
        ds = ds.map(_plain_graph(functools.partial(_mix_examples, seed)),
                    num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.unbatch()
    return ds.prefetch(tf.data.AUTOTUNE)


# Records counted per reduce step in count_batches: a step per record would cost more than
# reading the record.
COUNT_BLOCK = 4096


def count_examples(file_patterns: str | list[str], validation_fraction: float = 0.0,
                   validation_start: float = 0.0) -> dict[str, int]:
    """Examples of each part of the files ({FIT: n, VALIDATION: n}), in one raw pass without
    parsing."""
    ds = _read_marked(file_patterns, COUNT_BLOCK, None, validation_fraction, validation_start)

    def add(counts: tf.Tensor, block: tf.Tensor | tuple) -> tf.Tensor:
        records, held = block if validation_fraction else (block, tf.zeros([0], tf.bool))
        validation = tf.reduce_sum(tf.cast(held, tf.int64))
        return counts + tf.stack([tf.size(records, out_type=tf.int64) - validation, validation])

    fit, validation = ds.reduce(tf.zeros([2], tf.int64), add).numpy()
    return {FIT: int(fit), VALIDATION: int(validation)}


def count_batches(file_patterns: str | list[str], global_batch_size: int) -> int:
    """Full global batches in the files (one raw pass, no parsing): the steps of one epoch."""
    records = count_examples(file_patterns)[FIT]
    batches = records // global_batch_size
    if batches == 0:
        raise InputError(
            f"{records} examples in {file_patterns} make no full batch of {global_batch_size}: "
            "lower per_replica_batch_size or add data"
        )
    return batches


def distributed_dataset(
    strategy: tf.distribute.Strategy,
    file_patterns: str | list[str],
    feature_spec: dict,
    per_replica_batch_size: int,
    *,
    spec: DatasetSpec,
    training: bool,
    seed: int = 42,
    cache: bool = True,
    part: str = ALL,
    validation_fraction: float = 0.0,
    validation_start: float = 0.0,
) -> tf.distribute.DistributedDataset:
    """Per-replica datasets: global batch = per-replica batch × num_replicas_in_sync."""
    global_batch = per_replica_batch_size * strategy.num_replicas_in_sync

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(
            file_patterns,
            feature_spec,
            context.get_per_replica_batch_size(global_batch),
            spec=spec,
            training=training,
            seed=seed,
            cache=cache,
            input_context=context,
            part=part,
            validation_fraction=validation_fraction,
            validation_start=validation_start,
        )

    return distribute(strategy, dataset_fn)


def distribute(strategy: tf.distribute.Strategy,
               dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset]
               ) -> tf.distribute.DistributedDataset:
    """`dataset_fn`'s datasets on `strategy`'s replicas, as every feed of a Keras model is
    distributed: a model's compiled step takes one kind of iterator, so the Trainer's
    datasets and a measurement's synthetic feed must be distributed alike.

    For one replica on a CPU under MirroredStrategy, the replica's own dataset
    (PER_REPLICA, not fetched to a device): the same batches as TensorFlow's default, whose
    multi-device iterator buys nothing there and was most of the cost of a small validation
    pass, since Keras builds the slice's iterator anew for every epoch's pass
    (docs/trainer-and-tpu.md, "What an epoch costs besides its steps"). Otherwise (a TPU,
    GPUs, several CPU devices, no strategy) TensorFlow's defaults.
    """
    options = None
    if (isinstance(strategy, tf.distribute.MirroredStrategy)
            and len(strategy.extended.worker_devices) == 1
            and tf.DeviceSpec.from_string(
                strategy.extended.worker_devices[0]).device_type == "CPU"):
        options = tf.distribute.InputOptions(
            experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
            experimental_fetch_to_device=False)
    return strategy.distribute_datasets_from_function(dataset_fn, options)


# Training examples read to estimate a regression label's mean and spread.
LABEL_SCALE_SAMPLE = 100_000


def label_scale(file_patterns: str | list[str], spec: DatasetSpec) -> tuple[float, float]:
    """(mean, std) of a regression label over up to LABEL_SCALE_SAMPLE training examples.

    The model predicts the label standardized with these, so its loss and learning rate behave
    alike whatever the label's units; a sample estimates them well enough for that.
    """
    key = spec.label_key
    parsing = {key: tf.io.FixedLenFeature([], tf.float32)}
    if spec.missing_labels == "drop":
        parsing[spec.label_weight_key] = tf.io.FixedLenFeature([], tf.float32)
    ds = (tf.data.TFRecordDataset(list_files(file_patterns), compression_type="GZIP")
          .take(LABEL_SCALE_SAMPLE).batch(4096)
          .map(lambda r: tf.io.parse_example(r, parsing)))
    total = count = squares = 0.0
    for batch in ds.as_numpy_iterator():
        weight = batch.get(spec.label_weight_key, np.ones_like(batch[key]))
        count += float(weight.sum())
        total += float((weight * batch[key]).sum())
        squares += float((weight * batch[key] ** 2).sum())
    if count == 0:
        raise InputError(f"no labelled examples in {file_patterns} to scale the regression "
                         f"label {spec.label!r}")
    mean = total / count
    std = max(squares / count - mean * mean, 0.0) ** 0.5
    return mean, std if std > 1e-12 else 1.0
