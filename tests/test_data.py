"""The input function: static shapes, drop_remainder, batch = per-replica × replicas."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from conftest import float_input
from trainer_module import data
from trainer_module.features import FLOAT, PACKED_NAMES, transformed_name


def _feature_spec(data) -> dict:
    return tft.TFTransformOutput(data.transform_dir).transformed_feature_spec()


@pytest.fixture(scope="module")
def spec(transformed_data):
    return _feature_spec(transformed_data)


def _timestamps(x, spec) -> np.ndarray:
    return float_input(x, transformed_name("trip_start_timestamp"), spec).numpy()


def test_every_tensor_has_a_fully_static_shape(task_data):
    label_dtype = tf.int32 if task_data.spec.task == "multiclass" else tf.float32
    for training in (True, False):
        ds = data.make_dataset(task_data.train_files, _feature_spec(task_data), 64,
                               spec=task_data.spec, training=training)
        inputs, label = ds.element_spec
        assert label.shape.as_list() == [64, 1] and label.dtype == label_dtype
        outputs = task_data.spec.model_outputs()
        floats = sum(o.kind == FLOAT for o in outputs)
        # Each category id on its own; every float in the one packed vector.
        assert set(inputs) == {o.name for o in outputs if o.kind != FLOAT} | {
            PACKED_NAMES[FLOAT]}
        for name, tensor_spec in inputs.items():
            assert tensor_spec.shape.is_fully_defined(), name
            assert tensor_spec.shape.as_list() == (
                [64, floats] if name == PACKED_NAMES[FLOAT] else [64]), name
            assert tensor_spec.dtype in (tf.float32, tf.int32), name


def test_eval_pass_has_whole_batches_in_file_order(transformed_data, spec):
    batches = data.count_batches(transformed_data.eval_files, 64)
    assert batches == transformed_data.eval_rows // 64
    ds = data.make_dataset(transformed_data.eval_files, spec, 64, spec=transformed_data.spec,
                           training=False)
    first_pass = [label.numpy() for _, label in ds.take(batches)]
    second_pass = [label.numpy() for _, label in ds.skip(batches).take(batches)]
    assert all((a == b).all() for a, b in zip(first_pass, second_pass, strict=True))


def test_blocks_cut_into_whole_batches_across_uneven_files(transformed_data, spec, tmp_path,
                                                         monkeypatch):
    """Parse blocks that are no multiple of the batch, from files of uneven sizes: one pass
    serves every record at most once, in whole batches, dropping less than one batch."""
    records = list(tf.data.TFRecordDataset(transformed_data.eval_files, compression_type="GZIP")
                   .as_numpy_iterator())
    sizes = [150, 70, len(records) - 220]
    files, start = [], 0
    for i, size in enumerate(sizes):
        files.append(str(tmp_path / f"part-{i}.gz"))
        with tf.io.TFRecordWriter(files[-1], options="GZIP") as writer:
            for record in records[start:start + size]:
                writer.write(record)
        start += size
    monkeypatch.setattr(data, "PARSE_BLOCK_RECORDS", 100)
    def column(x):
        return float_input(x, transformed_name("trip_start_timestamp"), transformed_data.spec)

    ds = data.make_dataset(files, spec, 64, spec=transformed_data.spec, training=False)
    batches = data.count_batches(files, 64)
    served = np.concatenate([column(x) for x, _ in ds.take(batches)])
    everything = np.concatenate([column(x) for x, _ in data.make_dataset(
        files, spec, len(records), spec=transformed_data.spec, training=False).take(1)])
    assert len(served) == batches * 64 and len(records) - len(served) < 64
    values, counts = np.unique(everything, return_counts=True)
    served_values, served_counts = np.unique(served, return_counts=True)
    available = dict(zip(values, counts, strict=True))
    assert all(available.get(v, 0) >= c for v, c in zip(served_values, served_counts, strict=True))


def test_training_reshuffles_examples_across_batches(transformed_data, spec):
    def column(x):
        return _timestamps(x, transformed_data.spec)

    ordered = data.make_dataset(transformed_data.train_files, spec, 50, spec=transformed_data.spec,
                                training=False)
    per_epoch = transformed_data.train_rows // 50
    all_values = {v for x, _ in ordered.take(per_epoch) for v in column(x)}

    ds = data.make_dataset(transformed_data.train_files, spec, 50, spec=transformed_data.spec,
                           training=True)
    batches = [frozenset(column(x)) for x, _ in ds.take(3 * per_epoch)]
    # Every example keeps being served, and batches are not the same groups epoch after epoch.
    assert set().union(*batches) == all_values
    assert set(batches[:per_epoch]) != set(batches[per_epoch:2 * per_epoch])


def test_a_training_pass_serves_every_row(transformed_data, spec):
    """1,000 rows in batches of 64: the 40 rows past the 15th batch fill a 16th with the
    first 24 rows, so the pass's 16 batches hold every row (none is left out of the cache)."""
    every_row, _ = next(iter(data.make_dataset(
        transformed_data.train_files, spec, transformed_data.train_rows,
        spec=transformed_data.spec, training=False)))
    ds = data.make_dataset(transformed_data.train_files, spec, 64, spec=transformed_data.spec,
                           training=True)
    batches = -(-transformed_data.train_rows // 64)
    assert batches % data.MIX_WINDOW_STEPS == 0  # the mix windows end with the pass
    served = np.concatenate([_timestamps(x, transformed_data.spec)
                             for x, _ in ds.take(batches)])
    wanted = _timestamps(every_row, transformed_data.spec)
    assert set(served) == set(wanted)
    # Only the remainder's complement appears twice.
    _, counts = np.unique(served, return_counts=True)
    _, wanted_counts = np.unique(wanted, return_counts=True)
    assert (counts - wanted_counts).sum() == batches * 64 - transformed_data.train_rows


def test_a_seed_repeats_the_training_batches(transformed_data, spec):
    """The same seed serves the same batches in the same order, however the parallel stages
    were scheduled; another seed serves others."""
    per_epoch = transformed_data.train_rows // 50

    def run(seed: int) -> list[np.ndarray]:
        ds = data.make_dataset(transformed_data.train_files, spec, 50, seed=seed,
                               spec=transformed_data.spec, training=True)
        return [_timestamps(x, transformed_data.spec) for x, _ in ds.take(3 * per_epoch)]

    first, again, other = run(7), run(7), run(8)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_examples_move_between_the_steps_of_several_replicas(transformed_data, spec):
    """With 8 replicas on one input pipeline a step takes 8 consecutive batches. Examples must
    be re-mixed across steps, not only among one step's replicas: no group of examples may
    share a step in every epoch (the cached batches would then keep their first-epoch
    gradients)."""
    replicas, batch = 8, 8
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=replicas)
    ds = data.make_dataset(transformed_data.train_files, spec, batch, spec=transformed_data.spec,
                           training=True, input_context=context)
    steps_per_epoch = transformed_data.train_rows // (batch * replicas)
    epochs = 4
    batches = [_timestamps(x, transformed_data.spec)
               for x, _ in ds.take(epochs * steps_per_epoch * replicas)]
    steps = [set(np.concatenate(batches[i:i + replicas]))
             for i in range(0, len(batches), replicas)]
    together: dict[float, set] = {}
    for epoch in range(epochs):
        for step in steps[epoch * steps_per_epoch:(epoch + 1) * steps_per_epoch]:
            for value in step:
                together[value] = together.get(value, step) & step
    assert max(len(group) for group in together.values()) < batch, sorted(
        len(group) for group in together.values())[-5:]


