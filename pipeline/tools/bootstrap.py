"""`make dataset`: a first spec and schema for a folder of CSV files, written for review.

    python -m pipeline.tools.bootstrap --name NAME --data-dir DIR --label COLUMN --task TASK
        [--force]

TFDV infers the schema (types, fixed shapes, presence) from the data; one pass over the CSV
files measures each column (distinct values, missing cells, range, words per value), and each
column gets a role with the reason written beside it: dates and timestamps become datetime
features, free text becomes tokens, id-like columns are ignored, wide categories hashed, small
ones get a vocabulary, numbers a z-score and quantile bins (log first when the tail is long).
The thresholds start where guessing stops: the majority class's share for
classification, the label's spread (predicting the mean) for regression. Everything lands in
schemas/<name>/ for a person to read and edit before `make run DATASET=<name>`.
"""

import argparse
import csv
import dataclasses
import io
import itertools
import math
import os
import shutil
import sys
import tempfile
from typing import Any

from pipeline import console, csv_check, datasets
from pipeline.errors import ConfigError
from pipeline.pipeline_config import DEFAULT_OUTPUT_DIR
from pipeline.spans import changes, drift
from pipeline.spans import folders as spans
from trainer_module import dataset_spec, datetimes, keys, numbers, tasks, tf_names
from trainer_module.config import (
    MAX_CROSS_BUCKETS,
    MAX_VALIDATION_FRACTION,
    MIN_PATIENCE,
    MIN_VALIDATION_ROWS,
    PATIENCE_PER_BEST_EPOCH,
    REFIT_FIRST_FIT,
    REFIT_OWN,
    DataConfig,
    ModelConfig,
    TrainingConfig,
)
from trainer_module.features import NUMERIC_BINS, NUMERIC_TYPES
from trainer_module.missing import NO_EXTRA, folded, is_missing
from trainer_module.numbers import NumberFormat

# A column is id-like when nearly every present value is its own (and there are many), and it
# names rows rather than measures them: strings, or integers that are a run of consecutive
# numbers (row ids) or codes of one fixed width (account numbers). Other numbers, however
# many distinct values they take, are measurements.
# A column's drift threshold: this many times the distance two samples of the same data show
# (consecutive spans, or for a flat folder consecutive parts of its rows in file order),
# within [DRIFT_FLOOR, DRIFT_CAP]. TFDV's distances lie in [0, 1]; a partner sending fares in
# cents moves a number column to about 1.
DRIFT_MARGIN = 2.0
# From DRIFT_MANY_PAIRS pairs of consecutive samples on, their largest distance is already an
# extreme of many draws rather than one draw, and DRIFT_MARGIN_MANY times it leaves headroom
# enough. On the shipped taxi rows (15 parts of 1,000) fares move by at most 0.26 between
# neighbouring parts and by up to 0.34 between 900-row spans, while tripled fares move a
# 900-row span by 0.42 to 0.57: twice the largest ordinary move (0.51) would let tripled fares
# through, 1.5 times it (0.39) stops them.
DRIFT_MARGIN_MANY = 1.5
DRIFT_MANY_PAIRS = 5
DRIFT_FLOOR = 0.1
DRIFT_CAP = 0.8
# A flat folder's rows stand in for spans as consecutive parts in file order, about this many
# rows each, between 2 and FLAT_PARTS_MAX parts. An export is written in time order more often
# than not, so neighbouring parts differ as neighbouring days do; random halves of the rows
# would show only sampling noise, and thresholds measured on them stop ordinary days.
FLAT_PART_ROWS = 1000
FLAT_PARTS_MAX = 20
# A category column's tolerated share of values outside its schema domain (TFDV's
# distribution_constraints.min_domain_mass is 1 minus it): DRIFT_MARGIN times the largest share
# of new values a span (or a part of a flat folder's rows) brought, within [NEW_VALUES_FLOOR,
# NEW_VALUES_CAP]. New cab companies are a few percent of a day's rows; a renamed column's codes
# or a new encoding are most of them.
NEW_VALUES_FLOOR = 0.05
NEW_VALUES_CAP = 0.5
ID_LIKE_FRACTION = 0.9
ID_LIKE_MIN_DISTINCT = 50
CODE_MIN_DIGITS = 5
# Free text: several words per value on average, too many distinct values (or too rare) for a
# vocabulary. Its tokens: up to a power of two covering about twice the average word count.
TEXT_MIN_WORDS = 3
TEXT_MAX_TOKENS = 64
TEXT_BUCKETS = 10_000
# Dates and timestamps: a string column where this share of the distinct values parses.
DATETIME_MIN_SHARE = 0.99
# A timestamp (a time of day in some value) whose instants hold at least this many rows each
# on average also gives its exact value as an id: rows that share an instant are often one
# event recorded on several rows (one police call, several uses of force), and their labels
# agree. Its hash buckets: a power of two of at least this many per distinct instant (few
# collisions), at most INSTANT_BUCKETS_MAX.
INSTANT_MIN_ROWS = 2.0
INSTANT_BUCKETS_PER_VALUE = 8
INSTANT_BUCKETS_MAX = 65536
MOSTLY_EMPTY = 0.95
# Categories: up to this many distinct values, each seen this often on average, get a
# vocabulary; wider or rarer ones, hash buckets.
VOCABULARY_MAX = 1000
VOCABULARY_MIN_AVERAGE_COUNT = 5
HASH_BUCKETS_MAX = 4096
# Integer columns with this few distinct values within a short range are categories (hours,
# weekdays, months, years); more are counts or measurements.
INTEGER_CATEGORY_MAX = 32
INTEGER_RANGE_MAX = 1000
# An integer category with more values than two is also given to the model as a number, with
# these quantile bins: a count's order, which its ids do not carry (docs/dataset-spec.md).
INTEGER_NUMBER_BINS = NUMERIC_BINS
# The sized network reads that number view with one bin, the value's place in the column's
# range: its ids already give each value a weight of its own, which quantile steps over a few
# values repeated (a column of 3 values had 16 bins). TabM's shape does so for an integer of
# at most FEW_INTEGER_VALUES values, and keeps INTEGER_NUMBER_BINS on the others: with one bin
# on hpc-data's `iterations` (11 values) it fell below its target over three seeds, while
# deliveries' 27 counts of 3 to 5 values scored as well with one bin, for two thirds of the
# Trainer's time. docs/trainer-and-tpu.md ("An integer's number view: one bin") has the runs.
SIZED_INTEGER_BINS = 1
FEW_INTEGER_VALUES = 8
# Non-negative numbers this skewed have a long right tail: log them first.
LONG_TAIL_SKEW = 2.0
# The sized network (NETWORK_SIZES) reads the numbers (zscore, log_zscore) with NUMERIC_BINS
# quantile bins each while all their bins come to at most one per ROWS_PER_BIN training rows;
# past that, each number is its z-score alone (`bins = 0`): the bins were more inputs than the
# rows could train. Without them credit-data, credit-data-messy and lending-club (23 to 45
# training rows per bin) scored higher; stackoverflow (119) scored lower. An integer's number
# view is outside this budget (SIZED_INTEGER_BINS). TabM's published defaults keep the bins
# on every number: on hpc-data (45 rows per bin) they scored lower without them.
# docs/trainer-and-tpu.md ("Quantile bins within a budget") has the runs.
NUMBER_ROLES = ("zscore", "log_zscore")
ROWS_PER_BIN = 100
MAX_CLASSES = 1000
# The training budget `make dataset` writes: about this many steps, in whole epochs. At
# LEARNING_RATE early stopping kept an epoch well inside it on every dataset of the quality
# suite, and a run the slice does not stop stays within minutes on a CPU.
TRAIN_STEPS_TARGET = 5_000
MIN_EPOCHS, MAX_EPOCHS = 10, 200
# With a validation slice to stop on, at least this many steps, past MAX_EPOCHS where an epoch
# is a few steps: on small data 200 epochs can end while the loss is still falling. Early
# stopping ends such runs (at most TrainingConfig.early_stopping_patience epochs after the
# best: config.patience_after).
MIN_TRAIN_STEPS = 5_000
# A binary label below MANY_ROWS training rows (its BINARY_ENSEMBLE_SIZE members): about this
# many steps in place of TRAIN_STEPS_TARGET and MIN_TRAIN_STEPS. On all six such datasets of
# the quality suite the members' mean kept an epoch by about 1,250 steps of a 5,000-step budget;
# the cosine decay, which ends at the budget's last step, then lowers the rate while the kept
# epochs still train. docs/experiments/2026-12-05-a-shorter-budget-below-20000-rows.md has the
# runs.
BINARY_TRAIN_STEPS = 1_000
# Adam's rate (at the spec's batch) wherever a validation slice stops the fit: TabM's, four
# times the Trainer's default. On credit-data early stopping kept epoch 45 where the default
# kept epoch 232, at the same validation loss, for a quarter of the Trainer's time;
# docs/trainer-and-tpu.md ("Sizes that follow the data") has the runs.
LEARNING_RATE = 0.002
# With a validation slice, the cosine decay ends at this share of the peak rate
# (TrainingConfig.lr_floor), so the budget's last epochs still learn.
LR_FLOOR = 0.1
LARGE_DATA_ROWS, LARGE_BATCH = 200_000, 1024
# Below REFIT_ROWS training rows, the exported model is a refit on every training row for
# this many times the epochs early stopping kept (TrainingConfig.refit_factor): there the
# slice's rows are a real share of what there is to learn. From there on the refit would cost
# as much training again for a tenth more rows (on flights, 22,000 training rows, it was 42 of
# the Trainer's 120 s). docs/trainer-and-tpu.md ("Refit on every training row") has the runs.
REFIT_FACTOR = 1.1
REFIT_ROWS = 20_000
# Below LARGE_DATA_ROWS, early stopping waits at most this many epochs for a lower
# validation loss (TrainingConfig.early_stopping_patience); from there on, the Trainer's
# default. A small slice's loss is noisy and an epoch is cheap; docs/trainer-and-tpu.md
# ("Wider embeddings and a longer wait") has the runs. Under TabM's defaults too: with TabM's
# own 16, hpc-data fell below its target over three seeds (docs/trainer-and-tpu.md, "TabM's
# published defaults").
SMALL_DATA_PATIENCE = 30
# Below SMALL_DATA_ROWS training rows, the validation slice is this share of them
# (DataConfig.validation_fraction) instead of the Trainer's default. Its loss picks the kept
# epoch and the refit's length: a tenth of a few thousand rows is a few hundred, and one epoch's
# loss against another's is then much about which rows fell in the slice. The refit trains on
# the slice's rows again. docs/trainer-and-tpu.md ("A larger slice on small data") has the runs.
SMALL_DATA_ROWS = 5_000
SMALL_DATA_VALIDATION_FRACTION = 0.2
# The width of each category's embedding make dataset writes (the Trainer's default is
# narrower, for the shipped specs); docs/trainer-and-tpu.md ("Wider embeddings and a longer
# wait") has the runs.
EMBEDDING_DIM = 8
# A binary label's network below LARGE_DATA_ROWS training rows: this many members that share the
# MLP (ModelConfig.ensemble_size); docs/trainer-and-tpu.md ("An ensemble of members that share
# the MLP") has the runs.
BINARY_ENSEMBLE_SIZE = 8
# From MANY_ROWS training rows, a label that takes members (binary, or TabM's shape) takes
# FEW_MEMBERS of them: a CPU's step costs about as much per member, and this many rows leave
# the members' mean little noise to average away. With 2 in place of 8, flights' AUC rose
# (0.7541 ± 0.0004 over 3 seeds against 0.7330 ± 0.0323) and diamonds' and military's
# accuracy held, for a third to a half of the Trainer's time; docs/trainer-and-tpu.md
# ("Sizes that follow the data") has the runs.
MANY_ROWS = 20_000
FEW_MEMBERS = 2
# A regression label past TabM's rows (TABM_ROWS) and below LARGE_DATA_ROWS takes FEW_MEMBERS
# members on the sized network, and no refit. On hotel-rates (10,211 training rows) one MLP
# scored an RMSE of 14.4169 ± 1.2294 over three seeds in one suite run and 14.1440 ± 0.1539 in
# the next; 2 members without a refit scored 13.9298 ± 0.0493, the Trainer 88 ± 31 s against
# its 112. The members' validation loss falls for most of the budget, so a refit as long again
# took the Trainer past that limit (126 s).
# docs/experiments/2026-12-05-members-penalties-and-bins.md has the runs.


