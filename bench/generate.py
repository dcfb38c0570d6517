"""A larger taxi dataset made from the shipped one: N copies of every row with plausible jitter.

Each copy scales a trip's fare, tips, distance and duration by one shared factor (so the tip
rate, and with it the big_tipper label, stays the trip's own), moves its coordinates by up to a
few hundred metres and its timestamp by up to a quarter of an hour; empty cells stay empty and
every value stays inside the curated schema's domains, so the copies pass the AnomalyGate.

Every copy of a trip lands in the split its original lands in: CsvExampleGen splits by a hash of
each example, so a copy is jittered again until its hash falls in the original's split (the
split is computed with CsvExampleGen's own conversion and partition functions). Eval accuracy at
scale then measures trips the model never trained on, not memorized near-duplicates.

    python -m bench.generate --times 100 --out bench/work/data_100x
"""

import argparse
import csv
import glob
import hashlib
import os
import random
from collections.abc import Callable

from pipeline.pipeline_config import DEFAULT_DATA_DIR

SHIPPED_DATA = DEFAULT_DATA_DIR
ROWS_PER_FILE = 250_000
SCALED = ("fare", "tips", "trip_miles")  # floats with two decimals, scaled together
SCALED_INT = ("trip_seconds",)
COORDINATES = {  # column → the schema's domain
    "pickup_latitude": (41.5, 42.5), "dropoff_latitude": (41.5, 42.5),
    "pickup_longitude": (-88.5, -87.0), "dropoff_longitude": (-88.5, -87.0),
}
COORDINATE_JITTER = 0.003  # degrees (~300 m)
SCALE_JITTER = 0.1  # ± fraction
TIMESTAMP_JITTER_S = 900


def source_rows(data_dir: str = SHIPPED_DATA) -> tuple[list[str], list[dict[str, str]]]:
    files = sorted(glob.glob(os.path.join(data_dir, "*.csv")))
    if not files:
        raise FileNotFoundError(f"no CSV files in {data_dir}: expected the shipped taxi data")
    rows, header = [], None
    for path in files:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = header or reader.fieldnames
            rows.extend(reader)
    return list(header), rows


def jitter(row: dict[str, str], rng: random.Random) -> dict[str, str]:
    out = dict(row)
    factor = 1 + rng.uniform(-SCALE_JITTER, SCALE_JITTER)
    for key in SCALED:
        if out[key]:
            out[key] = f"{float(out[key]) * factor:.2f}"
    for key in SCALED_INT:
        if out[key]:
            out[key] = str(round(int(out[key]) * factor))
    for key, (low, high) in COORDINATES.items():
        if out[key]:
            moved = float(out[key]) + rng.uniform(-COORDINATE_JITTER, COORDINATE_JITTER)
            out[key] = f"{min(high, max(low, moved)):.6f}"
    if out["trip_start_timestamp"]:
        shifted = int(out["trip_start_timestamp"]) + rng.randint(-TIMESTAMP_JITTER_S,
                                                                  TIMESTAMP_JITTER_S)
        out["trip_start_timestamp"] = str(max(0, shifted))
    return out


MAX_TRIES = 60  # jitters per copy before giving up: (2/3)^60 ≈ 3e-11 for an eval trip


def split_function(header: list[str], rows: list[dict[str, str]]
                   ) -> Callable[[dict[str, str]], int]:
    """The split (0 train, 1 eval) CsvExampleGen gives a row of these columns: its default 2:1
    hash split of the tf.Example it makes, with the column types it infers from `rows`."""
    from tfx.components.example_gen import base_example_gen_executor, utils
    from tfx.components.example_gen.csv_example_gen import executor as csv_executor
    from tfx_bsl.coders import csv_decoder

    from pipeline.dag import csv_input_config

    inferrer = csv_decoder.ColumnTypeInferrer(header, skip_blank_lines=True)
    accumulator = inferrer.create_accumulator()
    for row in rows:
        accumulator = inferrer.add_input(accumulator, _cells(header, row))
    column_infos = inferrer.extract_output(accumulator)
    output = utils.make_default_output_config(csv_input_config())
    buckets, total = [], 0
    for split in output.split_config.splits:
        total += split.hash_buckets
        buckets.append(total)
    to_example = csv_executor._ParsedCsvToTfExample()  # noqa: SLF001 (TFX's own conversion)

    def split_of(row: dict[str, str]) -> int:
        [example] = to_example.process(_cells(header, row), column_infos)
        return base_example_gen_executor._PartitionFn(  # noqa: SLF001
            example, len(buckets), buckets, output.split_config)

    return split_of


def _cells(header: list[str], row: dict[str, str]) -> list[bytes]:
    """The cells CsvExampleGen parses from the line csv.DictWriter writes for `row`."""
    return [row[name].encode() for name in header]


def generate(times: float, out_dir: str, data_dir: str = SHIPPED_DATA, seed: int = 0) -> int:
    """Writes round(times × source rows) rows as CSV files in out_dir; returns the row count.

    times=1 copies the source rows unchanged; beyond the first copy every row is jittered.
    A fractional `times` (the harness's smoke test) takes the first rows of a copy.
    """
    if times <= 0:
        raise ValueError(f"times={times!r}: expected a positive number of copies")
    header, rows = source_rows(data_dir)
    total = round(times * len(rows))
    stamp = _stamp(times, data_dir, seed)
    stamp_path = os.path.normpath(out_dir) + STAMP_SUFFIX
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if f.read() == stamp:  # the same source, size, seed and generator
                return total
        os.remove(stamp_path)
    os.makedirs(out_dir, exist_ok=True)
    for stale in glob.glob(os.path.join(out_dir, "*.csv")):
        os.remove(stale)
    rng = random.Random(seed)
    split_of = split_function(header, rows) if total > len(rows) else None
    splits: list[int] = []
    writer, f = None, None
    try:
        for i in range(total):
            if i % ROWS_PER_FILE == 0:
                if f:
                    f.close()
                f = open(os.path.join(out_dir, f"part-{i // ROWS_PER_FILE:05d}.csv"), "w",
                         newline="", encoding="utf-8")
                writer = csv.DictWriter(f, fieldnames=header)
                writer.writeheader()
            row = rows[i % len(rows)]
            if i < len(rows):
                if split_of:
                    splits.append(split_of(row))
                writer.writerow(row)
                continue
            writer.writerow(_copy_in_split(row, splits[i % len(rows)], split_of, rng))
    finally:
        if f:
            f.close()
    with open(stamp_path, "w") as f:
        f.write(stamp)
    return total


# Beside the data folder, never in it (the TFX template reads every file of its data dir): what
# the CSV files were made from; a rerun with the same source, size, seed and code reuses them.
STAMP_SUFFIX = ".generated"


def _stamp(times: float, data_dir: str, seed: int) -> str:
    digest = hashlib.sha256(f"{times!r} {seed}".encode())
    for path in [__file__, *sorted(glob.glob(os.path.join(data_dir, "*.csv")))]:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _copy_in_split(row: dict[str, str], split: int, split_of: Callable[[dict[str, str]], int],
                   rng: random.Random) -> dict[str, str]:
    for _ in range(MAX_TRIES):
        copy = jitter(row, rng)
        if split_of(copy) == split:
            return copy
    raise RuntimeError(f"no jittered copy of {row} in {MAX_TRIES} tries fell in split {split}; "
                       "the row has too few values to jitter")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--times", type=float, default=70.0,
                        help="copies of the shipped data (default 70: ~1.05M rows)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    print(f"{generate(args.times, args.out)} rows in {args.out}")


if __name__ == "__main__":
    main()
