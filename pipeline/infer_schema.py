"""Writes a freshly inferred schema next to a dataset's curated one, for review (`make schema`).

The curated `schemas/<name>/schema.pbtxt` is what the pipeline imports; this file only shows
what TFDV would infer from the data today, so a reviewer can diff the two before editing the
curated one.
"""

import argparse
import os
import sys

from pipeline import csv_check, datasets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=datasets.DEFAULT_DATASET,
                        help="a name under schemas/ (default: taxi)")
    parser.add_argument("--data-dir", help="folder of CSV files (default: data/<dataset>)")
    args = parser.parse_args(argv)
    folder = datasets.dataset_dir(args.dataset)
    data_dir = args.data_dir or datasets.shipped_data_dir(args.dataset)
    files = csv_check.csv_files(data_dir)
    if not files:
        print(f"error: no *.csv or *.csv.gz files in {data_dir!r}: set DATA_DIR",
              file=sys.stderr)
        return 2
    import tensorflow_data_validation as tfdv

    stats = tfdv.generate_statistics_from_csv(data_location=os.path.join(data_dir,
                                                                          csv_check.CSV_PATTERN))
    schema = tfdv.infer_schema(stats)
    output = os.path.join(folder, "inferred_schema.pbtxt")
    os.makedirs(folder, exist_ok=True)
    tfdv.write_schema_text(schema, output)
    print(f"inferred schema of {len(files)} file(s) written to {output}")
    print(f"review it against the curated schema: diff -u {folder}/{datasets.SCHEMA_FILE} "
          f"{output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
