"""The Keras model, generated from the dataset spec: an embedding per category id and per pair
of category ids, the float features as they are, an MLP on top, and the task's head.

Built with Keras 2 (`tf_keras`), which TFX 1.16 exports as a TF SavedModel. Inputs are
Transform's packed vector of every float feature, as it comes ([batch, n] float32), and each
category id on its own ([batch] int32, for its embedding); the model's contract with the input
pipeline and the serving signature is `model_inputs`.
"""

import itertools
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from trainer_module.config import TrainerConfig
from trainer_module.dataset_spec import DatasetSpec
from trainer_module.features import CATEGORY, FLOAT, PACKED_NAMES
from trainer_module.tf_names import tf_name

# The layer of hashed category pairs: its table's size follows the vocabularies' sizes.
PAIRS_LAYER = "category_pairs_embedding"
# The layer of each category id's own term in the head's logits (ModelConfig.wide).
WIDE_LAYER = "wide_logits"
# The same terms once for every member of an ensemble, as its head adds them.
WIDE_PER_MEMBER_LAYER = "wide_per_member"
# The wide part answers this many times its table's weights. Adam steps each weight by about
# the learning rate whatever its gradient, so at 0.0005 a weight takes thousands of steps to
# reach a category's share of the logit (several units); scaled, a value moves ten times as
# far per step, as the Wide & Deep paper gives its wide part an optimizer of its own.
WIDE_STEP = 10.0

# A regression head's (mean, std) of the label; classification heads ignore it.
NO_SCALE = (0.0, 1.0)
# An ensemble's layer that averages its members' predictions (ModelConfig.ensemble_size).
MEMBER_MEAN_LAYER = "member_mean"
# The layer that averages the answers of the models trained on folds of the rows
# (TrainingConfig.validation_folds).
FOLD_MEAN_LAYER = "fold_mean"
# The package Keras files this module's serializable objects under, so that a layer's config
# names them and rebuilds them (`get_config`, `from_config`).
KERAS_PACKAGE = "trainer_module"


def model_inputs(transformed: dict[str, tf.Tensor], spec: DatasetSpec) -> dict[str, tf.Tensor]:
    """The model's inputs from Transform's packed vectors, with TPU-friendly dtypes: the float
    vector whole (float32), each category id unpacked to its own [batch] tensor (int32: XLA on
    TPU has no native int64).

    One input for all floats keeps the Keras graph small: a numeric column with quantile bins
    has 18 float outputs, and an input layer each made tracing, saving and loading the model
    slower by seconds.
    """
    inputs = {}
    for name, packed in spec.packed_inputs().items():
        if packed[0].kind != CATEGORY:
            inputs[name] = tf.cast(transformed[name], tf.float32)
            continue
        ids = tf.unstack(tf.cast(transformed[name], tf.int32), len(packed), axis=1)
        inputs.update(zip((out.name for out in packed), ids, strict=True))
    return inputs


def category_sizes(spec: DatasetSpec, tf_transform_output: tft.TFTransformOutput) -> dict[str, int]:
    """Number of ids of each categorical transformed feature (embedding table rows)."""
    sizes = {}
    for feature in spec.features:
        for out in feature.outputs():
            if out.kind == CATEGORY:
                sizes[out.name] = feature.kind.rows(
                    feature.column, feature.params, tf_transform_output.vocabulary_size_by_name)
    return sizes


