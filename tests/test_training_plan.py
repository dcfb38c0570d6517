"""The training plan's decisions, on real Transform output: learning-rate scaling and warmup,
the input cache, the profiler, the export parity gate and warm start.

Everything runs for real on this CPU; nothing here stands in for a TPU.
"""

import dataclasses
import glob
import logging
import math
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tfx.components.trainer.fn_args_utils import FnArgs

from pipeline.runs import report
from trainer_module import (
    cache_size,
    data,
    early_stopping,
    export,
    keys,
    model,
    parity,
    plan,
    run,
    warm_start,
)
from trainer_module.config import MIN_VALIDATION_ROWS, TrainerConfig
from trainer_module.executor import RAW_EVAL_FILES_KEY


def _fn_args(data_, out, steps: int, base_model: str | None = None, **settings) -> FnArgs:
    return FnArgs(
        train_files=[data_.train_files], eval_files=[data_.eval_files], train_steps=steps,
        eval_steps=None, transform_graph_path=data_.transform_dir, base_model=base_model,
        serving_model_dir=os.path.join(out, "serving"), model_run_dir=os.path.join(out, "run"),
        custom_config={**TrainerConfig.create(**settings).to_custom_config(),
                       **data_.spec.to_custom_config(),
                       RAW_EVAL_FILES_KEY: [data_.raw_eval_files]})


# --- One plan --------------------------------------------------------------------------------