def _records_of(dataset: tf.data.Dataset) -> list[bytes]:
    return sorted(r for block in dataset.as_numpy_iterator() for r in block)


def test_the_validation_slice_samples_repeated_rows_like_any_rows(tmp_path):
    """A file of 2 distinct rows, each 1,000 times: a 20% slice holds about 400 rows, copies
    of both, and the fit part the rest. A slice drawn by the rows' bytes would hold all copies
    of a row or none (0, 1,000 or 2,000 rows): it would score rows the model never fits."""
    path = str(tmp_path / "repeated.gz")
    rows = [b"row-a", b"row-b"] * 1000
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for row in rows:
            writer.write(row)
    parts = data.count_examples(path, 0.2)
    assert parts[data.FIT] + parts[data.VALIDATION] == 2000
    assert 300 <= parts[data.VALIDATION] <= 500, parts
    validation = _records_of(data.read_blocks(path, 64, part=data.VALIDATION,
                                              validation_fraction=0.2))
    fit = _records_of(data.read_blocks(path, 64, part=data.FIT, validation_fraction=0.2))
    assert len(validation) == parts[data.VALIDATION] and set(validation) == {b"row-a", b"row-b"}
    assert sorted(fit + validation) == sorted(rows)


def test_the_slice_is_one_however_the_records_are_read(transformed_data, monkeypatch):
    """The fit part and the slice split the rows, the count agrees with what is served (with
    and without a slice), and blocks of another size or two pipelines sharing one file's
    records serve the same slice."""
    files = transformed_data.train_files
    everything = _records_of(data.read_blocks(files, 64))
    fit = _records_of(data.read_blocks(files, 64, part=data.FIT, validation_fraction=0.3))
    validation = _records_of(data.read_blocks(files, 64, part=data.VALIDATION,
                                              validation_fraction=0.3))
    assert sorted(fit + validation) == everything
    assert data.count_examples(files, 0.3) == {data.FIT: len(fit),
                                               data.VALIDATION: len(validation)}
    assert 0.25 * len(everything) < len(validation) < 0.35 * len(everything)
    # Without a slice every row fits and none is held out.
    assert data.count_examples(files) == {data.FIT: len(everything), data.VALIDATION: 0}
    assert _records_of(data.read_blocks(files, 64, part=data.FIT)) == everything
    assert not _records_of(data.read_blocks(files, 64, part=data.VALIDATION))
    monkeypatch.setattr(data, "PARSE_BLOCK_RECORDS", 100)
    assert len(data.list_files(files)) == 1  # so two pipelines share the file's records
    shared = [_records_of(data.read_blocks(
        files, 64, tf.distribute.InputContext(2, i, 2), part=data.VALIDATION,
        validation_fraction=0.3)) for i in range(2)]
    assert shared[0] and shared[1] and sorted(shared[0] + shared[1]) == validation