@dataclasses.dataclass(frozen=True)
class NetworkSize:
    """The network `make dataset` writes ([model]) for datasets of at least `rows` training
    rows, and why."""

    rows: int
    hidden_units: tuple[int, ...]
    dropout: float
    l2: float
    why: str


# From the fewest training rows up; a dataset takes the last size whose `rows` it reaches.
# Many rows regularise the weights themselves: they get lighter penalties. Wider or deeper
# layers did no better at any size the quality suite has (229 to 850,000 training rows), nor
# did other penalties below LARGE_DATA_ROWS. docs/trainer-and-tpu.md ("Sizes that follow the
# data") has the runs.
_DEFAULT_NETWORK = ModelConfig()
_DEFAULT_TRAINING = TrainingConfig()
NETWORK_SIZES = (
    NetworkSize(0, _DEFAULT_NETWORK.hidden_units, _DEFAULT_NETWORK.dropout, _DEFAULT_NETWORK.l2,
                "the default network"),
    NetworkSize(LARGE_DATA_ROWS, _DEFAULT_NETWORK.hidden_units, 0.1, 0.0001,
                "many rows: light penalties"),
)
# A label of a task in TABM_ROWS below that many training rows, with a validation slice to stop
# on, takes TabM's shape of network (Gorishniy et al., ICLR 2025) in place of NETWORK_SIZES:
# TABM_MEMBERS (by task) sharing three layers, dropout 0.1, no L2, and decoupled weight decay
# TABM_WEIGHT_DECAY. The paper's defaults (32 members, layers of 512) raised the accuracy of
# both multiclass datasets in the quality suite and lowered the RMSE of both regression
# datasets tried below 10,000 training rows, at about ten times a tree's fit on a CPU; a
# quarter of the members on half the width kept deliveries' RMSE below CatBoost's for a
# tenth of the time. docs/trainer-and-tpu.md ("TabM's published defaults") has the runs.
TABM_ROWS = {tasks.MULTICLASS: LARGE_DATA_ROWS, tasks.REGRESSION: 10_000}
TABM_NETWORK = NetworkSize(0, (256, 256, 256), 0.1, 0.0, "TabM's shape, sized for a CPU")
# A regression label takes it without dropout: over three seeds, ames' RMSE fell from 24,787 to
# 24,443 (25,664 at 0.2), and deliveries', 1.8761 at 0.1, stayed below CatBoost's 1.9180 at
# 1.8961; both kept earlier epochs, for shorter Trainers.
# docs/experiments/2026-12-06-dropout-under-tabm.md has the runs.
TABM_NETWORKS = {tasks.MULTICLASS: TABM_NETWORK,
                 tasks.REGRESSION: dataclasses.replace(
                     TABM_NETWORK, dropout=0.0, why="TabM's shape, sized for a CPU, no dropout")}
# Members of TabM's shape, by task. A multiclass label, which also trains on smoothed labels,
# takes half of them: on hpc-data, over three seeds, 4 members scored 0.8463 ± 0.0014 against 8's
# 0.8456 ± 0.0035 and kept epoch 58 in place of 101; in the suite's runs its Trainer took
# 42 ± 11 s in place of 72 ± 5.
# docs/experiments/2026-12-06-four-members-for-a-class-label.md has the runs.
TABM_MEMBERS = {tasks.MULTICLASS: 4, tasks.REGRESSION: 8}
# How the refit's learning rate runs under TabM's shape, by task (TrainingConfig.refit_schedule).
# A regression label runs the whole decay over the refit's own epochs: over three seeds, ames'
# RMSE fell from 24,416 to 24,036 and deliveries' from 1.8953 to 1.8934. A class label follows
# the first fit's schedule: the same decay cost hpc-data's smoothed label more accuracy (0.8463
# to 0.8383) than it gained birds' (0.7143 to 0.7166).
# docs/experiments/2026-12-06-a-refit-that-runs-its-decay.md has the runs.
TABM_REFIT_SCHEDULES = {tasks.MULTICLASS: REFIT_FIRST_FIT, tasks.REGRESSION: REFIT_OWN}
TABM_WEIGHT_DECAY = 0.0003
# A class label under TabM's shape trains on labels moved this share toward the uniform answer
# (TrainingConfig.label_smoothing; RealMLP's default, Holzmüller et al., NeurIPS 2024). On
# hpc-data it raised the accuracy from 0.8326 ± 0.0085 to 0.8456 ± 0.0035 over three seeds,
# past the best tree's 0.8383; the smoothed loss keeps later epochs (101 in place of 58).
# docs/experiments/2026-12-06-label-smoothing-under-tabm.md has the runs.
TABM_LABEL_SMOOTHING = 0.1
# What a TPU trains in TabM's place ([tpu]): the paper's own sizes, 32 members sharing layers of
# 512. A TPU's step is input-bound by far (`make tpu-check`), so there they cost little of the
# time a CPU pays for them.
TABM_TPU_NETWORK = {"hidden_units": [512, 512, 512], "ensemble_size": 32}
POSITIVE_WORDS = {"yes", "y", "true", "t", "1"}  # a binary label's positive class, in any case
DISTINCT_CAP = 100_000  # distinct values kept per column while scanning
CHANCE_AUC = 0.5  # a binary model's AUC when its scores rank nothing
# A row index counts the export's rows, with gaps where some were filtered out: it stays below
# this many times the rows kept.
ROW_INDEX_SPAN = 10