def test_the_step_is_planned_in_one_place():
    """run_fn, the Tuner, make tpu-check and the bench take strategy, precision and compile
    from the plan; only the float32 export sets a policy of its own."""
    import ast

    calls: dict[str, set[str]] = {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in ("trainer_module", "pipeline", "bench"):
        for path in glob.glob(os.path.join(root, folder, "*.py")):
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                    calls.setdefault(name, set()).add(os.path.relpath(path, root))
    assert calls["compile_model"] == {"trainer_module/plan.py"}
    assert calls["get_distribution_strategy"] == {"trainer_module/plan.py"}
    assert calls["set_global_policy"] == {"trainer_module/plan.py", "trainer_module/export.py"}
    assert {"trainer_module/plan.py", "trainer_module/tool_tpu_step.py",
            "bench/throughput.py"} <= calls["make_plan"]
    # run_fn and the Tuner's tuner_fn take plan and data from the same run_inputs.
    assert calls["run_inputs"] == {"trainer_module/run.py", "trainer_module/tuning.py"}


# --- Validation slice ------------------------------------------------------------------------

def test_a_validation_slice_too_small_to_tell_epochs_apart_grows(transformed_data, tmp_path):
    """1,000 training rows: a 30% slice is held out; a 5% one (~50 rows) would score epochs on
    noise, so it grows until it holds 100 rows (early stopping still picks the epochs on small
    data), unless the caller (the Tuner) takes any slice; where even 30% of the rows is too
    few, every row fits."""
    spec = transformed_data.spec

    def parts(fraction: float, **kwargs) -> tuple[dict[str, int], bool]:
        config = TrainerConfig.create(validation_fraction=fraction)
        args = _fn_args(transformed_data, str(tmp_path), 0, validation_fraction=fraction)
        args.train_steps = None
        inputs = plan.run_inputs(config, spec, args, **kwargs)
        assert inputs.plan.validation_examples == inputs.examples[data.VALIDATION]
        return inputs.examples, inputs.validation is not None

    held, validated = parts(0.3)
    assert held[data.VALIDATION] >= MIN_VALIDATION_ROWS and validated
    assert sum(held.values()) == 1000
    grown, validated = parts(0.05)
    assert MIN_VALIDATION_ROWS <= grown[data.VALIDATION] <= 0.3 * 1000 and validated
    assert sum(grown.values()) == 1000
    small, validated = parts(0.05, min_validation_rows=1)
    assert 0 < small[data.VALIDATION] < MIN_VALIDATION_ROWS and validated
    assert parts(0.05, min_validation_rows=400) == ({data.FIT: 1000, data.VALIDATION: 0}, False)


def test_a_refit_trains_a_fresh_model_on_every_training_row_for_the_factors_epochs(
        transformed_data, tmp_path, caplog):
    """refit_factor 1.5: after early stopping keeps epoch E on the slice, a fresh model trains
    on all 1,000 training rows for ceil(1.5 E) epochs, each one pass over them, and it is the
    model exported (the parity gate compares the export with it)."""
    args = _fn_args(transformed_data, str(tmp_path), 0, epochs=4, per_replica_batch_size=64,
                    validation_fraction=0.3, refit_factor=1.5)
    args.train_steps = None
    with caplog.at_level(logging.INFO, logger="absl"):
        run.run_fn(args)
    record = early_stopping.read_record(args.model_run_dir)
    assert record.fit_rows + record.validation_rows == 1000 and record.best_epoch >= 1
    assert record.refit_epochs == math.ceil(1.5 * record.best_epoch)
    steps = round(record.fit_rows // 64 * 1000 / record.fit_rows)  # 1000 // 64, rounded
    assert (f"Refitting on all 1000 training rows (the validation slice's too): "
            f"{record.refit_epochs} epochs of {steps} steps") in caplog.text
    refit = report.training_curves(os.path.join(args.model_run_dir, run.REFIT_DIR, "logs"))
    assert [epoch for epoch, _ in refit["train"]["loss"]] == list(range(record.refit_epochs))
    # The refit's rate follows the first fit's schedule epoch for epoch (the default cosine
    # over the 4-epoch budget, from the peak the linear rule gives batch 64; over the refit's
    # own epochs where it runs longer), so at the kept epoch it is where early stopping saw it.
    peak = TrainerConfig().training.learning_rate * plan.learning_rate_scale(TrainerConfig(), 64)
    epochs = record.refit_epochs
    span = max(4, epochs)
    assert [rate for _, rate in refit["train"]["learning_rate"]] == pytest.approx(
        [peak * 0.5 * (1 + math.cos(math.pi * e / span)) for e in range(1, epochs + 1)],
        rel=1e-4, abs=1e-9)
    assert record.refit_kept and record.refit_val_loss <= record.best_val_loss
    assert "validation" not in refit  # the slice is trained on, not scored
    # The run report says which model was exported.
    assert (f"The exported model is a refit on all 1,000 training rows for "
            f"{record.refit_epochs} epochs.") in report._budget(record)
    [parity_line] = [r.getMessage() for r in caplog.records
                     if r.getMessage().startswith("Export parity")]
    assert "on 256 raw eval examples" in parity_line


def test_a_refit_on_its_own_schedule_ends_its_decay_at_its_last_epoch(transformed_data,
                                                                        tmp_path):
    """refit_schedule 'own': the refit's rate runs the whole cosine over its own epochs and ends
    at lr_floor of the peak, where the first fit's schedule (a 30-epoch budget, stopped early)
    would still be near the peak after the refit's few epochs."""
    args = _fn_args(transformed_data, str(tmp_path), 0, epochs=30, per_replica_batch_size=64,
                    validation_fraction=0.3, early_stopping_patience=3, learning_rate=0.05,
                    refit_factor=1, refit_schedule="own", lr_floor=0.1)
    args.train_steps = None
    run.run_fn(args)
    record = early_stopping.read_record(args.model_run_dir)
    epochs = record.refit_epochs
    assert 1 <= epochs < 30, "the refit must run fewer epochs than the budget to tell them apart"
    refit = report.training_curves(os.path.join(args.model_run_dir, run.REFIT_DIR, "logs"))
    peak = 0.05 * plan.learning_rate_scale(TrainerConfig(), 64)
    assert [rate for _, rate in refit["train"]["learning_rate"]] == pytest.approx(
        [peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * e / epochs)))
         for e in range(1, epochs + 1)], rel=1e-4, abs=1e-9)