def test_slices_a_third_apart_are_three_folds(transformed_data):
    """Three slices of a third each, starting a third of the rows apart, hold out every row
    exactly once; each fold fits on the other two folds' rows, and is counted as served."""
    files = transformed_data.train_files
    everything = _records_of(data.read_blocks(files, 64))
    folds = [_records_of(data.read_blocks(files, 64, part=data.VALIDATION,
                                          validation_fraction=1 / 3, validation_start=i / 3))
             for i in range(3)]
    assert sorted(folds[0] + folds[1] + folds[2]) == everything
    assert all(0.28 * len(everything) < len(fold) < 0.39 * len(everything) for fold in folds)
    for i in range(3):
        fit = _records_of(data.read_blocks(files, 64, part=data.FIT,
                                           validation_fraction=1 / 3, validation_start=i / 3))
        assert fit == sorted(folds[(i + 1) % 3] + folds[(i + 2) % 3])
        assert data.count_examples(files, 1 / 3, i / 3) == {data.FIT: len(fit),
                                                            data.VALIDATION: len(folds[i])}
    # The first fold's slice is the slice of a run without folds.
    assert folds[0] == _records_of(data.read_blocks(files, 64, part=data.VALIDATION,
                                                    validation_fraction=1 / 3))


def test_variable_length_feature_is_refused():
    spec = {"ok": tf.io.FixedLenFeature([], tf.float32), "bad": tf.io.VarLenFeature(tf.int64)}
    with pytest.raises(data.InputError, match="transformed feature 'bad'.*fixed-length"):
        data.check_static_feature_spec(spec)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(data.InputError, match="no files match"):
        data.list_files(str(tmp_path / "*.gz"))