@dataclasses.dataclass
class Column:
    """What one pass over the CSV files saw in a column.

    A missing marker (NA, N/A, spaces, …: trainer_module/missing.py) is a gap in a column of
    numbers and a value like any other in a column of text, so it is counted apart until the
    column's kind is known.
    """

    name: str
    rows: int = 0
    empty: int = 0
    distinct: set = dataclasses.field(default_factory=set)  # values other than markers
    numbers: list = dataclasses.field(default_factory=list)
    integers: bool = True
    numeric: bool = True
    words: int = 0
    markers: dict = dataclasses.field(default_factory=dict)  # marker → cells
    extra: frozenset = NO_EXTRA  # the spec's own missing markers, folded
    format: NumberFormat | None = None  # the cells' format ("$#,##0"), if any
    plain: bool = False  # a cell held a plain number
    not_finite: tuple[str, str, int] | None = None  # (cell, file, line) of the first "inf"

    @property
    def is_number(self) -> bool:
        return self.numeric and bool(self.numbers)

    @property
    def missing(self) -> int:
        return self.empty + (sum(self.markers.values()) if self.is_number else 0)

    @property
    def present(self) -> int:
        return self.rows - self.missing

    @property
    def values(self) -> set:
        """The distinct values a model sees: markers too, in a column of text."""
        return self.distinct if self.is_number else self.distinct | set(self.markers)

    def add(self, value: str, path: str = "", line: int = 0) -> None:
        self.rows += 1
        if value == "":
            self.empty += 1
            return
        if is_missing(value, self.extra):
            self.markers[value] = self.markers.get(value, 0) + 1
            return
        if len(self.distinct) < DISTINCT_CAP:
            self.distinct.add(value)
        self.words += len(value.split())
        if self.numeric:
            number = self._number(value)
            if number is None:
                self.numeric = False
                self.numbers = []
                return
            try:
                numbers.check_finite(value, number)
            except ValueError:
                self.not_finite = self.not_finite or (value, path, line)
                return
            self.integers &= number.is_integer()
            self.numbers.append(number)

    def _number(self, value: str) -> float | None:
        """The cell's number, plain or in the column's one format; None where the column
        cannot be numbers (text, or cells in two formats)."""
        try:
            number = float(value)
        except ValueError:
            fmt = numbers.format_of(value)
            if fmt is None:
                return None
            if self.format is not None and (fmt.prefix, fmt.suffix) == (self.format.prefix,
                                                                        self.format.suffix):
                fmt = dataclasses.replace(fmt, thousands=fmt.thousands or self.format.thousands)
            elif self.format is not None or (self.plain and (fmt.prefix or fmt.suffix)):
                return None
            self.format = fmt
            return numbers.parse(value, fmt)
        if self.format is not None and (self.format.prefix or self.format.suffix):
            return None  # "$5" beside "5": text, not one format
        self.plain = True
        return number


@dataclasses.dataclass(frozen=True)
class Dialect:
    """How the CSV files are written: the delimiter, and missing markers of their own."""

    delimiter: str = ","
    missing_values: tuple[str, ...] = ()

    @property
    def extra(self) -> frozenset[str]:
        return folded(self.missing_values)


def scan(data_dir: str, dialect: Dialect = Dialect()) -> dict[str, Column]:
    columns: dict[str, Column] = {}
    for path in spans.data_files(data_dir):
        with csv_check.open_text(path) as f:
            reader = csv.reader(f, delimiter=dialect.delimiter)
            header = next(reader, [])
            for name in header:
                if name.strip():
                    columns.setdefault(name, Column(name, extra=dialect.extra))
            for row in reader:
                for name, value in zip(header, row, strict=False):
                    if name.strip():
                        columns[name].add(value, path, reader.line_num)
    return columns


def power_of_two(n: float, most: int) -> int:
    """The least power of two at or above `n`, at most `most` (table sizes, token counts)."""
    return min(most, 2 ** math.ceil(math.log2(n)))


def instant_buckets(column: Column, format_: str) -> int:
    """A timestamp column's `instant_buckets` (0: its instants are not shared by rows, or its
    values are dates without a time of day)."""
    distinct = len(column.values)
    if column.present < INSTANT_MIN_ROWS * distinct:
        return 0
    pattern = datetimes.pattern(format_)
    if not any(fields.get("H") or fields.get("M") or fields.get("S")
               for fields in map(pattern.fields, column.distinct) if fields):
        return 0
    return power_of_two(INSTANT_BUCKETS_PER_VALUE * distinct, INSTANT_BUCKETS_MAX)


def role_for(column: Column, type_name: str) -> tuple[dict, str]:
    """(the feature entry, why) for a column of the schema type `type_name`."""
    n, present, distinct = column.rows, column.present, len(column.values)
    if present <= n * (1 - MOSTLY_EMPTY):
        return {"role": "ignore"}, f"mostly empty: {column.missing} of {n} cells missing"
    if distinct <= 1:
        return {"role": "ignore"}, "one value only: nothing to learn from"
    id_like = distinct >= ID_LIKE_MIN_DISTINCT and distinct >= ID_LIKE_FRACTION * present
    if type_name == "BYTES":
        format_ = datetimes.detect(sorted(column.distinct), DATETIME_MIN_SHARE)
        if format_ is not None:
            entry = {"role": "datetime", **({"format": format_} if format_ else {})}
            why = (f"dates: {DATETIME_MIN_SHARE:.0%} or more of {len(column.distinct)} "
                   f"distinct values parse as {format_ or 'ISO-8601'}")
            buckets = instant_buckets(column, format_)
            if buckets:
                entry["instant_buckets"] = buckets
                why += (f"; {present / distinct:.1f} rows per instant on average: also each "
                        f"exact instant as an id ({buckets} hash buckets), as rows of one event "
                        "share it")
            return entry, why
        words = column.words / present
        vocabulary = (distinct <= VOCABULARY_MAX
                      and distinct * VOCABULARY_MIN_AVERAGE_COUNT <= present)
        if words >= TEXT_MIN_WORDS and not vocabulary:
            tokens = power_of_two(2 * words, TEXT_MAX_TOKENS)
            return ({"role": "text", "buckets": TEXT_BUCKETS, "max_tokens": tokens},
                    f"free text: {words:.1f} words on average, {distinct} distinct values in "
                    f"{present} rows")
        if id_like:
            return {"role": "ignore"}, f"id-like: {distinct} distinct values in {present} rows"
        if vocabulary:
            return ({"role": "vocabulary", "top_k": VOCABULARY_MAX, "oov_buckets": 10},
                    f"{distinct} distinct strings")
        buckets = power_of_two(distinct, HASH_BUCKETS_MAX)
        return ({"role": "hashed", "buckets": buckets},
                f"{distinct} distinct strings in {present} rows: too many or too rare for a "
                "vocabulary")
    low, high = min(column.numbers), max(column.numbers)
    if type_name == "INT":
        key = _key_form(column)
        if id_like and key:
            return {"role": "ignore"}, (f"id-like: {distinct} distinct values in {present} "
                                        f"rows, {key}")
        if _row_index(column):
            return {"role": "ignore"}, (f"row numbers: one increasing integer per row, "
                                        f"{int(low)} to {int(high)} (an export's index)")
        if distinct <= INTEGER_CATEGORY_MAX and high - low <= INTEGER_RANGE_MAX:
            entry = {"role": "integer", "range": [int(low), int(high)]}
            why = f"{distinct} distinct integers in [{int(low)}, {int(high)}]"
            if distinct <= 2:
                return entry, why
            return {**entry, "bins": INTEGER_NUMBER_BINS}, f"{why}, also as a number"
        if key.startswith("codes") and distinct > INTEGER_CATEGORY_MAX:
            buckets = power_of_two(distinct, HASH_BUCKETS_MAX)
            return ({"role": "hashed", "buckets": buckets},
                    f"a code: {distinct} distinct integers spread over [{low:g}, {high:g}]")
    values = column.numbers
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    skew = sum((v - mean) ** 3 for v in values) / len(values) / std ** 3 if std else 0.0
    if low >= 0 and skew > LONG_TAIL_SKEW:
        return {"role": "log_zscore"}, (f"long right tail: skewness {skew:.1f}, mean "
                                        f"{mean:.3g}, max {high:.3g}")
    return {"role": "zscore"}, f"numbers in [{low:.3g}, {high:.3g}], mean {mean:.3g}"


