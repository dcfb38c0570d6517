"""A larger taxi dataset made from the shipped one: N copies of every row with plausible jitter.

Each copy scales a trip's fare, tips, distance and duration by one shared factor (so the tip
rate, and with it the big_tipper label, stays the trip's own), moves its coordinates by up to a
few hundred metres and its timestamp by up to a quarter of an hour; empty cells stay empty and
every value stays inside the curated schema's domains, so the copies pass the AnomalyGate.

    python -m bench.generate --times 100 --out bench/work/data_100x
"""

import argparse
import csv
import glob
import os
import random

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


def generate(times: float, out_dir: str, data_dir: str = SHIPPED_DATA, seed: int = 0) -> int:
    """Writes round(times × source rows) rows as CSV files in out_dir; returns the row count.

    times=1 copies the source rows unchanged; beyond the first copy every row is jittered.
    A fractional `times` (the harness's smoke test) takes the first rows of a copy.
    """
    if times <= 0:
        raise ValueError(f"times={times!r}: expected a positive number of copies")
    header, rows = source_rows(data_dir)
    total = round(times * len(rows))
    os.makedirs(out_dir, exist_ok=True)
    for stale in glob.glob(os.path.join(out_dir, "*.csv")):
        os.remove(stale)
    rng = random.Random(seed)
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
            writer.writerow(row if i < len(rows) else jitter(row, rng))
    finally:
        if f:
            f.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--times", type=float, default=70.0,
                        help="copies of the shipped data (default 70: ~1.05M rows)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    print(f"{generate(args.times, args.out)} rows in {args.out}")


if __name__ == "__main__":
    main()