def test_a_refit_worse_than_the_kept_epoch_is_not_exported(transformed_data, tmp_path,
                                                            monkeypatch):
    """A refit that went wrong (here: one that answers "big tipper" with certainty for every
    row, standing in for a schedule that never reaches what early stopping measured) scores
    worse on the validation rows than the kept epoch: the kept epoch's model is exported, and
    the record and report say so."""
    def wrecked_refit(self, inputs, kept_epoch, train_files, callbacks, base_model=None):
        wrecked = self.compiled_model(inputs.tf_transform_output, inputs.label_scale)
        weights = [np.zeros_like(w) for w in wrecked.get_weights()]
        weights[-1] = np.full_like(weights[-1], 10.0)  # the head's bias: sigmoid(10) ≈ 1
        wrecked.set_weights(weights)
        return wrecked, 7

    monkeypatch.setattr(plan.TrainingPlan, "refit", wrecked_refit)
    args = _fn_args(transformed_data, str(tmp_path), 0, epochs=4, per_replica_batch_size=64,
                    validation_fraction=0.3, refit_factor=1.5)
    args.train_steps = None
    run.run_fn(args)  # the parity gate checks the export against the model it exported
    record = early_stopping.read_record(args.model_run_dir)
    assert record.refit_epochs == 7 and not record.refit_kept
    assert record.refit_val_loss > record.best_val_loss
    assert "it was discarded, and the kept epoch's model is the one exported" in \
        report._budget(record)
    served = tf.saved_model.load(args.serving_model_dir).signatures[keys.SERVING_SIGNATURE]
    scores = served(examples=tf.constant(transformed_data.rows.serialized(
        transformed_data.eval_csv_rows[:64], serving=True)))["probabilities"].numpy()
    assert scores.std() > 1e-4  # the kept epoch's model: the wrecked refit answers ~1 always


def test_without_a_validation_slice_nothing_is_refitted(transformed_data, tmp_path):
    args = _fn_args(transformed_data, str(tmp_path), 8, per_replica_batch_size=64,
                    validation_fraction=0.0, refit_factor=1.5)
    run.run_fn(args)
    record = early_stopping.read_record(args.model_run_dir)
    assert (record.best_epoch, record.refit_epochs) == (0, 0)
    assert not os.path.exists(os.path.join(args.model_run_dir, run.REFIT_DIR))


def test_folds_train_a_model_on_each_slice_and_export_their_mean(transformed_data, tmp_path):
    """validation_folds=2 with half the rows in each slice: two networks, each early-stopped
    on the half the other fits, so the two slices hold every training row once; each fold's
    record and logs are its own, and the export holds both networks (twice the variables of
    one) and answers as the mean the parity gate compared it with."""
    args = _fn_args(transformed_data, str(tmp_path), 0, epochs=3, per_replica_batch_size=64,
                    validation_fraction=0.5, validation_folds=2)
    args.train_steps = None
    run.run_fn(args)
    records = [early_stopping.read_record(run.fold_dir(args.model_run_dir, fold))
               for fold in range(2)]
    assert [(r.fold, r.folds) for r in records] == [(0, 2), (1, 2)]
    assert sum(r.validation_rows for r in records) == 1000
    assert all(r.fit_rows + r.validation_rows == 1000 and r.best_epoch >= 1 for r in records)
    assert os.path.isdir(os.path.join(run.fold_dir(args.model_run_dir, 1), "logs"))
    assert "This is the first of 2 models" in report._budget(records[0])
    assert "first of" not in report._budget(dataclasses.replace(records[0], folds=1))
    spec = transformed_data.spec
    one = model.build_model(TrainerConfig.create(), spec, model.category_sizes(
        spec, tft.TFTransformOutput(transformed_data.transform_dir)))
    exported = [name for name, _ in tf.train.list_variables(
        os.path.join(args.serving_model_dir, "variables", "variables")) if "kernel" in name]
    assert len(exported) == 2 * len([w for w in one.weights if "kernel" in w.name]) > 0


# --- Learning rate --------------------------------------------------------------------------

@pytest.mark.parametrize("rule, factor", [("none", 1.0), ("linear", 8.0), ("sqrt", 8 ** 0.5)])
def test_learning_rate_follows_the_global_batch_by_the_rule(rule, factor):
    config = TrainerConfig.create(lr_scaling=rule, reference_batch_size=256)
    assert plan.learning_rate_scale(config, 8 * 256) == pytest.approx(factor)
    assert plan.learning_rate_scale(config, 256) == 1.0