def sized_integer_views(roles: dict[str, tuple[dict, str]], only: set[str] | None = None
                        ) -> dict[str, tuple[dict, str]]:
    """`roles` (column → (entry, why)) with each integer's number view (of the `only` columns,
    if given) read with SIZED_INTEGER_BINS."""
    return {name: ({**entry, "bins": SIZED_INTEGER_BINS}, why)
            if entry["role"] == "integer" and entry.get("bins") and (only is None or name in only)
            else (entry, why) for name, (entry, why) in roles.items()}


def bins_within_budget(roles: dict[str, tuple[dict, str]], train_rows: int
                       ) -> dict[str, tuple[dict, str]]:
    """`roles` (column → (entry, why)) for the sized network: its numbers keep their quantile
    bins if all of them come to at most one per ROWS_PER_BIN training rows, else each number
    is written with `bins = 0`, the reason beside it."""
    numbers = [name for name, (entry, _) in roles.items() if entry["role"] in NUMBER_ROLES]
    bins = len(numbers) * NUMERIC_BINS
    if bins * ROWS_PER_BIN <= train_rows:
        return roles
    why = (f"; no quantile bins: {len(numbers)} numbers with {NUMERIC_BINS} each would be more "
           f"than one bin per {ROWS_PER_BIN} of the {train_rows} training rows")
    return {name: ({**entry, "bins": 0}, f"{why_before}{why}") if name in numbers
            else (entry, why_before) for name, (entry, why_before) in roles.items()}


def _row_index(column: Column) -> bool:
    """An R or pandas export's row names or index: an integer in every row, strictly
    increasing in file order (with gaps where rows were filtered out), counting from near 0
    rather than measuring (a sorted timestamp or a code runs far past the row count)."""
    values = column.numbers
    return (column.integers and len(values) == column.rows > 1
            and 0 <= values[0] and values[-1] < ROW_INDEX_SPAN * column.rows
            and all(a < b for a, b in itertools.pairwise(values)))


def _key_form(column: Column) -> str:
    """How an integer column names rows rather than measures them ('' when it does not)."""
    low, high = min(column.numbers), max(column.numbers)
    if high - low + 1 <= len(column.distinct) / ID_LIKE_FRACTION:
        return "a run of consecutive integers"
    widths = {len(str(abs(int(v)))) for v in column.numbers}
    if len(widths) == 1 and min(widths) >= CODE_MIN_DIGITS:
        return f"codes of {min(widths)} digits"
    return ""


def _classes(label: Column, task: str, type_name: str) -> list[str]:
    values = sorted(label.values, key=lambda v: (float(v) if label.is_number else 0, v))
    if type_name == "INT":
        values = sorted({str(int(float(v))) for v in values}, key=int)
    if task == tasks.BINARY:
        if type_name == "INT" and set(values) <= {"0", "1"}:
            return []
        if len(values) != 2:
            raise ConfigError(f"LABEL={label.name!r} has {len(values)} distinct values "
                              f"({', '.join(values[:10])}{'…' if len(values) > 10 else ''}): "
                              "a binary label has exactly two; use TASK=multiclass")
    if task == tasks.MULTICLASS and not 2 <= len(values) <= MAX_CLASSES:
        raise ConfigError(f"LABEL={label.name!r} has {len(values)} distinct values: a "
                          f"multiclass label has 2 to {MAX_CLASSES}; use TASK=regression for "
                          "a number")
    return values