def build_model(config: TrainerConfig, spec: DatasetSpec, sizes: dict[str, int],
                label_scale: tuple[float, float] = NO_SCALE) -> tf_keras.Model:
    """Builds (uncompiled) the spec's model under the current dtype policy."""
    settings = config.model
    regularizer = tf_keras.regularizers.L2(settings.l2) if settings.l2 else None
    inputs = {}
    parts = []
    groups: dict[str, list] = {}
    for out in spec.model_outputs():
        if out.kind != CATEGORY:
            continue
        inputs[out.name] = tf_keras.Input(shape=(), dtype=tf.int32, name=tf_name(out.name))
        if out.group:
            groups.setdefault(out.group, []).append((out, inputs[out.name]))
        else:
            parts.append(tf_keras.layers.Embedding(
                sizes[out.name], settings.embedding_dim, name=f"{tf_name(out.name)}_embedding",
                embeddings_regularizer=regularizer)(inputs[out.name]))
    singles = [out.name for out in spec.model_outputs() if out.kind == CATEGORY and not out.group]
    if settings.cross_buckets and len(singles) > 1:
        pairs = PairEmbedding([sizes[name] for name in singles], settings.cross_buckets,
                              settings.cross_dim, regularizer,
                              max_pairs=settings.pairs_per_feature * len(singles),
                              name=PAIRS_LAYER)([inputs[name] for name in singles])
        # Pairs can memorise combinations seen only a few times: the hidden layers' dropout
        # applies to them too.
        if settings.dropout:
            pairs = tf_keras.layers.Dropout(settings.dropout, name="category_pairs_dropout")(pairs)
        parts.append(pairs)
    dims = {f.column: f.params.get("dim", settings.embedding_dim) for f in spec.features}
    for group, members in groups.items():
        parts.append(TokenMean(sizes[members[0][0].name], dims[group], regularizer,
                               name=f"{tf_name(group)}_embedding")([m[1] for m in members]))
    floats = [out.name for out in spec.model_outputs() if out.kind != CATEGORY]
    if floats:
        values = PACKED_NAMES[FLOAT]
        inputs[values] = tf_keras.Input(shape=(len(floats),), dtype=tf.float32,
                                        name=tf_name(values))
        # The packed vector is in name order; the first layer's rows are in the spec's.
        packed = [out.name for out in spec.packed_inputs()[values]]
        order = [packed.index(name) for name in floats]
        parts.insert(0, inputs[values] if order == list(range(len(order)))
                     else tf.gather(inputs[values], order, axis=1))
    x = tf_keras.layers.Concatenate(name="all_features")(parts) if len(parts) > 1 else parts[0]
    members = settings.ensemble_size
    packed = members > 1 and settings.ensemble_kind == "packed"
    if packed:
        x = MemberCopies(members, name="member_copies")(x)
    elif members > 1:
        x = MemberScales(members, name="member_scales")(x)
    for i, width in enumerate(settings.hidden_units):
        if packed:
            x = MemberDense(width, "relu", initializer=MemberGlorotUniform(),
                            regularizer=tf_keras.regularizers.L2(settings.l2 / members)
                            if settings.l2 else None, name=f"hidden_{i}")(x)
        else:
            x = tf_keras.layers.Dense(width, activation="relu", name=f"hidden_{i}",
                                      kernel_regularizer=regularizer)(x)
        if settings.dropout:
            x = tf_keras.layers.Dropout(settings.dropout, name=f"dropout_{i}")(x)
    name = spec.name or spec.task
    wide = None
    if settings.wide and singles:
        units = spec.num_classes
        wide = WideLogits([sizes[single] for single in singles], units,
                          name=WIDE_LAYER)([inputs[single] for single in singles])
        if members > 1:
            # One term for every member: [batch, units] → [batch, 1, units].
            wide = tf_keras.layers.Reshape((1, units), dtype="float32",
                                           name=WIDE_PER_MEMBER_LAYER)(wide)
    if members == 1:
        output = spec.task_info.head(spec.num_classes, label_scale, wide=wide)(x)
        return tf_keras.Model(inputs=inputs, outputs=output, name=name)
    per_member = spec.task_info.head(spec.num_classes, label_scale, MemberDense, wide)(x)
    output = MemberMean(dtype="float32", name=MEMBER_MEAN_LAYER)(per_member)
    return Ensemble(inputs=inputs, outputs=output, name=name)


def fold_mean(networks: list[tf_keras.Model]) -> tf_keras.Model:
    """One model that answers the mean of the networks' answers (each trained holding out
    another fold of the rows), on the inputs they share. Each network keeps its own layers,
    under the name fold_<i>, so the same list of networks always lists its weights alike."""
    first = networks[0].input
    inputs = {key: tf_keras.Input(type_spec=tensor.type_spec, name=tensor.name)
              for key, tensor in first.items()}
    answers = [tf_keras.Model(network.input, network.output, name=f"fold_{i}")(inputs)
               for i, network in enumerate(networks)]
    return tf_keras.Model(
        inputs, tf_keras.layers.Average(dtype="float32", name=FOLD_MEAN_LAYER)(answers),
        name=networks[0].name)


def build_export(config: TrainerConfig, spec: DatasetSpec, sizes: dict[str, int],
                 label_scale: tuple[float, float] = NO_SCALE) -> tf_keras.Model:
    """The model a run exports, built as `build_model` builds each network: one network, or
    the `fold_mean` of config.training.validation_folds of them."""
    folds = config.training.validation_folds
    if folds == 1:
        return build_model(config, spec, sizes, label_scale)
    return fold_mean([build_model(config, spec, sizes, label_scale) for _ in range(folds)])