def test_warmup_ramps_from_the_reference_rate_to_the_scaled_rate(transformed_data):
    dist = tf.distribute.get_strategy()
    config = TrainerConfig.create(global_batch_size=1024, reference_batch_size=256,
                                  learning_rate=0.001, lr_scaling="linear", warmup_fraction=0.1)
    training = plan.make_plan(config, transformed_data.spec, 400, dist=dist)
    assert training.peak_learning_rate == pytest.approx(0.004)
    assert training.warmup_steps == 40
    held = plan.make_plan(config.replace(lr_decay="none"), transformed_data.spec, 400,
                          dist=dist).learning_rate()
    assert [round(float(held(step)), 6) for step in (0, 20, 40, 400)] == [
        0.001, 0.0025, 0.004, 0.004]
    # At or below the reference batch there is nothing to warm up to.
    small = plan.make_plan(config.replace(global_batch_size=128), transformed_data.spec, 400,
                           dist=dist)
    assert small.warmup_steps == 0 and float(small.learning_rate()(0)) == pytest.approx(0.0005)


def test_cosine_decay_takes_the_rate_from_its_peak_to_zero_at_the_last_step(transformed_data):
    """The default: after the warmup, half a cosine wave down to 0 at the budget's end, over
    the plan's steps or over the steps a caller names (a refit's)."""
    config = TrainerConfig.create(global_batch_size=1024, reference_batch_size=256,
                                  learning_rate=0.001, warmup_fraction=0.1)
    training = plan.make_plan(config, transformed_data.spec, 400,
                              dist=tf.distribute.get_strategy())
    rate = training.learning_rate()
    assert [round(float(rate(step)), 6) for step in (0, 20, 40, 220, 400, 500)] == [
        0.001, 0.0025, 0.004, 0.002, 0.0, 0.0]
    # Over 2,000 steps (a refit's, say) the ramp is 10% of those: 200 steps.
    longer = training.learning_rate(2000)
    assert [round(float(longer(step)), 6) for step in (100, 200, 1100, 2000)] == [
        0.0025, 0.004, 0.002, 0.0]
    # Without a warmup the wave starts at the first step.
    small = plan.make_plan(config.replace(global_batch_size=256), transformed_data.spec, 400,
                           dist=tf.distribute.get_strategy()).learning_rate()
    assert [round(float(small(step)), 6) for step in (0, 200, 400)] == [0.001, 0.0005, 0.0]
    # With a floor the wave ends at that share of the peak, halfway between at its middle.
    floored = plan.make_plan(config.replace(global_batch_size=256, lr_floor=0.1),
                             transformed_data.spec, 400,
                             dist=tf.distribute.get_strategy()).learning_rate()
    assert [round(float(floored(step)), 6) for step in (0, 200, 400, 500)] == [
        0.001, 0.00055, 0.0001, 0.0001]


# --- Input cache ----------------------------------------------------------------------------

def test_record_estimate_is_exact_on_a_file_read_whole(transformed_data):
    assert cache_size.estimated_records([transformed_data.train_files]) == 1000