def propose(name: str, data_dir: str, label: str, task: str, dialect: Dialect = Dialect()):
    """(schema, spec TOML text, the decisions as lines) for the data."""
    import tensorflow_data_validation as tfdv

    if task not in tasks.TASKS:
        raise ConfigError(f"TASK={task!r}: expected one of {', '.join(tasks.TASKS)}")
    columns = scan(data_dir, dialect)
    clash = tf_names.clashing(columns)
    if clash:
        raise ConfigError(f"{data_dir}: columns {clash[0]!r} and {clash[1]!r} differ only in "
                          "case, which TensorFlow cannot tell apart in a model's inputs: rename "
                          "one of them in the CSV header, then run make dataset again")
    if label not in columns:
        raise ConfigError(f"LABEL={label!r} is not a column of the CSV files in {data_dir}; "
                          f"its columns are {', '.join(columns)}")
    for column in columns.values():
        if column.is_number and column.not_finite:
            cell, path, line = column.not_finite
            raise ConfigError(f"data file {path!r}, line {line}: column {column.name!r} holds "
                              f"{cell!r}, which is not a finite number; a model cannot learn "
                              "from it: write the value, or leave the cell empty (missing)")
    formats = {c.name: c.format for c in columns.values() if c.is_number and c.format}
    gaps = [i for i, c in enumerate(columns.values())
            if c.is_number and (c.markers or c.format)]
    unnamed = csv_check.nameless(csv_check.file_header(spans.data_files(data_dir)[0],
                                                       dialect.delimiter))
    statistics = csv_statistics(data_dir, list(columns), gaps, dialect, unnamed,
                                [formats.get(name) for name in columns],
                                rows=next(iter(columns.values())).rows)
    schema = tfdv.infer_schema(statistics.whole, infer_feature_shape=True)
    from tensorflow_metadata.proto.v0 import schema_pb2

    types = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    label_column, label_type = columns[label], types[label]
    if task == tasks.REGRESSION and label_type not in NUMERIC_TYPES:
        raise ConfigError(f"LABEL={label!r} holds text ({label_type}); a regression label is "
                          "a number: use TASK=multiclass, or pick a numeric column")
    if task != tasks.REGRESSION and label_type == "FLOAT":
        raise ConfigError(f"LABEL={label!r} holds fractional numbers; use TASK=regression, or "
                          "derive a binary label with a rule (docs/dataset-spec.md)")
    decisions = []
    if unnamed:
        decisions.append(f"  column(s) {[i + 1 for i in unnamed]} of the header: no name and no "
                         "value in any row (a spreadsheet's trailing columns): dropped")
    features: dict[str, list[dict]] = {}
    notes: dict[str, list[str]] = {}
    train_rows = keys.train_share(label_column.present)
    slice_rows = validation_slice(train_rows)
    tabm = takes_tabm_defaults(task, train_rows, validated=bool(slice_rows))
    roles = {column.name: role_for(column, types[column.name])
             for column in columns.values() if column.name != label}
    if tabm:
        roles = sized_integer_views(roles, {name for name, column in columns.items()
                                            if len(column.values) <= FEW_INTEGER_VALUES})
    else:
        roles = bins_within_budget(sized_integer_views(roles), train_rows)
    for column_name, (entry, why) in roles.items():
        features[column_name] = [{**entry, "why": why}]
        decisions.append(f"  {column_name:<28} {entry['role']:<11} {why}")
    label_table: dict = {"column": label, "task": task,
                         "missing": "drop" if label_column.missing else "stop"}
    if label_column.missing:
        decisions.append(f"  label {label!r}: {label_column.missing} of {label_column.rows} rows "
                         "have no value: missing = \"drop\" leaves them out (the report counts "
                         "them); set \"stop\" to stop the run instead")
    if task == tasks.REGRESSION:
        values = label_column.numbers
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        label_table["loss"] = "mse"
        # Rounded down: predicting the mean must not pass.
        metric, threshold = "rmse", {"max": math.floor(std * 1e6) / 1e6,
                                     "allowed_change": round(0.05 * std, 6)}
        threshold_why = (f"predicting the mean scores an RMSE of {std:.4g} (the label's spread); "
                         "the model must beat it")
    else:
        counts = _label_counts(data_dir, label, dialect.delimiter)
        classes = _classes(label_column, task, label_type)
        if task == tasks.BINARY and classes:
            classes, positive_why = _positive_last(classes, counts)
            notes["label.classes"] = [f"[negative, positive]: {positive_why}"]
            decisions.append(f"  label {label!r}: {positive_why}")
        if classes:
            label_table["classes"] = classes
        majority = max(counts.values()) / sum(counts.values())
        # Rounded up: answering the most frequent class must not pass.
        metric, threshold = "accuracy", {"min": math.ceil(majority * 1e4) / 1e4,
                                         "allowed_change": 0.01}
        threshold_why = (f"always answering the most frequent class scores {majority:.4f}; "
                         "the model must beat it")
    slices = _slice_columns(columns, types, label)
    drifts, drift_why = drift_thresholds(
        statistics, schema, [c for c in columns if c == label
                             or features.get(c, [{}])[0].get("role") != "ignore"])
    notes["drift"] = [f"How far a span may move from the previous one (L-infinity for text, "
                      f"Jensen-Shannon for numbers) before the run stops: {drift_why}.",
                      "A column listed under warn_only is reported and does not stop it."]
    decisions.append(f"  drift: thresholds {drift_why}")
    fraction = validation_fraction(train_rows)
    batch, epochs = training_budget(train_rows, task, validated=bool(slice_rows))
    size = TABM_NETWORKS[task] if tabm else network_size(train_rows)
    buckets = pair_buckets(train_rows)
    members = ensemble_size(task, train_rows, validated=bool(slice_rows))
    smoothing = TABM_LABEL_SMOOTHING if tabm and task != tasks.REGRESSION else 0.0
    # Without a slice nothing stops early and nothing is refitted: the spec says so.
    refit = refit_factor(task, train_rows) if slice_rows else 0.0
    schedule = TABM_REFIT_SCHEDULES[task] if tabm and refit else REFIT_FIRST_FIT
    patience = early_stopping_patience(train_rows) if slice_rows else 0
    values = {
        "label": label_table, "features": features,
        "evaluation": {"slices": slices, "thresholds": {
            metric: threshold,
            # A binary model that ranks no better than chance has learned nothing, whatever
            # share of the eval rows its answers happen to get right.
            **({"auc": {"min": CHANCE_AUC}} if task == tasks.BINARY else {})}},
        "training": {"epochs": epochs, "per_replica_batch_size": batch,
                     **({"learning_rate": LEARNING_RATE} if slice_rows else {}),
                     **({"weight_decay": TABM_WEIGHT_DECAY} if tabm else {}),
                     **({"label_smoothing": smoothing} if smoothing else {}),
                     "early_stopping_patience": patience, "refit_factor": refit,
                     **({"refit_schedule": schedule} if schedule != REFIT_FIRST_FIT else {}),
                     **({"lr_floor": LR_FLOOR, "validation_fraction": fraction}
                        if slice_rows else {})},
        "model": {"hidden_units": list(size.hidden_units), "embedding_dim": EMBEDDING_DIM,
                  "dropout": size.dropout, "l2": size.l2, "cross_buckets": buckets,
                  "ensemble_size": members},
        **({"tpu": dict(TABM_TPU_NETWORK)} if tabm else {}),
        "csv": {"delimiter": dialect.delimiter, "missing_values": list(dialect.missing_values),
                **({"formats": {name: str(fmt) for name, fmt in formats.items()}}
                   if formats else {})},
        "drift": {"thresholds": drifts},
    }
    found = spans.find(data_dir)
    if found:
        values["spans"] = {"layout": found.layout}
    for column_name, fmt in formats.items():
        decisions.append(f"  {column_name}: numbers written as {str(fmt)!r}, read through that "
                         "format ([csv] formats)")
    try:  # what is written reads back as this spec
        dataset_spec.from_dict(values, source=f"the spec proposed for {data_dir}", name=name)
    except dataset_spec.SpecError as e:
        raise ConfigError(str(e)) from e
    notes.update(_notes(train_rows, batch, epochs, size, threshold_why, metric, slice_rows))
    if dialect != Dialect():
        decisions.append(f"  csv: delimiter {dialect.delimiter!r}, missing values "
                         f"{list(dialect.missing_values)} besides the usual markers")
    if found:
        decisions.append(f"  data: {len(found.folders)} span folders "
                         f"({spans.FOLDER_PATTERN[found.layout]}), read together here; a run "
                         f"reads the newest ({found.name(found.newest)}), SPAN= picks another")
    header = [f"Dataset spec written by `make dataset` from {data_dir}: review every",
              "role (the reason each was chosen is beside it) and the thresholds, then",
              f"`make run DATASET={name} DATA_DIR=…`. docs/dataset-spec.md explains every",
              "key."] + ([f"The data is {len(found.folders)} span folders "
                          f"({spans.FOLDER_PATTERN[found.layout]}): a run reads the newest, "
                          "SPAN= picks another."] if found else [])
    _curate(schema, label, label_table["missing"])
    tolerated, tolerance_why = new_value_tolerances(statistics, schema, label)
    if tolerated:
        notes["drift"].append("New values of a category column (a value its schema domain does "
                              "not list) are reported, and stop a run only past the share "
                              "schema.pbtxt tolerates: 1 - min_domain_mass under the column's "
                              f"distribution_constraints ({tolerance_why}).")
        decisions.append("  new values: a split may hold this share of values outside the "
                         f"column's domain before the run stops: {tolerance_why}; "
                         + ", ".join(f"{c} {t:g}" for c, t in sorted(tolerated.items()))
                         + " (schema.pbtxt: distribution_constraints.min_domain_mass = 1 - it)")
    decisions.insert(0, f"Dataset {name!r}: label {label!r} ({task}), {label_column.rows} rows, "
                        f"{len(columns)} columns")
    decisions.append(f"  thresholds: {metric} = {threshold}  ({threshold_why})"
                     + (f"; auc above {CHANCE_AUC}" if task == tasks.BINARY else ""))
    if slice_rows:
        training = (f"at most {epochs} epochs in batches of {batch}, a validation slice of "
                    f"about {slice_rows} rows, patience {patience} at most "
                    f"({PATIENCE_PER_BEST_EPOCH}x the best epoch when fewer, "
                    f"at least {MIN_PATIENCE}), "
                    + (f"refit on every training row for {refit:g}x the epochs kept" if refit
                       else "no refit")
                    + (", its learning rate decaying over its own epochs"
                       if schedule == REFIT_OWN else ""))
    else:
        training = (f"all {epochs} epochs in batches of {batch}, the last kept: too few rows "
                    f"for a validation slice of {MIN_VALIDATION_ROWS}, so no early stopping "
                    "and no refit")
    decisions.append(f"  slices: {', '.join(slices) or 'none'}; training: {training}")
    decisions.append(f"  network: layers {list(size.hidden_units)}, embeddings of "
                     f"{EMBEDDING_DIM}, dropout {size.dropout}, l2 {size.l2} ({size.why}), "
                     f"{buckets} rows per pair of categories, "
                     + (f"{members} members sharing it" if members > 1 else "one member")
                     + (f"; Adam at {LEARNING_RATE:g}" if slice_rows else "")
                     + (f" with weight decay {TABM_WEIGHT_DECAY:g}" if tabm else "")
                     + (f", labels smoothed by {smoothing:g}" if smoothing else ""))
    if tabm:
        decisions.append(f"  on a TPU: layers {TABM_TPU_NETWORK['hidden_units']}, "
                         f"{TABM_TPU_NETWORK['ensemble_size']} members ([tpu]: TabM's "
                         "published sizes, cheap on a TPU's input-bound step)")
    return schema, datasets.spec_text(values, notes, header), decisions


