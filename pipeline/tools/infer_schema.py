"""Writes a freshly inferred schema next to a dataset's curated one, for review (`make schema`).

The curated `schemas/<name>/schema.pbtxt` is what the pipeline imports; this file only shows
what TFDV would infer from the data today, so a reviewer can diff the two before editing the
curated one. The data is checked and read as `make run` reads it (the spec's delimiter and
missing markers, gzip files, quoted line breaks), so the two schemas describe the same values.
"""

import argparse
import os
import sys

from pipeline import csv_check, datasets
from pipeline.errors import ConfigError
from pipeline.spans import folders as spans
from pipeline.tools import bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=datasets.DEFAULT_DATASET,
                        help="a name under schemas/ (default: taxi)")
    parser.add_argument("--data-dir", help="folder of CSV files (default: data/<dataset>)")
    args = parser.parse_args(argv)
    try:
        spec, curated = datasets.load_spec(args.dataset)
        data_dir = args.data_dir or datasets.shipped_data_dir(args.dataset)
        dialect = bootstrap.Dialect(spec.delimiter, spec.missing_values)
        found = spans.find(data_dir)
        if found:
            spans.check(found)
        for folder in sorted(found.folders.values()) if found else [data_dir]:
            csv_check.check_data_dir(folder, [], "(none: make schema infers one)",
                                     delimiter=dialect.delimiter, markers=dialect.extra)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    files = spans.data_files(data_dir)
    header = csv_check.file_header(files[0], dialect.delimiter)
    names = [name for name in header if name.strip()]  # a spreadsheet's empty columns dropped
    numbers = {f.name for f in curated.feature if f.type in (schema_pb2.INT, schema_pb2.FLOAT)}
    gaps = [i for i, name in enumerate(names) if name in numbers]
    schema = tfdv.infer_schema(bootstrap.csv_statistics(
        data_dir, names, gaps, dialect, csv_check.nameless(header),
        [spec.number_format(name) for name in names], parts=False).whole)
    folder = datasets.dataset_dir(args.dataset)
    output = os.path.join(folder, "inferred_schema.pbtxt")
    tfdv.write_schema_text(schema, output)
    print(f"inferred schema of {len(files)} file(s) written to {output}")
    print(f"review it against the curated schema: diff -u {folder}/{datasets.SCHEMA_FILE} "
          f"{output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