class MemberScales(tf_keras.layers.Layer):
    """[batch, d] → [batch, k, d]: the features once per member, each scaled by that
    member's learned vector (started at random signs, so the members differ from the first
    step, as TabM-mini starts them)."""

    def __init__(self, members: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.members = members

    def build(self, input_shape: tf.TensorShape) -> None:
        self.scales = self.add_weight(
            name="scales", shape=(self.members, input_shape[-1]),
            initializer=lambda shape, dtype=None: tf.sign(
                tf_keras.initializers.RandomUniform(-1.0, 1.0)(shape, dtype)))
        super().build(input_shape)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return x[:, tf.newaxis, :] * tf.cast(self.scales, self.compute_dtype)

    def get_config(self) -> dict:
        return {**super().get_config(), "members": self.members}


class MemberCopies(tf_keras.layers.Layer):
    """[batch, d] → [batch, k, d]: the features once per member, unchanged (TabM-packed's
    members differ by their own weights)."""

    def __init__(self, members: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.members = members

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return tf.repeat(x[:, tf.newaxis, :], self.members, axis=1)

    def get_config(self) -> dict:
        return {**super().get_config(), "members": self.members}


@tf_keras.utils.register_keras_serializable(package=KERAS_PACKAGE)
class MemberGlorotUniform(tf_keras.initializers.Initializer):
    """Glorot's uniform start for a [k, width, units] kernel, as each member's own
    [width, units] layer would have it (Keras' glorot_uniform would count the k members into
    the fans and start every member √k times smaller)."""

    def __call__(self, shape: tuple[int, int, int], dtype: tf.DType | None = None,
                 **kwargs) -> tf.Tensor:
        limit = (6.0 / (shape[-2] + shape[-1])) ** 0.5
        return tf_keras.initializers.RandomUniform(-limit, limit)(shape, dtype)


class MemberDense(tf_keras.layers.Layer):
    """[batch, k, width] → [batch, k, units]: a dense layer of each member's own (the
    members' heads, and TabM-packed's hidden layers), all k as one batched matmul."""

    def __init__(self, units: int, activation: str | None = None,
                 initializer: Any = "glorot_uniform", regularizer: Any = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.units, self.activation = units, tf_keras.activations.get(activation)
        self.initializer = tf_keras.initializers.get(initializer)
        self.regularizer = tf_keras.regularizers.get(regularizer)

    def build(self, input_shape: tf.TensorShape) -> None:
        members, width = input_shape[-2], input_shape[-1]
        self.kernel = self.add_weight(name="kernel", shape=(members, width, self.units),
                                      initializer=self.initializer,
                                      regularizer=self.regularizer)
        self.bias = self.add_weight(name="bias", shape=(members, self.units),
                                    initializer="zeros")
        super().build(input_shape)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        y = tf.einsum("bkw,kwu->bku", x, tf.cast(self.kernel, self.compute_dtype))
        return self.activation(y + tf.cast(self.bias, self.compute_dtype))

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units,
                "activation": tf_keras.activations.serialize(self.activation),
                "initializer": tf_keras.initializers.serialize(self.initializer),
                "regularizer": tf_keras.regularizers.serialize(self.regularizer)}


class MemberMean(tf_keras.layers.Layer):
    """[batch, k, n] → [batch, n]: the ensemble's answer, the mean of its members'. Built
    float32, as the head is: under mixed_bfloat16 a layer of the policy would round the
    members' float32 answers to bfloat16 first (a step of 0.25 at a label of 42), and the
    validation loss, early stopping and the export parity gate would all see the rounding."""

    def call(self, per_member: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(per_member, axis=1)


class Ensemble(tf_keras.Model):
    """A model whose answer is the mean of k members' (`MemberMean`), trained on the mean of
    the members' losses: each member learns to predict the label on its own, which is what
    makes their mean better than one of them (TabM). Evaluation, validation, early stopping
    and serving all see the mean."""

    def train_step(self, data: tuple) -> dict[str, tf.Tensor]:
        x, y, sample_weight = tf_keras.utils.unpack_x_y_sample_weight(data)
        members = self.members()
        with tf.GradientTape() as tape:
            per_member = members(x, training=True)  # [batch, k, n]
            k, n = per_member.shape[1], per_member.shape[2]
            # Each member's prediction beside its own copy of the row's label and weight.
            loss = self.compute_loss(
                x, tf.repeat(y, k, axis=0), tf.reshape(per_member, [-1, n]),
                None if sample_weight is None else tf.repeat(sample_weight, k, axis=0))
        self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
        return self.compute_metrics(x, y, tf.reduce_mean(per_member, axis=1), sample_weight)

    def members(self) -> tf_keras.Model:
        """The members' predictions ([batch, k, n]) as a model of the same layers."""
        if "_members" not in self.__dict__:
            # Set past Keras' tracking: the layers are this model's own, and a second owner
            # would put them twice in what is saved. `self.input` is the inputs' dict, keyed
            # as the model is called; `self.inputs` would key them by their Keras names, which
            # differ for a column that is not a plain name (tf_names.tf_name).
            object.__setattr__(self, "_members", tf_keras.Model(
                self.input, self.get_layer(MEMBER_MEAN_LAYER).input))
        return self.__dict__["_members"]


class TokenMean(tf_keras.layers.Layer):
    """One embedding table for a group of id inputs (a text's token positions): the mean of
    their vectors over the ids that are not 0 (padding); zeros where all are padding."""

    def __init__(self, rows: int, dim: int, regularizer: tf_keras.regularizers.Regularizer | None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows, self.dim = rows, dim
        self.regularizer = tf_keras.regularizers.get(regularizer)

    def build(self, input_shape: list) -> None:
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.rows, self.dim),
            initializer=tf_keras.initializers.RandomUniform(-0.05, 0.05),
            regularizer=self.regularizer)
        super().build(input_shape)

    def call(self, ids: list[tf.Tensor]) -> tf.Tensor:
        stacked = tf.stack(ids, axis=1)
        vectors = tf.cast(tf.gather(self.embeddings, stacked), self.compute_dtype)
        mask = tf.cast(tf.not_equal(stacked, 0), self.compute_dtype)[..., tf.newaxis]
        total = tf.reduce_sum(vectors * mask, axis=1)
        return total / tf.maximum(tf.reduce_sum(mask, axis=1), tf.cast(1.0, self.compute_dtype))

    def get_config(self) -> dict:
        return {**super().get_config(), "rows": self.rows, "dim": self.dim,
                "regularizer": tf_keras.regularizers.serialize(self.regularizer)}


class WideLogits(tf_keras.layers.Layer):
    """[batch] ids of each of n category inputs → [batch, units]: the sum of one learned
    value per id and output, as the wide part of Wide & Deep (Cheng et al., 2016) adds them
    to the logits. All inputs share one table ([Σ sizes, units], each input its own block),
    started at 0 so the model starts as the deep part alone; float32, as the head is. No L2
    penalty: it would pull each id's value toward 0, away from the label's mean for that id,
    which is what the table is for."""

    def __init__(self, sizes: list[int], units: int, **kwargs) -> None:
        super().__init__(dtype="float32", **kwargs)
        self.sizes, self.units = sizes, units
        self.offsets = list(itertools.accumulate(sizes, initial=0))[:-1]

    def build(self, input_shape: list) -> None:
        self.table = self.add_weight(name="table", shape=(sum(self.sizes), self.units),
                                     initializer="zeros")
        super().build(input_shape)

    def call(self, ids: list[tf.Tensor]) -> tf.Tensor:
        rows = tf.stack(ids, axis=1) + tf.constant(self.offsets, tf.int32)
        return WIDE_STEP * tf.reduce_sum(tf.gather(self.table, rows), axis=1)

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("dtype", None)
        return {**config, "sizes": self.sizes, "units": self.units}


class PairEmbedding(tf_keras.layers.Layer):
    """An embedding of every pair of id inputs, all in one table: ids a and b of inputs with
    sa and sb rows combine into a·sb + b, folded by modulo into the pair's own block of
    min(sa·sb, buckets) rows. The output is the pairs' vectors side by side
    ([batch, pairs · dim]).

    One table, and each step's arithmetic done on all pairs at once ([batch, pairs] tensors):
    ops per pair would cost every step an op for each of the k·(k−1)/2 pairs.
    At most `max_pairs` pairs (`pairs_per_feature`): those with the fewest combinations, which
    keeps the table linear in the number of features (228 category columns have 25,878 pairs).
    """

    def __init__(self, sizes: list[int], buckets: int, dim: int,
                 regularizer: tf_keras.regularizers.Regularizer | None,
                 max_pairs: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sizes, self.buckets, self.dim = sizes, buckets, dim
        self.regularizer = tf_keras.regularizers.get(regularizer)
        self.max_pairs = max_pairs
        self.firsts, self.seconds = (list(ids) for ids in zip(
            *chosen_pairs(sizes, max_pairs), strict=True))
        self.blocks = [min(sizes[i] * sizes[j], buckets)
                       for i, j in zip(self.firsts, self.seconds, strict=True)]
        # sb mod rows per pair, and where each pair's block starts in the table.
        self.second_sizes = [sizes[j] % rows for j, rows in zip(self.seconds, self.blocks,
                                                                strict=True)]
        self.offsets = list(itertools.accumulate(self.blocks, initial=0))[:-1]

    def build(self, input_shape: list) -> None:
        self.embeddings = self.add_weight(
            name="embeddings", shape=(sum(self.blocks), self.dim),
            initializer=tf_keras.initializers.RandomUniform(-0.05, 0.05),
            regularizer=self.regularizer)
        super().build(input_shape)

    def call(self, ids: list[tf.Tensor]) -> tf.Tensor:
        stacked = tf.stack(ids, axis=1)
        rows = tf.constant(self.blocks, tf.int32)
        # (a·sb + b) mod rows with every product below rows² < 2³¹: int32 throughout. A pair
        # with at most `buckets` combinations is exact (a·sb + b < rows).
        a = tf.gather(stacked, self.firsts, axis=1) % rows
        b = tf.gather(stacked, self.seconds, axis=1) % rows
        second_sizes = tf.constant(self.second_sizes, tf.int32)
        offsets = tf.constant(self.offsets, tf.int32)
        vectors = tf.gather(self.embeddings, (a * second_sizes % rows + b) % rows + offsets)
        return tf.cast(tf.reshape(vectors, [-1, len(self.blocks) * self.dim]),
                       self.compute_dtype)

    def get_config(self) -> dict:
        return {**super().get_config(), "sizes": self.sizes, "buckets": self.buckets,
                "dim": self.dim, "max_pairs": self.max_pairs,
                "regularizer": tf_keras.regularizers.serialize(self.regularizer)}


def chosen_pairs(sizes: list[int], max_pairs: int | None) -> list[tuple[int, int]]:
    """Every pair (i, j), i < j, of the features with `sizes` ids, or the `max_pairs` of them
    with the fewest combinations (ties in order), kept in order."""
    pairs = list(itertools.combinations(range(len(sizes)), 2))
    if max_pairs is None or len(pairs) <= max_pairs:
        return pairs
    kept = sorted(range(len(pairs)), key=lambda p: (sizes[pairs[p][0]] * sizes[pairs[p][1]], p))
    return [pairs[p] for p in sorted(kept[:max_pairs])]


def compile_model(model: tf_keras.Model, spec: DatasetSpec, *,
                  optimizer: tf_keras.optimizers.Optimizer, steps_per_execution: int,
                  jit_compile: bool, label_scale: tuple[float, float] = NO_SCALE,
                  label_smoothing: float = 0.0) -> None:
    """Compiles with the task's loss (TrainingConfig.label_smoothing) and weighted metrics (the
    plan chooses the rest)."""
    task = spec.task_info
    model.compile(
        optimizer=optimizer,
        loss=task.loss(spec.regression_loss, label_scale, label_smoothing),
        # Weighted, so rows without a label (weight 0, missing_labels="drop") count nowhere;
        # with no weights they are the plain metrics.
        weighted_metrics=task.keras_metrics(),
        steps_per_execution=steps_per_execution,
        jit_compile=jit_compile,
    )
    keep_autograph_out_of_keras()


def keep_autograph_out_of_keras() -> None:
    """Lets AutoGraph call Keras 2 (`tf_keras`) as it is, as TensorFlow's own rules already do
    for `keras` and `tensorflow`.

    Keras' train, test and predict functions are written for graph mode: past the loop over
    steps_per_execution, which is still converted, nothing in them branches on a tensor. Yet
    AutoGraph's rules name the package `keras` only, so left to them it rewrites the source of
    every Keras function a step calls (the step, the cross-replica reduction, each metric's
    result) whenever a Trainer traces them. A function that did need converting would fail loudly at
    trace time, never silently.
    """
    from tensorflow.python.autograph.core import config, config_lib

    if not any(isinstance(rule, config_lib.DoNotConvert) and rule.matches(tf_keras.__name__)
               for rule in config.CONVERSION_RULES):
        config.CONVERSION_RULES = (config_lib.DoNotConvert(tf_keras.__name__),
                                   *config.CONVERSION_RULES)