def _notes(train_rows: int, batch: int, epochs: int, size: NetworkSize, threshold_why: str,
           metric: str, slice_rows: int) -> dict[str, list[str]]:
    """The comments the written spec carries beside its keys: why each value was chosen, and
    what the run will do with them."""
    if not slice_rows:
        training = [f"About {train_rows} training rows, too few for a validation slice of "
                    f"{MIN_VALIDATION_ROWS}: every", f"row trains for all {epochs} passes in "
                    f"batches of {batch}, and the last epoch is kept (patience 0 and",
                    "refit_factor 0 say so: nothing stops early, nothing is refitted)."]
    else:
        training = [f"About {train_rows} training rows: batches of {batch}, at most {epochs} "
                    "passes", "over them (training stops earlier when the loss on a "
                    f"validation slice of about {slice_rows} rows", "stops improving)."]
    return {
        f"evaluation.thresholds.{metric}": [threshold_why],
        "evaluation.thresholds.auc": ["ranking no better than chance (AUC 0.5) is learning "
                                      "nothing: the model must beat it"],
        "training": training,
        "training.early_stopping_patience": [
            "The most epochs without a lower validation loss before training stops; a best at",
            f"epoch b is waited on for {PATIENCE_PER_BEST_EPOCH}b epochs when fewer, at least "
            f"{MIN_PATIENCE}. make dataset writes {SMALL_DATA_PATIENCE}",
            f"below {LARGE_DATA_ROWS:,} training rows and "
            f"{_DEFAULT_TRAINING.early_stopping_patience} from there on."],
        "training.validation_fraction": [
            "The share of the training rows held out as that slice. make dataset writes "
            f"{SMALL_DATA_VALIDATION_FRACTION:g}",
            f"below {SMALL_DATA_ROWS:,} training rows and {DataConfig().validation_fraction:g} "
            "from there on."],
        "training.learning_rate": [
            f"Adam's rate at this batch: make dataset writes {LEARNING_RATE:g}, TabM's, wherever a "
            "validation", "slice stops the fit (the Trainer's default is "
            f"{_DEFAULT_TRAINING.learning_rate:g})."],
        "training.weight_decay": [
            "The decay of every weight apart from the gradient, as TabM publishes it: make",
            f"dataset writes it, with TabM's shape of network below, for {tabm_rule()}."],
        "training.label_smoothing": [
            "The loss's labels move this share toward the uniform answer (serving answers plain",
            "probabilities): make dataset writes it for a class label with TabM's shape."],
        "training.refit_schedule": [
            "own: the refit's learning rate warms up and decays over the refit's own epochs, so",
            "the export comes from the end of the decay: make dataset writes it for a regression",
            "label with TabM's shape. Otherwise the refit follows the first fit's schedule."],
        "training.lr_floor": [
            "The learning rate's cosine decay ends at this share of its peak instead of 0, so a",
            "fit still improving at the budget's end was learning at a real rate."],
        "training.refit_factor": [
            "Then a fresh model trains on every training row, the validation slice's too,",
            f"for refit_factor times the epochs kept (0: off). make dataset writes "
            f"{REFIT_FACTOR:g} below", f"{REFIT_ROWS:,} training rows and 0 from there on, or "
            f"from {TABM_ROWS[tasks.REGRESSION]:,} for a regression label."],
        "model": [f"{size.why} (for about {train_rows} training rows)"],
        "model.embedding_dim": ["width of each category feature's embedding"],
        "tpu": ["The network a TPU trains in place of [model]'s: TabM's published sizes. A "
                "TPU's step is input-bound, so there they cost little of the time a CPU pays "
                "for them (make tpu-check compiles this network)."],
        "model.cross_buckets": ["embedding rows of each pair of category features: about one "
                                f"per training row, at least {_DEFAULT_NETWORK.cross_buckets}"],
        "model.ensemble_size": [
            "members that share the MLP, each with its own head; their mean answers. make dataset",
            f"writes {BINARY_ENSEMBLE_SIZE} for a binary label below {LARGE_DATA_ROWS:,} training "
            "rows; under TabM's shape:", ", ".join(
                f"{TABM_MEMBERS[task]} for a {task} label below {rows:,} training rows"
                for task, rows in TABM_ROWS.items()) + f", {FEW_MEMBERS} in place "
            f"of these from {MANY_ROWS:,} training rows on and for a regression label from",
            f"{TABM_ROWS[tasks.REGRESSION]:,} to {LARGE_DATA_ROWS:,}, and 1 otherwise."],
        "csv": ["How the files are written (make dataset read them so)."],
    }


def validation_fraction(train_rows: int) -> float:
    """validation_fraction for this many training rows: SMALL_DATA_VALIDATION_FRACTION below
    SMALL_DATA_ROWS, else the Trainer's default."""
    if train_rows < SMALL_DATA_ROWS:
        return SMALL_DATA_VALIDATION_FRACTION
    return DataConfig().validation_fraction


def validation_slice(train_rows: int) -> int:
    """About how many rows the Trainer holds out to score epochs: validation_fraction's share,
    grown to MIN_VALIDATION_ROWS on small data up to MAX_VALIDATION_FRACTION
    (trainer_module/plan.py); 0 where even that share is too few."""
    asked = round(train_rows * validation_fraction(train_rows))
    if asked >= MIN_VALIDATION_ROWS:
        return asked
    return MIN_VALIDATION_ROWS if train_rows * MAX_VALIDATION_FRACTION >= MIN_VALIDATION_ROWS else 0


def network_size(train_rows: int) -> NetworkSize:
    """The entry of NETWORK_SIZES for this many training rows."""
    return [size for size in NETWORK_SIZES if train_rows >= size.rows][-1]


def pair_buckets(train_rows: int) -> int:
    """cross_buckets for this many training rows. A pair of category features shows at most
    one combination per training row, so a table about as large gives nearly every combination
    seen in training a row of its own, where a fixed size makes the larger pairs share rows
    (docs/trainer-and-tpu.md has the runs). The largest prime no larger, as the Trainer's
    default is, so the pair hash's modulo shares no factor with the ids; from that default up
    to MAX_CROSS_BUCKETS."""
    rows = min(max(train_rows, _DEFAULT_NETWORK.cross_buckets), MAX_CROSS_BUCKETS)
    while any(rows % d == 0 for d in range(2, math.isqrt(rows) + 1)):
        rows -= 1
    return rows


def ensemble_size(task: str, train_rows: int, validated: bool = True) -> int:
    """ensemble_size for this task and this many training rows: BINARY_ENSEMBLE_SIZE for a
    binary label below LARGE_DATA_ROWS, where the members' mean raised the AUC on four of the
    quality suite's six binary datasets (their mean AUC by 0.0062) and an epoch costs seconds;
    TABM_MEMBERS[task] where TabM's shape applies (`takes_tabm_defaults`); FEW_MEMBERS in place of
    either from MANY_ROWS on; FEW_MEMBERS for a regression label past TabM's rows
    (`past_tabm_regression`); else 1. Eight members on the default network scored lower on a
    multiclass dataset and on one of two regression datasets; on large data they are untried,
    and a CPU epoch of minutes would take several times as long."""
    if takes_tabm_defaults(task, train_rows, validated):
        members = TABM_MEMBERS[task]
    elif task == tasks.BINARY and train_rows < LARGE_DATA_ROWS:
        members = BINARY_ENSEMBLE_SIZE
    elif past_tabm_regression(task, train_rows):
        members = FEW_MEMBERS
    else:
        return 1
    return members if train_rows < MANY_ROWS else FEW_MEMBERS


def takes_tabm_defaults(task: str, train_rows: int, validated: bool) -> bool:
    """Whether this dataset takes TabM's shape of network (TABM_NETWORK and the rest): a
    label of a task in TABM_ROWS below its number of training rows, with a validation slice,
    as TabM's own runs stop early on one (its learning rate is four times the Trainer's). On
    large data it is untried, and a CPU epoch of minutes would take several times as long."""
    return validated and train_rows < TABM_ROWS.get(task, 0)


def tabm_rule() -> str:
    """Which labels take TabM's shape of network, as the written spec's comments say it."""
    return " or ".join(f"a {task} label below {rows:,} training rows"
                       for task, rows in TABM_ROWS.items())


def past_tabm_regression(task: str, train_rows: int) -> bool:
    """Whether this is a regression label with too many rows for TabM's shape and too few for
    LARGE_DATA_ROWS: it trains FEW_MEMBERS members and no refit."""
    return task == tasks.REGRESSION and TABM_ROWS[task] <= train_rows < LARGE_DATA_ROWS


def refit_factor(task: str, train_rows: int) -> float:
    """refit_factor for this task and this many training rows: REFIT_FACTOR below REFIT_ROWS,
    where the validation slice's rows are a real share of what there is to learn and a second
    fit costs little; from there on 0 (off), and 0 for a regression label past TabM's rows,
    whose members train for most of the budget (`past_tabm_regression`)."""
    return REFIT_FACTOR if train_rows < REFIT_ROWS and not past_tabm_regression(
        task, train_rows) else 0.0


