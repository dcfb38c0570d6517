"""Model building and the float32 export, for each task: what serving and the Evaluator get."""

import itertools
import math
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from dataset_rows import TAXI
from trainer_module import export, feature_signature, keys
from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import from_dict
from trainer_module.features import CATEGORY, FLOAT, PACKED_NAMES
from trainer_module.model import (
    WIDE_LAYER,
    WIDE_PER_MEMBER_LAYER,
    WIDE_STEP,
    Ensemble,
    build_model,
    category_sizes,
    compile_model,
    fold_mean,
    model_inputs,
)

# The serving outputs each task promises: name → (dtype, width; None: the class count).
OUTPUTS = {"binary": {"probabilities": (tf.float32, 1)},
           "multiclass": {"scores": (tf.float32, None), "classes": (tf.string, None)},
           "regression": {"predictions": (tf.float32, 1)}}


def _tft(data) -> tft.TFTransformOutput:
    return tft.TFTransformOutput(data.transform_dir)


def _model(data, config=None, scale=(0.0, 1.0)) -> tf_keras.Model:
    return build_model(config or TrainerConfig.create(), data.spec,
                       category_sizes(data.spec, _tft(data)), scale)


def test_model_takes_every_output_of_the_spec(task_data):
    """Each category id as an input of its own; every float in Transform's packed vector."""
    model = _model(task_data)
    outputs = task_data.spec.model_outputs()
    floats = [o for o in outputs if o.kind != CATEGORY]
    assert floats and set(model.input_names) == (
        {o.name for o in outputs if o.kind == CATEGORY} | {PACKED_NAMES[FLOAT]})
    assert model.get_layer(PACKED_NAMES[FLOAT]).output.shape == (None, len(floats))
    assert model.output_shape == (None, task_data.spec.num_classes)


def test_hidden_widths_are_multiples_of_128(transformed_data):
    config = TrainerConfig.create()
    model = _model(transformed_data, config)
    widths = [layer.units for layer in model.layers if layer.name.startswith("hidden_")]
    assert widths == list(config.model.hidden_units)
    assert all(w % 128 == 0 for w in widths)


def test_embedding_tables_fit_every_id_the_transform_emits(task_data):
    sizes = category_sizes(task_data.spec, _tft(task_data))
    batch = next(iter(tf.data.TFRecordDataset(task_data.train_files, "GZIP").batch(1000)))
    parsed = model_inputs(tf.io.parse_example(batch, _tft(task_data).transformed_feature_spec()),
                          task_data.spec)
    categories = [o.name for o in task_data.spec.model_outputs() if o.kind == CATEGORY]
    assert categories and set(categories) == set(sizes)
    for name in categories:
        assert int(tf.reduce_max(parsed[name])) < sizes[name], name
        assert int(tf.reduce_min(parsed[name])) >= 0, name


def test_every_pair_of_category_ids_has_its_own_embedding_rows():
    """A pair with fewer combinations than cross_buckets gets a row for each; a larger pair
    shares its rows by (a·sb + b) mod rows, in int32 even where a·sb is past int32."""
    from trainer_module.model import PairEmbedding

    big = 46340
    layer = PairEmbedding([2, 3, big], buckets=10, dim=1, regularizer=None)
    layer.build(None)
    assert layer.blocks == [6, 10, 10]
    layer.embeddings.assign(np.arange(26, dtype=np.float32).reshape(26, 1))
    a, b, c = np.meshgrid(np.arange(2), np.arange(3), [0, 7, big - 1], indexing="ij")
    a, b, c = (tf.constant(v.ravel(), tf.int32) for v in (a, b, c))
    rows = layer([a, b, c]).numpy().astype(np.int64)
    a, b, c = (v.numpy().astype(np.int64) for v in (a, b, c))
    np.testing.assert_array_equal(rows[:, 0], a * 3 + b)  # exact: 6 distinct rows
    np.testing.assert_array_equal(rows[:, 1], 6 + (a * big + c) % 10)
    np.testing.assert_array_equal(rows[:, 2], 16 + (b * big + c) % 10)
    wide = PairEmbedding([big, big], buckets=big, dim=1, regularizer=None)
    wide.build(None)
    wide.embeddings.assign(np.arange(big, dtype=np.float32).reshape(big, 1))
    ids = tf.constant([big - 1], tf.int32)
    assert int(wide([ids, ids]).numpy()[0, 0]) == ((big - 1) * big + big - 1) % big


