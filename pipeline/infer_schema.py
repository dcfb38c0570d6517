"""Writes a freshly inferred schema next to the curated one, for review (`make schema`).

The curated `schemas/schema.pbtxt` is what the pipeline imports; this file only shows what
TFDV would infer from the data today, so a reviewer can diff the two before editing the
curated one.
"""

import argparse
import glob
import os
import sys

import tensorflow_data_validation as tfdv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="data", help="folder of CSV files")
    parser.add_argument("--output", default="schemas/inferred_schema.pbtxt")
    args = parser.parse_args(argv)

    csv_files = sorted(glob.glob(os.path.join(args.data_dir, "*.csv")))
    if not csv_files:
        print(f"error: no *.csv files in --data-dir {args.data_dir!r}", file=sys.stderr)
        return 2
    stats = tfdv.generate_statistics_from_csv(data_location=os.path.join(args.data_dir, "*.csv"))
    schema = tfdv.infer_schema(stats)
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    tfdv.write_schema_text(schema, args.output)
    print(f"inferred schema of {len(csv_files)} file(s) written to {args.output}")
    print(f"review it against the curated schema: diff -u schemas/schema.pbtxt {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