def early_stopping_patience(train_rows: int) -> int:
    """early_stopping_patience for this many training rows: SMALL_DATA_PATIENCE below
    LARGE_DATA_ROWS, where the validation slice holds few rows (its loss wanders from epoch to
    epoch) and an epoch costs seconds; from there on the Trainer's default."""
    if train_rows < LARGE_DATA_ROWS:
        return SMALL_DATA_PATIENCE
    return _DEFAULT_TRAINING.early_stopping_patience


def training_budget(train_rows: int, task: str, validated: bool = True) -> tuple[int, int]:
    """(batch, epochs) for this many training rows of this task: batches that make at least a
    few steps per epoch (larger ones for large data, where a step's fixed cost dominates), and
    enough epochs for about `train_steps` steps, within [MIN_EPOCHS, MAX_EPOCHS]; `validated`
    (a validation slice chooses the epochs): at least that many steps, however many epochs
    that takes. Early stopping ends most runs well before the budget; without a slice every
    epoch trains, so the cap stays."""
    batch = LARGE_BATCH if train_rows >= LARGE_DATA_ROWS else 256
    while batch > 8 and batch * 2 > train_rows // 2:
        batch //= 2
    steps_per_epoch = max(1, train_rows // batch)
    target, floor = _train_steps(task, train_rows, validated)
    epochs = min(MAX_EPOCHS, max(MIN_EPOCHS, math.ceil(target / steps_per_epoch)))
    if validated:
        epochs = max(epochs, math.ceil(floor / steps_per_epoch))
    return batch, epochs


def _train_steps(task: str, train_rows: int, validated: bool) -> tuple[int, int]:
    """(about how many steps the budget holds, the fewest with a validation slice) for this
    task and this many training rows: BINARY_TRAIN_STEPS for both where a binary label's
    BINARY_ENSEMBLE_SIZE members train and a validation slice stops them, else
    TRAIN_STEPS_TARGET and MIN_TRAIN_STEPS. Without a slice the last epoch is kept, so the
    budget stays the longer one."""
    if (validated and task == tasks.BINARY
            and ensemble_size(task, train_rows, validated) == BINARY_ENSEMBLE_SIZE):
        return BINARY_TRAIN_STEPS, BINARY_TRAIN_STEPS
    return TRAIN_STEPS_TARGET, MIN_TRAIN_STEPS


def csv_statistics(data_dir: str, names: list[str], gaps: list[int], dialect: Dialect,
                   unnamed: tuple[int, ...] | list[int] = (),
                   formats: list[NumberFormat | None] | None = None,
                   parts: bool = True, rows: int = 0) -> "CsvStatistics":
    """TFDV's statistics of the CSV files, as tfdv.generate_statistics_from_csv computes them
    but read as CsvExampleGen reads them: rows by its own reader (a quoted value may hold a line
    break; gzip files), the header `names` the checks read (TFDV keeps a byte-order mark in the
    first name), the spec's delimiter, the header's `unnamed` (empty) columns dropped, and in
    the number columns at the indices `gaps` (of the named columns) missing markers as the
    empty cells and formatted numbers ("$5,993", `formats` by column) as the floats
    CsvExampleGen makes them.

    With `parts`, also the statistics of each span, or of each of `flat_parts(rows)`
    consecutive parts of a flat folder's `rows` rows in file order. They come from the same
    pass, as TFDV slices of a column that tags each row with its part: one decoding (every
    part's columns typed as the whole data's) and one statistics step, where a step per part
    would cost Beam's set-up each time."""
    import apache_beam as beam
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation import constants
    from tensorflow_data_validation.coders import csv_decoder
    from tensorflow_data_validation.utils import slicing_util

    from pipeline.components import example_gen

    def blank_markers(line: str) -> str:
        cells = next(csv.reader([line], delimiter=dialect.delimiter))
        for i in reversed(unnamed):
            del cells[i]
        for i in gaps:
            if i < len(cells) and is_missing(cells[i], dialect.extra):
                cells[i] = ""
            elif i < len(cells) and formats and formats[i]:
                cells[i] = repr(numbers.parse(cells[i], formats[i]))
        out = io.StringIO()
        # The writer quotes a value holding a line break only when the break is part of its
        # line terminator; the terminator is cut off after.
        csv.writer(out, lineterminator="\r\n", delimiter=dialect.delimiter).writerow(cells)
        return out.getvalue()[:-2]

    def read(p, label: str, files: list[str]):
        # CsvExampleGen's own reader: one record per row, also where a quoted value holds a
        # line break.
        lines = (p | f"Files{label}" >> beam.Create(files)
                 | f"Read{label}" >> beam.ParDo(example_gen.ReadCsvRecords()))
        return lines | f"Blank{label}" >> beam.Map(blank_markers) if gaps or unnamed else lines

    def in_file_order(files: list[str]):
        """Every record of `files`, in order, tagged with its part of the rows."""
        count = flat_parts(rows)
        reader = example_gen.ReadCsvRecords()
        records = (record for path in files for record in reader.process(path))
        for index, record in enumerate(records):
            line = blank_markers(record) if gaps or unnamed else record
            yield _tagged(line, dialect.delimiter, min(count - 1, index * count // max(rows, 1)))

    found = spans.find(data_dir)
    by_span = bool(found and len(found.folders) > 1)
    tag = _part_column(names)
    work = tempfile.mkdtemp(prefix="make-dataset-")
    try:
        with beam.Pipeline() as p:
            if not parts:
                lines = read(p, "", spans.data_files(data_dir))
            elif by_span:
                lines = [read(p, f"Span{span}", csv_check.csv_files(folder))
                         | f"Tag{span}" >> beam.Map(_tagged, dialect.delimiter, span)
                         for span, folder in sorted(found.folders.items())] | beam.Flatten()
            else:
                lines = (p | "Files" >> beam.Create([spans.data_files(data_dir)])
                         | "ReadInOrder" >> beam.FlatMap(in_file_order))
            options = tfdv.StatsOptions(experimental_slice_functions=[
                slicing_util.get_feature_value_slicer({tag: None})] if parts else None)
            _ = (lines
                 | "Decode" >> csv_decoder.DecodeCSV(
                     column_names=([tag] if parts else []) + names, delimiter=dialect.delimiter)
                 | "Statistics" >> tfdv.GenerateStatistics(options)
                 | "Write" >> tfdv.WriteStatisticsToTFRecord(os.path.join(work, "statistics")))
        computed = tfdv.load_statistics(os.path.join(work, "statistics")).datasets
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not parts:
        return CsvStatistics(_statistics_list(computed[0], tag), [], by_span)
    sliced = {d.name: d for d in computed}
    part_keys = sorted(found.folders) if by_span else range(flat_parts(rows))
    return CsvStatistics(
        _statistics_list(sliced[constants.DEFAULT_SLICE_KEY], tag),
        [_statistics_list(sliced.get(f"{tag}_{key}"), tag) for key in part_keys], by_span)


def flat_parts(rows: int) -> int:
    """How many consecutive parts a flat folder of `rows` rows is cut into for its thresholds:
    about FLAT_PART_ROWS rows each, at least 2, at most FLAT_PARTS_MAX."""
    return min(FLAT_PARTS_MAX, max(2, rows // FLAT_PART_ROWS))


def _part_column(names: list[str]) -> str:
    """A name for the column that tags each row with its part, none of the data's."""
    tag = "__part__"
    while tag in names:
        tag += "_"
    return tag


def _tagged(line: str, delimiter: str, part: int) -> str:
    """The CSV row with its part as a first cell."""
    return f"{part}{delimiter}{line}"


def _statistics_list(dataset, tag: str):
    """One slice's statistics as TFDV's list of one dataset, without the tag column: what
    statistics of that part's rows alone would hold. A part without rows (a half of one row)
    has empty statistics."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    result = statistics_pb2.DatasetFeatureStatisticsList()
    part = result.datasets.add()
    if dataset is not None:
        part.CopyFrom(dataset)
        part.name = ""
        kept = [f for f in part.features if list(f.path.step) != [tag]]
        del part.features[:]
        part.features.extend(kept)
    return result


@dataclasses.dataclass(frozen=True)
class CsvStatistics:
    """The data's statistics (`whole`), and those of its spans in order (`by_span`) or, for a
    flat folder, of consecutive parts of its rows (none where they were not asked for)."""

    whole: Any
    parts: list[Any]
    by_span: bool


def drift_thresholds(statistics: CsvStatistics, schema, columns: list[str]
                     ) -> tuple[dict[str, float], str]:
    """Each column's drift threshold, and why: a margin (DRIFT_MARGIN, or DRIFT_MARGIN_MANY
    from DRIFT_MANY_PAIRS pairs on) times the largest distance between consecutive spans (or
    consecutive parts of the rows), at least DRIFT_FLOOR and at most DRIFT_CAP. A distance two
    samples of the same data already show is noise, not drift."""
    worst = {c: 0.0 for c in columns}
    pairs = list(zip(statistics.parts, statistics.parts[1:], strict=False))
    for before, after in pairs:
        for d in drift.distances(after, before, schema, {c: 1.0 for c in columns}, drift.DRIFT):
            worst[d.column] = max(worst[d.column], d.distance)
    margin = DRIFT_MARGIN_MANY if len(pairs) >= DRIFT_MANY_PAIRS else DRIFT_MARGIN
    thresholds = {c: round(min(DRIFT_CAP, max(DRIFT_FLOOR, margin * w)), 2)
                  for c, w in worst.items()}
    noisy = sorted(c for c, w in worst.items() if margin * w > DRIFT_CAP)
    why = (f"{margin:g}x the largest distance between "
           + ("consecutive spans" if statistics.by_span
              else f"consecutive parts of the rows ({len(statistics.parts)}, in file order)")
           + f", within [{DRIFT_FLOOR:g}, {DRIFT_CAP:g}]"
           + (f"; {', '.join(noisy)} already differ(s) by more than "
              f"{DRIFT_CAP / margin:.2g} there, so only a larger shift is caught"
              if noisy else ""))
    return thresholds, why


def new_value_tolerances(statistics: CsvStatistics, schema, label: str
                         ) -> tuple[dict[str, float], str]:
    """Writes each category column's tolerance for values outside its domain into `schema`
    (TFDV's min_domain_mass, 1 minus the tolerance); returns the tolerances and why.

    A span's new values are those no earlier span held (for a flat folder: those no earlier part
    of its rows held); the label keeps no tolerance, since a new class is a new task."""
    worst = {c: 0.0 for c in changes.domains(schema) if c != label}
    seen: dict[str, set[str]] = {c: set() for c in worst}
    for part in statistics.parts:
        counts = {c: changes.value_counts(part, c) for c in worst}
        for column, values in counts.items():
            total = sum(values.values())
            if seen[column] and total:
                new = sum(n for value, n in values.items() if value not in seen[column])
                worst[column] = max(worst[column], new / total)
            seen[column] |= set(values)
    tolerated = {c: round(min(NEW_VALUES_CAP, max(NEW_VALUES_FLOOR, DRIFT_MARGIN * w)), 2)
                 for c, w in worst.items()}
    for feature in schema.feature:
        if feature.name in tolerated:
            feature.distribution_constraints.min_domain_mass = round(1 - tolerated[feature.name],
                                                                     6)
    why = (f"{DRIFT_MARGIN:g}x the largest share of new values "
           + ("a span brought" if statistics.by_span
              else f"a part of the rows brought ({len(statistics.parts)}, in file order)")
           + f", within [{NEW_VALUES_FLOOR:g}, {NEW_VALUES_CAP:g}]")
    return tolerated, why


def _positive_last(classes: list[str], counts: dict[str, int]) -> tuple[list[str], str]:
    """A binary label's two classes as [negative, positive], and why: the one yes/true word
    (yes, y, true, t, 1 in any case) is positive, else the minority class (what a model is
    usually asked to find: churn, default, fraud)."""
    words = [c for c in classes if c.strip().lower() in POSITIVE_WORDS]
    if len(words) == 1:
        positive, why = words[0], "a yes/true word"
    else:
        positive = min(classes, key=lambda c: (counts.get(c, 0), c))
        why = f"the minority class, {counts.get(positive, 0)} of {sum(counts.values())} rows"
    negative = next(c for c in classes if c != positive)
    return [negative, positive], (f"positive class {positive!r} ({why}); swap the two to "
                                  "predict the other")


def _label_counts(data_dir: str, label: str, delimiter: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in spans.data_files(data_dir):
        with csv_check.open_text(path) as f:
            reader = csv.reader(f, delimiter=delimiter)
            index = next(reader, []).index(label)
            for row in reader:
                if row[index] != "":
                    counts[row[index]] = counts.get(row[index], 0) + 1
    return counts


def _slice_columns(columns: dict[str, Column], types: dict[str, str], label: str) -> list[str]:
    """The string column with the fewest values (2 to 20), if any: a natural first slice."""
    candidates = [c for c in columns.values() if c.name != label and types[c.name] == "BYTES"
                  and 2 <= len(c.values) <= 20 and not c.missing]
    return [min(candidates, key=lambda c: len(c.values)).name] if candidates else []


def _curate(schema, label: str, missing: str) -> None:
    """Fits TFDV's inference to what CsvExampleGen writes: an empty cell is a feature with no
    value, so a column with gaps allows zero or one value (one or none, a sparse tensor that the
    feature's role fills). The label is absent when serving; with missing = "drop" it may be
    empty too."""
    schema.default_environment.extend(["TRAINING", "SERVING"])
    for feature in schema.feature:
        if feature.name == label:
            feature.not_in_environment.append("SERVING")
            if missing == "drop":
                feature.ClearField("shape")
                feature.presence.min_fraction = 0.0
                feature.value_count.max = 1
        if not feature.HasField("shape"):
            feature.value_count.min = 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Write schemas/<name>/ for a CSV dataset.")
    parser.add_argument("--name", required=True, help="the dataset's name, e.g. house-prices")
    parser.add_argument("--data-dir", required=True, help="folder of CSV files with a header")
    parser.add_argument("--label", required=True, help="the label column")
    parser.add_argument("--task", required=True, help=", ".join(tasks.TASKS))
    parser.add_argument("--force", action="store_true", help="overwrite an existing spec")
    parser.add_argument("--schemas-dir", default=datasets.SCHEMAS_DIR)
    parser.add_argument("--missing-values", default="",
                        help="comma-separated words that mean no value in a number column, "
                        "besides NA, N/A, NaN, null, None and blanks")
    args = parser.parse_args(argv)
    try:
        folder = os.path.join(args.schemas_dir, datasets.check_name(args.name, "NAME"))
        if os.path.exists(os.path.join(folder, datasets.SPEC_FILE)) and not args.force:
            raise ConfigError(f"{folder} already holds a spec: it may be reviewed work; pass "
                              "FORCE=1 (--force) to overwrite it, or choose another NAME")
        files = spans.data_files(args.data_dir)
        dialect = Dialect(csv_check.file_delimiter(files[0]) if files else ",",
                          tuple(m.strip() for m in args.missing_values.split(",") if m.strip()))
        found = spans.find(args.data_dir)
        if found:
            spans.check(found)
        for data_folder in sorted(found.folders.values()) if found else [args.data_dir]:
            csv_check.check_data_dir(data_folder, [], "(no schema yet)",
                                     delimiter=dialect.delimiter, markers=dialect.extra)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    output_dir = os.environ.get("OUTPUT_DIR") or DEFAULT_OUTPUT_DIR
    with console.session(output_dir, "dataset") as log:
        try:
            schema, spec_text, decisions = propose(args.name, os.path.abspath(args.data_dir),
                                                   args.label, args.task, dialect)
        except ConfigError as e:
            console.error(f"error: {e}")
            return 2
        except Exception:
            console.show_tail(log)
            raise
        return _write(folder, args, schema, spec_text, decisions)


def _write(folder: str, args: argparse.Namespace, schema, spec_text: str,
           decisions: list[str]) -> int:
    import tensorflow_data_validation as tfdv

    os.makedirs(folder, exist_ok=True)
    tfdv.write_schema_text(schema, os.path.join(folder, datasets.SCHEMA_FILE))
    with open(os.path.join(folder, datasets.SPEC_FILE), "w", encoding="utf-8") as f:
        f.write(spec_text)
    try:
        datasets.load_spec(folder)
    except ConfigError as e:  # what we wrote must be what the pipeline reads
        console.error(f"error: the written spec does not load: {e}")
        return 1
    print("\n".join(decisions))
    print(f"Wrote {folder}/{datasets.SPEC_FILE} and {datasets.SCHEMA_FILE}: review them, then "
          f"`make run DATASET={args.name} DATA_DIR={args.data_dir}`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