def test_embedding_layers_rebuild_from_their_config_with_their_penalty():
    """Keras' from_config takes a layer's config back to the same layer: the penalty the
    model gave its embedding tables is part of it."""
    from trainer_module.model import PairEmbedding, TokenMean

    penalty = tf_keras.regularizers.L2(0.01)
    for layer, ids in ((TokenMean(5, 2, penalty), [tf.constant([1, 0]), tf.constant([2, 3])]),
                       (PairEmbedding([2, 3], 10, 2, penalty), [tf.constant([1]),
                                                                tf.constant([2])])):
        layer(ids)
        rebuilt = type(layer).from_config(layer.get_config())
        rebuilt(ids)
        assert rebuilt.get_config() == layer.get_config()
        rebuilt.embeddings.assign(layer.embeddings)
        np.testing.assert_allclose(float(rebuilt.losses[0]), float(layer.losses[0]), rtol=1e-6)


def test_pair_embeddings_follow_cross_buckets(task_data):
    singles = [o for o in task_data.spec.model_outputs() if o.kind == CATEGORY and not o.group]
    config = TrainerConfig.create(cross_dim=3)
    pairs = _model(task_data, config).get_layer("category_pairs_embedding")
    assert pairs.output.shape == (None, len(singles) * (len(singles) - 1) // 2 * 3)
    assert pairs.embeddings.shape[0] == sum(
        min(a * b, config.model.cross_buckets) for a, b in itertools.combinations(
            [category_sizes(task_data.spec, _tft(task_data))[o.name] for o in singles], 2))
    off = _model(task_data, TrainerConfig.create(cross_buckets=0))
    assert "category_pairs_embedding" not in [layer.name for layer in off.layers]


def test_steps_per_execution_is_applied(transformed_data):
    model = _model(transformed_data)
    compile_model(model, transformed_data.spec, optimizer=tf_keras.optimizers.Adam(),
                  steps_per_execution=16, jit_compile=False)
    assert int(model._steps_per_execution.numpy()) == 16


def test_autograph_leaves_keras_own_functions_as_written(transformed_data):
    """Only Keras' outer train and test functions (their loop over steps_per_execution) are
    converted; AutoGraph's cache of transpiled code shows what it rewrote."""
    from tensorflow.python.autograph.impl import api

    from trainer_module import data

    model = _model(transformed_data)
    compile_model(model, transformed_data.spec, optimizer=tf_keras.optimizers.Adam(),
                  steps_per_execution=2, jit_compile=False)
    feature_spec = _tft(transformed_data).transformed_feature_spec()
    batches = data.make_dataset(transformed_data.train_files, feature_spec, 32,
                                spec=transformed_data.spec, training=True)
    before = set(api._TRANSPILER._cache._cache)  # code that earlier tests had converted
    history = model.fit(batches, epochs=1, steps_per_epoch=4, validation_data=batches,
                        validation_steps=2, verbose=0)
    assert np.isfinite(history.history["val_loss"][0])
    converted = {code.co_name for code in set(api._TRANSPILER._cache._cache) - before
                 if f"{os.sep}tf_keras{os.sep}" in code.co_filename}
    assert converted <= {"train_function", "test_function"}, converted


def test_regression_head_answers_in_the_labels_units(fare_data):
    """An untrained network predicts 0 in standardized units: the label's mean in dollars."""
    model = _model(fare_data, TrainerConfig.create(hidden_units=(128,)), scale=(12.5, 10.0))
    head = model.get_layer("head")
    head.set_weights([np.zeros_like(w) for w in head.get_weights()])
    batch = next(iter(tf.data.TFRecordDataset(fare_data.train_files, "GZIP").batch(4)))
    inputs = model_inputs(tf.io.parse_example(batch, _tft(fare_data).transformed_feature_spec()),
                          fare_data.spec)
    np.testing.assert_allclose(model(inputs).numpy(), 12.5, rtol=1e-6)


def _export(data, model, tmp_path, scale=(0.0, 1.0)):
    export_dir = str(tmp_path / "serving")
    export.export_serving_model(model, TrainerConfig.create(hidden_units=(128,)), data.spec,
                                _tft(data), export_dir, scale)
    return tf.saved_model.load(export_dir)


def test_export_traces_the_transform_once_for_both_serving_signatures(transformed_data,
                                                                       tmp_path):
    """Each trace of the Transform layer prunes the transform graph again (seconds on a wide
    dataset). Both serving signatures hand it raw features of one spec, so the export traces
    it once, and the parity batch reuses that trace; it answers as the layer does."""
    spec = transformed_data.spec
    tft_output = _tft(transformed_data)
    config = TrainerConfig.create(hidden_units=(128,))
    to_model_inputs = export.export_serving_model(
        _model(transformed_data, config), config, spec, tft_output, str(tmp_path / "serving"),
        (0.0, 1.0))
    assert to_model_inputs.experimental_get_tracing_count() == 1
    serving = transformed_data.rows.serialized(list(transformed_data.eval_csv_rows[:7]),
                                               serving=True)
    parsed = tf.io.parse_example(serving, export.serving_raw_feature_spec(tft_output, spec))
    inputs = to_model_inputs(parsed)
    assert to_model_inputs.experimental_get_tracing_count() == 1
    expected = model_inputs(tft_output.transform_features_layer()(parsed), spec)
    for name, value in expected.items():
        np.testing.assert_array_equal(inputs[name].numpy(), value.numpy())


def test_export_serves_raw_examples_in_float32(task_data, tmp_path):
    spec = task_data.spec
    scale = (12.5, 10.0) if spec.task == "regression" else (0.0, 1.0)
    model = _model(task_data, TrainerConfig.create(hidden_units=(128,)), scale)
    loaded = _export(task_data, model, tmp_path, scale)
    assert set(loaded.signatures) == {keys.SERVING_SIGNATURE, keys.FEATURES_SIGNATURE,
                                      keys.TRANSFORM_SIGNATURE}
    rows = list(task_data.eval_csv_rows[:5])
    serving = task_data.rows.serialized(rows, serving=True)
    out = loaded.signatures[keys.SERVING_SIGNATURE](examples=tf.constant(serving))
    assert set(out) == set(OUTPUTS[spec.task])
    for name, (dtype, width) in OUTPUTS[spec.task].items():
        assert out[name].dtype == dtype and out[name].shape == (5, width or spec.num_classes)
    if spec.task == "multiclass":
        assert [c.decode() for c in out["classes"].numpy()[0]] == list(spec.classes)
        np.testing.assert_allclose(out["scores"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    # Same weights, same answer as the in-memory model on the same transformed rows.
    parsed = tf.io.parse_example(serving, export.serving_raw_feature_spec(_tft(task_data), spec))
    expected = model(model_inputs(_tft(task_data).transform_features_layer()(parsed), spec))
    got = out[spec.task_info.prediction_key]
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    with_label = task_data.rows.serialized(rows)
    transformed = loaded.signatures[keys.TRANSFORM_SIGNATURE](examples=tf.constant(with_label))
    labels = [task_data.rows.label(r) for r in rows]
    np.testing.assert_allclose(transformed[spec.label_key].numpy(), labels, rtol=1e-6)
    # Only the label (and its weight): the Evaluator carries these per example.
    assert set(transformed) == set(spec.label_outputs)


def test_serving_requests_never_carry_the_label_or_its_sources(task_data):
    raw = export.serving_raw_feature_spec(_tft(task_data), task_data.spec)
    assert not set(task_data.spec.label_sources) & set(raw)
    assert {f.column for f in task_data.spec.features if f.role != "ignore"} <= set(raw)


def test_export_is_float32_after_mixed_precision_training(task_data, tmp_path):
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = _model(task_data, TrainerConfig.create(hidden_units=(128,)))
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    assert model.get_layer("hidden_0").compute_dtype == "bfloat16"
    loaded = _export(task_data, model, tmp_path)
    serving = task_data.rows.serialized(task_data.eval_csv_rows[:3], serving=True)
    out = loaded.signatures[keys.SERVING_SIGNATURE](examples=tf.constant(serving))
    assert out[task_data.spec.task_info.prediction_key].dtype == tf.float32
    # No bfloat16 op or tensor anywhere in the serving graph (functions included).
    graph_def = loaded.signatures[keys.SERVING_SIGNATURE].graph.as_graph_def()
    assert "DT_BFLOAT16" not in str(graph_def)


def _feature_inputs(data) -> tuple[feature_signature.FeatureInput, ...]:
    return feature_signature.feature_inputs(
        export.serving_raw_feature_spec(_tft(data), data.spec))


def _columns(data, rows) -> dict[str, tf.Tensor]:
    """The rows as JSON instances, then as the signature's [batch] columns."""
    inputs = _feature_inputs(data)
    instances = [feature_signature.instance(r, inputs) for r in rows]
    return {i.name: tf.constant([x[i.name] for x in instances], tf.dtypes.as_dtype(i.dtype))
            for i in inputs}


def test_feature_signature_answers_like_serving_default_on_eval_rows(task_data, tmp_path):
    spec = task_data.spec
    scale = (12.5, 10.0) if spec.task == "regression" else (0.0, 1.0)
    loaded = _export(task_data, _model(task_data, TrainerConfig.create(hidden_units=(128,)),
                                       scale), tmp_path, scale)
    rows = list(task_data.eval_csv_rows)
    # Rows with empty cells are among them: optional features travel as NaN / "".
    optional = [i.name for i in _feature_inputs(task_data) if not i.required]
    assert optional and any(r[name] == "" for r in rows for name in optional)
    by_example = loaded.signatures[keys.SERVING_SIGNATURE](
        examples=tf.constant(task_data.rows.serialized(rows, serving=True)))
    by_features = loaded.signatures["serving_features"](**_columns(task_data, rows))
    assert set(by_features) == set(by_example) == set(spec.task_info.outputs)
    for name, expected in by_example.items():
        if expected.dtype == tf.string:
            assert (by_features[name].numpy() == expected.numpy()).all()
        else:
            np.testing.assert_allclose(by_features[name].numpy(), expected.numpy(),
                                       rtol=1e-6, atol=1e-7)


def test_feature_signature_inputs_follow_the_schema(transformed_data):
    inputs = {i.name: i for i in _feature_inputs(transformed_data)}
    assert set(inputs) == set(export.serving_raw_feature_spec(_tft(transformed_data),
                                                              transformed_data.spec))
    # taxi: fare is a required FLOAT, trip_start_hour a required INT, payment_type a required
    # STRING; trip_seconds (INT), pickup_latitude (FLOAT) and company (STRING) may be empty.
    assert (inputs["fare"].dtype, inputs["trip_start_hour"].dtype,
            inputs["payment_type"].dtype) == ("float32", "int64", "string")
    assert (inputs["trip_seconds"].dtype, inputs["pickup_latitude"].dtype,
            inputs["company"].dtype) == ("float64", "float32", "string")
    assert not any(inputs[n].required for n in ("trip_seconds", "pickup_latitude", "company"))


def test_feature_signature_refuses_a_missing_required_value(transformed_data, tmp_path):
    loaded = _export(transformed_data, _model(transformed_data,
                                              TrainerConfig.create(hidden_units=(128,))),
                     tmp_path)
    columns = _columns(transformed_data, transformed_data.eval_csv_rows[:2])
    columns["fare"] = tf.constant([1.0, float("nan")])
    with pytest.raises(tf.errors.InvalidArgumentError, match="fare is required"):
        loaded.signatures["serving_features"](**columns)


def test_instance_names_the_feature_and_the_bad_value(transformed_data):
    inputs = _feature_inputs(transformed_data)
    row = dict(transformed_data.eval_csv_rows[0])
    assert math.isnan(feature_signature.instance({**row, "trip_seconds": ""},
                                                 inputs)["trip_seconds"])
    with pytest.raises(ValueError, match="trip_start_hour: 'noon' is not a number"):
        feature_signature.instance({**row, "trip_start_hour": "noon"}, inputs)
    with pytest.raises(ValueError, match="payment_type: empty, but the schema requires"):
        feature_signature.instance({**row, "payment_type": ""}, inputs)
    with pytest.raises(ValueError, match="trip_start_day: '2.5' is not a whole number"):
        feature_signature.instance({**row, "trip_start_day": "2.5"}, inputs)
    # Missing markers are gaps in number columns (trainer_module/missing.py), words in text.
    for marker in (" ", "NA", "n/a", "NaN", "null", "None"):
        assert math.isnan(feature_signature.instance({**row, "trip_seconds": marker},
                                                     inputs)["trip_seconds"]), marker
    with pytest.raises(ValueError, match="fare: empty, but the schema requires"):
        feature_signature.instance({**row, "fare": "NA"}, inputs)
    assert feature_signature.instance({**row, "company": "None"}, inputs)["company"] == "None"


@pytest.mark.parametrize("features", [6, 17, 40, 228])
def test_category_pairs_keep_a_budget_linear_in_the_column_count(features):
    """k category features have k·(k−1)/2 pairs; the network keeps at most pairs_per_feature ×
    k of them (every pair up to 17 features), those with the fewest combinations, so the
    table's rows grow linearly with k."""
    from trainer_module.model import PairEmbedding

    per_feature = TrainerConfig().model.pairs_per_feature
    sizes = [3 + (7 * i) % 50 for i in range(features)]
    layer = PairEmbedding(sizes, 1009, 1, None, max_pairs=per_feature * features)
    every = features * (features - 1) // 2
    assert len(layer.blocks) == min(every, per_feature * features)
    assert sum(layer.blocks) <= per_feature * features * 1009
    if every > per_feature * features:  # the kept pairs combine fewer values than any dropped
        kept = {sizes[i] * sizes[j] for i, j in zip(layer.firsts, layer.seconds, strict=True)}
        products = sorted(sizes[i] * sizes[j] for i in range(features)
                          for j in range(i + 1, features))
        assert max(kept) <= products[per_feature * features]
    out = layer([tf.constant([0, 1]) for _ in sizes])
    assert out.shape == (2, len(layer.blocks))


def test_an_ensemble_trains_on_its_members_losses_and_answers_their_mean(task_data, tmp_path):
    """TabM-mini: k members share the MLP; the step minimises the mean of the members' own
    losses (more than the loss of their mean, which is what a plain head would train on), and
    the model, and its export, answer the mean of the members' predictions."""
    spec = task_data.spec
    scale = (12.5, 10.0) if spec.task == "regression" else (0.0, 1.0)
    config = TrainerConfig.create(hidden_units=(128,), ensemble_size=4, dropout=0.0)
    model = _model(task_data, config, scale)
    assert isinstance(model, Ensemble)
    batch = next(iter(tf.data.TFRecordDataset(task_data.train_files, "GZIP").batch(64)))
    transformed = tf.io.parse_example(batch, _tft(task_data).transformed_feature_spec())
    inputs, labels = model_inputs(transformed, spec), transformed[spec.label_key]
    per_member = model.members()(inputs).numpy()
    assert per_member.shape == (64, 4, spec.num_classes if spec.task == "multiclass" else 1)
    np.testing.assert_allclose(model(inputs).numpy(), per_member.mean(axis=1), rtol=1e-5,
                               atol=1e-6)
    assert np.ptp(per_member, axis=1).max() > 1e-3  # the members answer differently
    compile_model(model, spec, optimizer=tf_keras.optimizers.legacy.Adam(1e-3),
                  steps_per_execution=1, jit_compile=False, label_scale=scale)
    members_loss = np.mean([float(model.compute_loss(y=labels,
                                                     y_pred=tf.constant(per_member[:, i])))
                            for i in range(4)])
    mean_loss = float(model.compute_loss(y=labels, y_pred=tf.constant(per_member.mean(axis=1))))
    history = model.fit(inputs, labels, batch_size=64, epochs=1, verbose=0)
    assert history.history["loss"][0] == pytest.approx(members_loss, rel=1e-4)
    assert members_loss > mean_loss
    # The export answers as the trained ensemble does.
    _assert_export_answers_as(task_data, model, config, scale, tmp_path)


def _assert_export_answers_as(data, model, config, scale, tmp_path) -> None:
    """The export of `model`, rebuilt from `config`, answers 5 raw eval rows as `model` does."""
    spec = data.spec
    export_dir = str(tmp_path / "serving")
    export.export_serving_model(model, config, spec, _tft(data), export_dir, scale)
    serving = data.rows.serialized(list(data.eval_csv_rows[:5]), serving=True)
    out = tf.saved_model.load(export_dir).signatures[keys.SERVING_SIGNATURE](
        examples=tf.constant(serving))
    parsed = tf.io.parse_example(serving, export.serving_raw_feature_spec(_tft(data), spec))
    expected = model(model_inputs(_tft(data).transform_features_layer()(parsed), spec))
    np.testing.assert_allclose(out[spec.task_info.prediction_key].numpy(), expected.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_fold_networks_answer_their_mean_and_export_it(task_data, tmp_path):
    """validation_folds: networks trained on different folds (here: started from different
    seeds, with and without members) answer as one model, the mean of their answers, and the
    export rebuilt from the config answers the same."""
    spec = task_data.spec
    scale = (12.5, 10.0) if spec.task == "regression" else (0.0, 1.0)
    config = TrainerConfig.create(hidden_units=(128,), ensemble_size=2, validation_folds=3)
    networks = []
    for seed in range(3):
        tf_keras.utils.set_random_seed(seed)
        networks.append(_model(task_data, config, scale))
    folded = fold_mean(networks)
    batch = next(iter(tf.data.TFRecordDataset(task_data.train_files, "GZIP").batch(64)))
    inputs = model_inputs(tf.io.parse_example(batch, _tft(task_data).transformed_feature_spec()),
                          spec)
    answers = np.stack([network(inputs).numpy() for network in networks])
    assert np.ptp(answers, axis=0).max() > 1e-3  # the networks answer differently
    np.testing.assert_allclose(folded(inputs).numpy(), answers.mean(axis=0), rtol=1e-5,
                               atol=1e-6)
    _assert_export_answers_as(task_data, folded, config, scale, tmp_path)


def test_the_means_answer_in_float32_under_mixed_bfloat16(task_data):
    """Trained in bfloat16 (a TPU's precision), an ensemble's answer and a fold mean's are
    the float32 mean of their members' float32 answers: a mean rounded to bfloat16 is off by
    up to 0.125 at a label near 42, which the validation loss and the export parity gate
    would see."""
    spec = task_data.spec
    scale = (42.0, 7.0) if spec.task == "regression" else (0.0, 1.0)
    config = TrainerConfig.create(hidden_units=(128,), ensemble_size=4, wide=True,
                                  validation_folds=2)
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        networks = [_model(task_data, config, scale) for _ in range(2)]
        folded = fold_mean(networks)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    assert networks[0].get_layer("hidden_0").compute_dtype == "bfloat16"
    assert networks[0].get_layer(WIDE_PER_MEMBER_LAYER).output.dtype == tf.float32
    batch = next(iter(tf.data.TFRecordDataset(task_data.train_files, "GZIP").batch(64)))
    inputs = model_inputs(tf.io.parse_example(batch, _tft(task_data).transformed_feature_spec()),
                          spec)
    per_member = [network.members()(inputs) for network in networks]
    assert all(answers.dtype == tf.float32 for answers in per_member)
    means = [network(inputs) for network in networks]
    assert all(mean.dtype == tf.float32 for mean in means)
    for mean, answers in zip(means, per_member, strict=True):
        np.testing.assert_allclose(mean.numpy(), answers.numpy().mean(axis=1), rtol=1e-6)
    answer = folded(inputs)
    assert answer.dtype == tf.float32
    np.testing.assert_allclose(answer.numpy(), np.mean([m.numpy() for m in means], axis=0),
                               rtol=1e-6)


def test_packed_members_train_hidden_layers_of_their_own(transformed_data, tmp_path):
    """TabM-packed: each member's hidden layers are its own, started as one MLP's would be
    (not k times smaller), penalised by l2 / k; the export answers as the trained members'
    mean does."""
    config = TrainerConfig.create(hidden_units=(64, 32), ensemble_size=4,
                                  ensemble_kind="packed", dropout=0.0, l2=0.001)
    model = _model(transformed_data, config)
    assert isinstance(model, Ensemble)
    first = model.get_layer("hidden_0")
    kernel = first.kernel.numpy()
    width = kernel.shape[1]
    assert kernel.shape == (4, width, 64) and model.get_layer("hidden_1").kernel.shape == (
        4, 64, 32)
    # Each member starts from its own draw, at a single 64-unit layer's Glorot scale.
    limit = (6.0 / (width + 64)) ** 0.5
    assert abs(kernel.std() - limit / np.sqrt(3)) < 0.1 * limit / np.sqrt(3)
    assert not np.allclose(kernel[0], kernel[1])
    np.testing.assert_allclose(float(first.losses[0]),
                               0.001 / 4 * float(np.sum(kernel ** 2)), rtol=1e-5)
    # Its config rebuilds the layer with the same start and penalty.
    rebuilt = type(first).from_config(first.get_config())
    rebuilt.build(first.input_shape)
    assert rebuilt.get_config() == first.get_config()
    assert abs(rebuilt.kernel.numpy().std() - limit / np.sqrt(3)) < 0.1 * limit / np.sqrt(3)
    rebuilt.kernel.assign(kernel)
    np.testing.assert_allclose(float(rebuilt.losses[0]), float(first.losses[0]), rtol=1e-6)
    batch = next(iter(tf.data.TFRecordDataset(transformed_data.train_files, "GZIP").batch(64)))
    transformed = tf.io.parse_example(batch, _tft(transformed_data).transformed_feature_spec())
    inputs = model_inputs(transformed, transformed_data.spec)
    per_member = model.members()(inputs).numpy()
    assert np.ptp(per_member, axis=1).max() > 1e-3  # the members answer differently
    compile_model(model, transformed_data.spec, optimizer=tf_keras.optimizers.legacy.Adam(1e-3),
                  steps_per_execution=1, jit_compile=False)
    model.fit(inputs, transformed[transformed_data.spec.label_key], batch_size=64, epochs=1,
              verbose=0)
    export_dir = str(tmp_path / "serving")
    export.export_serving_model(model, config, transformed_data.spec, _tft(transformed_data),
                                export_dir, (0.0, 1.0))
    serving = transformed_data.rows.serialized(list(transformed_data.eval_csv_rows[:8]),
                                               serving=True)
    out = tf.saved_model.load(export_dir).signatures[keys.SERVING_SIGNATURE](
        examples=tf.constant(serving))
    parsed = tf.io.parse_example(serving, export.serving_raw_feature_spec(
        _tft(transformed_data), transformed_data.spec))
    expected = model(model_inputs(_tft(transformed_data).transform_features_layer()(parsed),
                                  transformed_data.spec))
    np.testing.assert_allclose(out["probabilities"].numpy(), expected.numpy(), rtol=1e-5,
                               atol=1e-6)


def test_an_ensemble_trains_on_columns_whose_names_keras_cannot_take_as_they_are():
    """A column such as 'Payment Type' reaches Keras under its TensorFlow-safe name
    ('Payment_Type_…'); the members' model, which the ensemble's step trains, takes the inputs
    as the model does, keyed by the column-derived names."""
    values = TAXI.spec.to_dict()
    values["features"] = {"Payment Type" if column == "payment_type" else column: roles
                          for column, roles in values["features"].items()}
    values["evaluation"]["slices"] = []
    spec = from_dict(values, "spec.toml", "taxi")
    sizes = {out.name: 11 for out in spec.model_outputs() if out.kind == CATEGORY}
    model = build_model(TrainerConfig.create(hidden_units=(8,), ensemble_size=2), spec, sizes)
    assert "Payment Type_xf" in model.input
    inputs = {name: tf.zeros([4, *tensor.shape[1:]], tensor.dtype)
              for name, tensor in model.input.items()}
    assert model.members()(inputs).shape == (4, 2, 1)
    compile_model(model, spec, optimizer=tf_keras.optimizers.legacy.Adam(1e-3),
                  steps_per_execution=1, jit_compile=False)
    history = model.fit(inputs, tf.zeros([4, 1]), batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_label_smoothing_moves_the_loss_labels_toward_the_uniform_answer(task_data):
    """With label_smoothing s the loss's target is 1 - s on the true class plus s / classes
    on each (binary: on the positive's probability), on the compiled model's own loss. The
    predictions are drawn away from the uniform answer, near which smoothing barely moves the
    loss."""
    spec = task_data.spec
    if spec.task == "regression":
        with pytest.raises(ValueError, match="label_smoothing=0.1: a regression label has no"):
            spec.task_info.loss(spec.regression_loss, (0.0, 1.0), 0.1)
        return
    model = _model(task_data, TrainerConfig.create(l2=0.0))
    batch = next(iter(tf.data.TFRecordDataset(task_data.train_files, "GZIP").batch(64)))
    transformed = tf.io.parse_example(batch, _tft(task_data).transformed_feature_spec())
    labels = transformed[spec.label_key]
    y = labels.numpy().reshape(-1).astype(int)
    rng = np.random.default_rng(0)
    predicted = (rng.uniform(0.05, 0.95, (len(y), 1)) if spec.task == "binary"
                 else rng.dirichlet(np.full(spec.num_classes, 0.5), len(y)))
    if spec.task == "binary":
        target = y * 0.9 + 0.05
        p = np.clip(predicted[:, 0], 1e-7, 1 - 1e-7)
        expected = np.mean(-(target * np.log(p) + (1 - target) * np.log(1 - p)))
    else:
        target = np.eye(spec.num_classes)[y] * 0.9 + 0.1 / spec.num_classes
        expected = np.mean(-(target * np.log(np.clip(predicted, 1e-7, 1.0))).sum(axis=1))
    losses = {}
    for smoothing in (0.0, 0.1):
        compile_model(model, spec, optimizer=tf_keras.optimizers.legacy.Adam(1e-3),
                      steps_per_execution=1, jit_compile=False, label_smoothing=smoothing)
        losses[smoothing] = float(model.compute_loss(y=labels, y_pred=tf.constant(predicted)))
    assert losses[0.1] == pytest.approx(expected, rel=1e-4)
    assert abs(losses[0.1] - losses[0.0]) > 1e-3


@pytest.mark.parametrize("members", [1, 4])
def test_the_wide_part_adds_a_value_per_category_id_to_the_logits(task_data, members, tmp_path):
    """ModelConfig.wide: each single-id category's own learned value per output, summed and
    added to the head's logits (to the scaled target for regression) before the activation;
    the table starts at 0, so an untrained wide part changes nothing. With the deep part's
    head silenced, the model answers the wide part's sum alone, in every member."""
    spec = task_data.spec
    scale = (12.5, 10.0) if spec.task == "regression" else (0.0, 1.0)
    config = TrainerConfig.create(hidden_units=(128,), ensemble_size=members, wide=True,
                                  dropout=0.0)
    model = _model(task_data, config, scale)
    sizes = category_sizes(spec, _tft(task_data))
    singles = [o.name for o in spec.model_outputs() if o.kind == CATEGORY and not o.group]
    units = spec.num_classes if spec.task == "multiclass" else 1
    wide = model.get_layer(WIDE_LAYER)
    (table,) = wide.get_weights()
    assert singles and table.shape == (sum(sizes[name] for name in singles), units)
    assert not table.any()
    head = model.get_layer("head")
    head.set_weights([np.zeros_like(w) for w in head.get_weights()])
    table = np.random.default_rng(0).normal(size=table.shape).astype(np.float32)
    wide.set_weights([table])
    batch = next(iter(tf.data.TFRecordDataset(task_data.train_files, "GZIP").batch(8)))
    inputs = model_inputs(tf.io.parse_example(batch, _tft(task_data).transformed_feature_spec()),
                          spec)
    offsets = np.cumsum([0] + [sizes[name] for name in singles])[:-1]
    logits = WIDE_STEP * sum(table[offset + inputs[name].numpy()]
                             for offset, name in zip(offsets, singles, strict=True))
    expected = {"binary": lambda z: 1 / (1 + np.exp(-z)),
                "multiclass": lambda z: np.exp(z) / np.exp(z).sum(axis=1, keepdims=True),
                "regression": lambda z: scale[0] + scale[1] * z}[spec.task](logits)
    np.testing.assert_allclose(model(inputs).numpy(), expected, rtol=1e-5, atol=1e-6)
    _assert_export_answers_as(task_data, model, config, scale, tmp_path)