def test_global_batch_is_per_replica_times_replicas(transformed_data):
    """8 logical CPU devices (a v3-8 host's layout) → 8 replicas, each fed its own batch.

    Runs in a fresh process: logical devices must be set before TensorFlow starts.
    """
    floats = [o.name for o in transformed_data.spec.packed_inputs()[PACKED_NAMES[FLOAT]]]
    values, index = PACKED_NAMES[FLOAT], floats.index(transformed_name("trip_start_timestamp"))
    script = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf, tensorflow_transform as tft
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
        from trainer_module import data, strategy
        from trainer_module.config import TrainerConfig
        from trainer_module.dataset_spec import from_dict
        ds_spec = from_dict({transformed_data.spec.to_dict()!r}, "test", "taxi")
        dist = strategy.get_distribution_strategy(TrainerConfig.create())
        assert dist.num_replicas_in_sync == 8, dist.num_replicas_in_sync
        spec = tft.TFTransformOutput({transformed_data.transform_dir!r}).transformed_feature_spec()
        ds = data.distributed_dataset(dist, {transformed_data.train_files!r}, spec, 16,
                                      spec=ds_spec, training=False)
        inputs, label = next(iter(ds))
        parts = dist.experimental_local_results(label)
        assert [p.shape.as_list() for p in parts] == [[16, 1]] * 8, parts
        # Together the replicas got the first 128 records, each its own 16: no overlap, no gap.
        got = np.concatenate([p.numpy() for p in
                              dist.experimental_local_results(inputs[{values!r}])])[:, {index}]
        single, _ = next(iter(data.make_dataset({transformed_data.train_files!r}, spec, 128,
                                                spec=ds_spec, training=False)))
        assert np.array_equal(np.sort(got), np.sort(single[{values!r}].numpy()[:, {index}]))
        assert not np.array_equal(got[:16], got[16:32]), "replicas got the same batch"
        print("OK", sum(p.shape[0] for p in parts))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK 128" in result.stdout


def test_one_cpu_replica_reads_its_own_dataset_with_the_same_batches(transformed_data):
    """On this machine's one CPU device, MirroredStrategy's datasets are the replica's own
    (no multi-device iterator, which Keras would build again for every epoch's validation
    pass): the same batches, in the same order, as one plain pipeline reads."""
    from trainer_module import strategy
    from trainer_module.config import TrainerConfig

    dist = strategy.get_distribution_strategy(TrainerConfig.create())
    assert dist.num_replicas_in_sync == 1
    spec = tft.TFTransformOutput(transformed_data.transform_dir).transformed_feature_spec()
    values = PACKED_NAMES[FLOAT]
    for training in (False, True):
        ds = data.distributed_dataset(dist, transformed_data.train_files, spec, 16,
                                      spec=transformed_data.spec, training=training, seed=3)
        iterator = iter(ds)
        plain = iter(data.make_dataset(transformed_data.train_files, spec, 16,
                                       spec=transformed_data.spec, training=training, seed=3))
        for _ in range(5):
            (got, got_label), (want, want_label) = next(iterator)[:2], next(plain)[:2]
            assert np.array_equal(got[values].numpy(), want[values].numpy())
            assert np.array_equal(got_label.numpy(), want_label.numpy())


def test_regression_label_scale_is_the_training_labels_mean_and_spread(fare_data):
    fares = [float(r["fare"]) for r in fare_data.rows.read_rows(fare_data.train_rows)]
    mean, std = data.label_scale(fare_data.train_files, fare_data.spec)
    assert abs(mean - sum(fares) / len(fares)) < 1e-3
    assert abs(std - float(np.std(fares))) < 1e-3