def test_record_estimate_from_a_sample_of_the_files(transformed_data, monkeypatch, tmp_path):
    # Ten copies of the split, and a sample of only the first file's start.
    files = []
    with open(transformed_data.train_files, "rb") as f:
        content = f.read()
    for i in range(10):
        files.append(str(tmp_path / f"part-{i}.gz"))
        with open(files[-1], "wb") as f:
            f.write(content)
    monkeypatch.setattr(cache_size, "SAMPLE_BYTES", len(content) // 3)
    estimate = cache_size.estimated_records(files)
    assert abs(estimate - 10_000) / 10_000 < 0.15, estimate


def test_auto_cache_keeps_a_split_in_memory_only_when_it_fits(transformed_data, monkeypatch):
    spec = transformed_data.spec
    splits = {"train": transformed_data.train_files, "eval": transformed_data.eval_files}
    per_example = cache_size.bytes_per_example(spec)
    assert per_example == 4 * (len(spec.model_outputs()) + 1)
    ram = 100 * 1000 * per_example  # the train split takes 1% of it, eval 0.5%
    monkeypatch.setattr(cache_size, "host_memory_bytes", lambda: ram)

    def decide(**settings):
        return cache_size.decide(TrainerConfig.create(**settings).data, spec, splits)

    fits = decide(cache="auto", cache_memory_fraction=0.02)
    assert fits.cached == {"train": True, "eval": True}
    assert fits.estimated == {"train": 1000 * per_example, "eval": 500 * per_example}
    only_eval = decide(cache="auto", cache_memory_fraction=0.008)
    assert only_eval.cached == {"train": False, "eval": True}
    assert f"train ~{1000 * per_example / 1e6:,.1f} MB streamed from files" in \
        only_eval.describe()
    assert decide(cache="auto", cache_memory_fraction=0.001).cached == {"train": False,
                                                                         "eval": False}
    assert decide(cache="memory", cache_memory_fraction=0.001).cached["train"] is True
    assert decide(cache="none").cached == {"train": False, "eval": False}


def test_streamed_split_gives_the_same_batches_every_pass(transformed_data):
    feature_spec = tft.TFTransformOutput(
        transformed_data.transform_dir).transformed_feature_spec()

    def two_passes(cache: bool) -> list[np.ndarray]:
        ds = data.make_dataset(transformed_data.eval_files, feature_spec, 100,
                               spec=transformed_data.spec, training=False, cache=cache)
        return [label.numpy() for _, label in ds.take(10)]

    assert all(np.array_equal(a, b) for a, b in zip(two_passes(True), two_passes(False),
                                                       strict=True))


def test_host_memory_is_the_smaller_of_ram_and_the_container_limit(monkeypatch, tmp_path):
    limit = tmp_path / "memory.max"
    limit.write_text("1073741824\n")
    monkeypatch.setattr(cache_size, "CGROUP_LIMITS", (str(limit),))
    assert cache_size.host_memory_bytes() == 1 << 30
    limit.write_text("max\n")  # no limit set
    assert cache_size.host_memory_bytes() > 1 << 30


# --- The Trainer run: profiler, parity, warm start ------------------------------------------

@pytest.fixture(scope="module")
def baseline(transformed_data, tmp_path_factory) -> FnArgs:
    """A Trainer run with a profile of steps 3 to 4, whose export later runs warm-start from."""
    args = _fn_args(transformed_data, str(tmp_path_factory.mktemp("baseline")), 16,
                    per_replica_batch_size=64, steps_per_execution=2, profile_steps=(3, 4),
                    cache="none")
    run.run_fn(args)
    return args


def test_profile_is_written_into_the_model_runs_logs(baseline):
    traces = glob.glob(os.path.join(baseline.model_run_dir, "logs", "plugins", "profile", "*",
                                     "*.xplane.pb"))
    assert len(traces) == 1 and os.path.getsize(traces[0]) > 0


def test_the_logs_hold_the_epochs_scalars_and_not_the_train_steps_graph(baseline):
    """The step's graph is left out (trainer_module/run.py: under MirroredStrategy it holds a
    copy per replica and took a minute to write); the scalars the report draws are there."""
    from tensorboard.backend.event_processing import event_file_loader

    logs = os.path.join(baseline.model_run_dir, "logs")
    assert "loss" in report.training_curves(logs)["train"]
    events = [event for path in glob.glob(os.path.join(logs, "*", "events.out.tfevents.*"))
              for event in event_file_loader.EventFileLoader(path).Load()]
    assert events and not [e for e in events if e.graph_def or e.meta_graph_def]


def test_export_parity_passes_on_a_faithful_export(transformed_data, tmp_path, caplog):
    args = _fn_args(transformed_data, str(tmp_path), 8, per_replica_batch_size=64,
                    mixed_precision="mixed_bfloat16")
    with caplog.at_level(logging.INFO, logger="absl"):
        run.run_fn(args)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Export parity")]
    assert "on 256 raw eval examples (tolerance 0.02)" in line
    # Where the run's time went: planning (counting the rows) apart from the fit.
    [times] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Planned in")]
    _, trained, exported, _ = map(float, re.findall(r"in (\d+\.\d) s", times))
    assert trained > 0 and exported > 0, times


def test_export_that_answers_otherwise_fails_the_trainer(transformed_data, tmp_path,
                                                         monkeypatch):
    faithful = export.float32_copy

    def shifted_copy(*args, **kwargs):
        copy = faithful(*args, **kwargs)
        head = copy.get_layer("head")
        kernel, bias = head.get_weights()
        head.set_weights([kernel, bias + 1.0])  # every logit moved: probabilities shift
        return copy

    monkeypatch.setattr(export, "float32_copy", shifted_copy)
    args = _fn_args(transformed_data, str(tmp_path), 8, per_replica_batch_size=64)
    with pytest.raises(parity.ExportParityError,
                       match=r"export parity failed: max \|served - trained\| = 0\.\d+ on 256 "
                             r"raw eval examples \(tolerance 0\.02\); at eval example #\d+"
                             r".*MIXED_PRECISION=float32.*EXPORT_PARITY_TOLERANCE"):
        run.run_fn(args)


def test_trainer_without_raw_eval_examples_says_what_is_missing(transformed_data, tmp_path):
    args = _fn_args(transformed_data, str(tmp_path), 8)
    del args.custom_config[RAW_EVAL_FILES_KEY]
    with pytest.raises(ValueError, match="custom_config has no 'raw_eval_files'"):
        run.run_fn(args)


def _plan(transformed_data, **settings) -> plan.TrainingPlan:
    return plan.make_plan(TrainerConfig.create(per_replica_batch_size=64, **settings),
                          transformed_data.spec, 16, dist=tf.distribute.get_strategy())


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_the_train_step_is_traced_once_and_updates_with_fused_adam(transformed_data,
                                                                    weight_decay):
    """The optimizer's slots exist before fit (else the train function is traced twice), and
    each variable takes one fused Adam update, not a chain of small ops, with or without
    weight decay."""
    training = _plan(transformed_data, weight_decay=weight_decay)
    tft_output = tft.TFTransformOutput(transformed_data.transform_dir)
    keras_model = training.compiled_model(tft_output)
    train_ds, _ = training.datasets(transformed_data.train_files,
                                    tft_output.transformed_feature_spec(), cache=True)
    keras_model.fit(train_ds, epochs=1, steps_per_epoch=training.steps_per_execution, verbose=0)
    assert keras_model.train_function.experimental_get_tracing_count() == 1
    graph_def = keras_model.train_function.get_concrete_function(
        iter(train_ds)).graph.as_graph_def()
    ops = [node.op for function in graph_def.library.function for node in function.node_def]
    assert ops.count("ResourceApplyAdam") == len(keras_model.trainable_variables)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_weight_decay_shrinks_every_weight_apart_from_the_gradient(transformed_data,
                                                                   weight_decay):
    """With a zero gradient Adam moves nothing; decoupled weight decay still takes
    weight_decay × the step's rate off each weight (AdamW's rule), on dense layers and on
    embeddings alike (whose gradients are sparse rows)."""
    training = _plan(transformed_data, weight_decay=weight_decay)
    keras_model = training.compiled_model(
        tft.TFTransformOutput(transformed_data.transform_dir))
    optimizer = keras_model.optimizer
    rate = float(optimizer.learning_rate(optimizer.iterations))
    dense = keras_model.get_layer("hidden_0").kernel
    table = next(v for v in keras_model.trainable_variables if "embedding" in v.name)
    before = {v.name: v.numpy() for v in (dense, table)}
    rows = tf.constant([0, 1])
    optimizer.apply_gradients([
        (tf.zeros_like(dense), dense),
        (tf.IndexedSlices(tf.zeros([2, table.shape[1]]), rows, tf.shape(table)), table)])
    for variable in (dense, table):
        np.testing.assert_allclose(variable.numpy(),
                                   before[variable.name] * (1 - rate * weight_decay),
                                   rtol=1e-6)
    assert (weight_decay > 0) == isinstance(optimizer, plan.DecayedAdam)
    assert f"weight decay {weight_decay:g}" in training.describe() if weight_decay else (
        "weight decay" not in training.describe())


def test_warm_start_loads_the_baselines_weights_before_the_first_step(transformed_data,
                                                                      baseline):
    tft_output = tft.TFTransformOutput(transformed_data.transform_dir)
    keras_model = _plan(transformed_data).compiled_model(tft_output)
    expected = warm_start.baseline_weights(baseline.serving_model_dir)
    assert not all(np.array_equal(v.numpy(), expected[v.name.split(":")[0]])
                   for v in keras_model.weights)  # a fresh model differs
    assert warm_start.restore(keras_model, baseline.serving_model_dir) == len(
        keras_model.weights)
    for variable in keras_model.weights:
        np.testing.assert_array_equal(variable.numpy(), expected[variable.name.split(":")[0]])


def _grown_model(transformed_data) -> tuple:
    """The Transform output and a model whose company vocabulary has five more tokens."""
    tft_output = tft.TFTransformOutput(transformed_data.transform_dir)
    training = _plan(transformed_data)
    sizes = model.category_sizes(transformed_data.spec, tft_output)
    grown = {**sizes, "company_xf": sizes["company_xf"] + 5}
    return tft_output, training.compiled_model(
        tft_output, build=lambda: model.build_model(training.config, training.spec, grown))


def test_warm_start_names_the_layers_a_grown_vocabulary_changed(transformed_data, baseline):
    _, keras_model = _grown_model(transformed_data)
    with pytest.raises(warm_start.WarmStartError,
                       match=r"company_xf_embedding/embeddings is \[\d+, 4\] in the baseline, "
                             r"\[\d+, 4\] now.*set warm_start=false"):
        warm_start.restore(keras_model, baseline.serving_model_dir)


def test_warm_start_matches_a_grown_vocabularys_rows_by_token(transformed_data, baseline):
    """A new span brought five companies: their rows stay fresh, every known company's row and
    the out-of-vocabulary rows come from the baseline, moved to the token's new id."""
    tft_output, keras_model = _grown_model(transformed_data)
    found = warm_start.vocabularies(transformed_data.spec, tft_output)
    asset, old_tokens = found["company_xf_embedding/embeddings"]
    tokens = [f"new company {i}" for i in range(5)] + list(reversed(old_tokens))
    [embedding] = [v for v in keras_model.weights
                   if v.name.startswith("company_xf_embedding/")]
    fresh = embedding.numpy()
    warm_start.restore(keras_model, baseline.serving_model_dir,
                       {**found, "company_xf_embedding/embeddings": (asset, tokens)})
    old = warm_start.baseline_weights(baseline.serving_model_dir)[
        "company_xf_embedding/embeddings"]
    rows = embedding.numpy()
    np.testing.assert_array_equal(rows[:5], fresh[:5])
    for i, token in enumerate(tokens[5:], start=5):
        np.testing.assert_array_equal(rows[i], old[old_tokens.index(token)])
    np.testing.assert_array_equal(rows[len(tokens):], old[len(old_tokens):])


def test_warm_started_trainer_run(transformed_data, baseline, tmp_path, caplog):
    args = _fn_args(transformed_data, str(tmp_path), 8, per_replica_batch_size=64,
                    warm_start=True, base_model=baseline.serving_model_dir)
    with caplog.at_level(logging.INFO, logger="absl"):
        run.run_fn(args)
    # Every variable of the baseline (one per layer weight) is restored.
    weights = len(warm_start.baseline_weights(baseline.serving_model_dir))
    assert weights > 10
    assert f"Warm start: {weights} variables from {baseline.serving_model_dir}" in caplog.text
    # The first run of a pipeline has no blessed model to start from: it says so and trains.
    caplog.clear()
    no_base = _fn_args(transformed_data, str(tmp_path / "no-base"), 8, warm_start=True)
    with caplog.at_level(logging.INFO, logger="absl"):
        run.run_fn(no_base)
    assert "warm_start=true, but there is no blessed model yet" in caplog.text
    assert "Warm start:" not in caplog.text
