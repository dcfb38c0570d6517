"""The CSV check the runner makes before TensorFlow loads: one pass over each data file.

CsvExampleGen reads a folder of CSV files as one split; a file it cannot read, or data the spec
cannot learn from (an unknown class, rows without a label), would otherwise fail minutes into a
run, or train silently on less. Every error names the file, the line and what to do.
"""

import csv
import dataclasses
import glob
import gzip
import os
import re
from collections.abc import Mapping
from typing import IO

from pipeline.errors import ConfigError
from trainer_module import numbers
from trainer_module.dataset_spec import DELIMITERS
from trainer_module.missing import NO_EXTRA, is_missing
from trainer_module.numbers import NumberFormat

# The files CsvExampleGen reads as one split (the pattern of its input config): *.csv, and
# *.csv.gz, which Beam's reader decompresses by the name. Anything else the pattern matches
# stops the check.
CSV_PATTERN = "*.csv*"
GZIP_SUFFIX = ".csv.gz"
CSV_SUFFIXES = (".csv", GZIP_SUFFIX)
BOM = "\ufeff"  # the UTF-8 byte-order mark Excel's "CSV UTF-8" writes first
# The delimiters a spec may name, by name; a header that splits on one of these but not on the
# spec's delimiter is such an export.
DELIMITER_NAMES = dict(zip(DELIMITERS, ("comma", "semicolon", "tab", "pipe"), strict=True))


@dataclasses.dataclass(frozen=True)
class LabelCheck:
    """What the label column of every row must hold.

    column: the raw label column; allowed: its allowed values as CSV text (None: any);
    missing_allowed: rows with an empty label cell are allowed (the spec drops them);
    integer: the column is INT, so '1.0' is the class '1'.
    """

    column: str
    allowed: tuple[str, ...] | None
    missing_allowed: bool
    integer: bool = False


@dataclasses.dataclass(frozen=True)
class Scan:
    header: tuple[str, ...] | None
    rows: int
    missing_labels: int = 0


def csv_files(data_dir: str) -> list[str]:
    """The data files of a folder: CSV text, or the same gzip-compressed."""
    return [p for p in _pattern_files(data_dir) if p.endswith(CSV_SUFFIXES)]


def _pattern_files(data_dir: str) -> list[str]:
    """Every file of the folder that CsvExampleGen's pattern matches, sorted."""
    return sorted(glob.glob(os.path.join(data_dir, CSV_PATTERN)))


def open_text(path: str) -> IO[str]:
    """A data file as CSV text (a .gz file decompressed), for the csv module: no newline
    translation, no byte-order mark."""
    if path.endswith(GZIP_SUFFIX):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def open_bytes(path: str) -> IO[bytes]:
    """A data file's bytes, a .gz file decompressed."""
    return gzip.open(path, "rb") if path.endswith(GZIP_SUFFIX) else open(path, "rb")


def text_bytes(path: str) -> int:
    """The size of a data file's CSV text, or for a gzip file a lower bound: its trailer
    records the size modulo 4 GiB, so the smallest size with that remainder that is not below
    the compressed file's own (CSV text never compresses to more than itself)."""
    compressed = os.path.getsize(path)
    if not path.endswith(GZIP_SUFFIX):
        return compressed
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        remainder = int.from_bytes(f.read(4), "little")
    wraps = max(0, -(-(compressed - remainder) // 2**32))
    return remainder + wraps * 2**32


def header_of(first_line: str, delimiter: str = ",") -> list[str]:
    """A file's first line as the column names CsvExampleGen reads: CSV-parsed (quoted names
    may hold the delimiter), without a leading byte-order mark."""
    return next(csv.reader([first_line.removeprefix(BOM)], delimiter=delimiter), [])


def detect_delimiter(first_line: str) -> str:
    """The delimiter of a header line: the comma, unless the line holds none and another of
    DELIMITER_NAMES splits it."""
    counts = {d: len(header_of(first_line, d)) for d in DELIMITER_NAMES}
    if counts[","] > 1:
        return ","
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 1 else ","


def file_header(path: str, delimiter: str) -> list[str]:
    """A data file's header, as `header_of` reads it."""
    with open_text(path) as f:
        return header_of(f.readline().rstrip("\r\n"), delimiter)


def file_delimiter(path: str) -> str:
    """`detect_delimiter` of a file's header line."""
    with open_bytes(path) as f:
        line = f.readline().decode("utf-8", errors="replace").removeprefix(BOM)
    return detect_delimiter(line.rstrip("\r\n"))


def check_data_dir(data_dir: str, columns: list[str], schema_path: str,
                   label: LabelCheck | None = None, delimiter: str = ",",
                   markers: frozenset[str] = NO_EXTRA,
                   number_columns: Mapping[str, NumberFormat | None] | None = None) -> int:
    """The data dir holds well-formed UTF-8 CSV files that CsvExampleGen can read as one split.

    Every file must have the same header (CsvExampleGen rejects a split whose files differ),
    naming every column of the schema, and every row as many fields as the header; together
    they must hold at least one data row. With `label`, every label cell must hold an allowed
    value. `delimiter` and `markers` (folded extra missing markers) are the spec's [csv].
    Every cell of `number_columns` (column → its format, or None) must be a number as
    trainer_module/numbers.py defines one: finite, and in the column's format.
    Returns the number of rows without a label.
    """
    if not os.path.isdir(data_dir):
        raise ConfigError(f"data_dir={data_dir!r}: no such directory; expected a folder of "
                          "CSV files with a header row")
    matched = _pattern_files(data_dir)
    files = [p for p in matched if p.endswith(CSV_SUFFIXES)]
    strays = [p for p in matched if p not in files]
    if strays:
        raise ConfigError(f"data file {strays[0]!r} is neither *.csv nor *.csv.gz, yet "
                          f"CsvExampleGen reads every {CSV_PATTERN} file of data_dir as CSV: "
                          "move it out of the folder")
    if not files:
        raise ConfigError(f"data_dir={data_dir!r} holds no *.csv or *.csv.gz files: expected "
                          "one or more CSV files with a header row")
    first_header: tuple[str, ...] | None = None
    data_rows = missing_labels = 0
    for path in files:
        scan = _scan(path, label, delimiter, markers, number_columns or {})
        if scan.header is None:
            raise ConfigError(f"data file {path!r} is empty: expected a header row naming "
                              f"the columns {columns}")
        missing = [c for c in columns if c not in scan.header]
        if missing:
            raise ConfigError(f"data file {path!r} lacks column(s) {missing} that the schema "
                              f"{schema_path!r} names; its header is {list(scan.header)}")
        if first_header is None:
            first_header = scan.header
        elif scan.header != first_header:
            raise ConfigError(
                f"data file {path!r} has the header {list(scan.header)}, but {files[0]!r} has "
                f"{list(first_header)}: every CSV file in data_dir={data_dir!r} must have the "
                "same columns in the same order"
            )
        data_rows += scan.rows
        missing_labels += scan.missing_labels
    if data_rows == 0:
        raise ConfigError(f"data_dir={data_dir!r}: its CSV files hold a header but no data "
                          "rows; expected at least one row of data")
    if label and missing_labels and not label.missing_allowed:
        raise ConfigError(
            f"data_dir={data_dir!r}: {missing_labels} of {data_rows} rows have no value in the "
            f"label column {label.column!r}; a row without a label cannot train. Fill them in, "
            "or set missing = \"drop\" under [label] in the dataset spec to leave such rows out "
            "(the run report counts them)")
    return missing_labels


def nameless(header: list[str] | tuple[str, ...]) -> list[int]:
    """The 0-based positions of header cells with no name. Excel writes such columns, empty in
    every row, after a sheet's last used column: they are dropped (and a value in one stops
    the run, naming it)."""
    return [i for i, name in enumerate(header) if not name.strip()]


def _scan(path: str, label: LabelCheck | None, delimiter: str, markers: frozenset[str],
          number_columns: Mapping[str, NumberFormat | None]) -> Scan:

    def decoded_lines(f):
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"data file {path!r}, line {number}: bytes {raw[e.start:e.end]!r} are not "
                    "UTF-8; expected UTF-8 text (re-encode the file, e.g. with "
                    f"`iconv -f {legacy_encoding(raw)} -t utf-8`)"
                ) from None

    try:
        with open_bytes(path) as f:
            reader = csv.reader(decoded_lines(f), delimiter=delimiter)
            header = next(reader, None)
            if not header:
                return Scan(None, 0)
            _check_header(path, header, delimiter)
            unnamed = nameless(header)
            # Formatted columns: every cell parsed. Plain ones: the cells of a row in which
            # something may read as an infinite or float32-overflowing number.
            formatted = [(i, number_columns[name]) for i, name in enumerate(header)
                         if number_columns.get(name)]
            plain = [(i, None) for i, name in enumerate(header)
                     if name in number_columns and not number_columns[name]]
            index = header.index(label.column) if label and label.column in header else None
            allowed = set(label.allowed) if label and label.allowed is not None else None
            rows = missing = 0
            for row in reader:
                if len(row) != len(header):
                    raise ConfigError(
                        f"data file {path!r}, line {reader.line_num}: {len(row)} field(s) "
                        f"where the header has {len(header)}; expected one value (possibly "
                        "empty) per column: is the line cut short or does a value hold an "
                        "unquoted comma?"
                    )
                rows += 1
                held = next((i for i in unnamed if row[i].strip()), None)
                if held is not None:
                    raise ConfigError(
                        f"data file {path!r}, line {reader.line_num}: column {held + 1} of the "
                        f"header has no name but holds {row[held]!r}; give the column a name "
                        "(a column with no name is dropped only when it is empty in every row)")
                check = formatted + plain if plain and _SUSPECT.search(delimiter.join(row)) \
                    else formatted
                for i, fmt in check:
                    _check_number(path, reader.line_num, header[i], row[i], fmt, markers)
                if index is None:
                    continue
                value = row[index]
                if value == "" or (allowed is None and is_missing(value, markers)):  # a number
                    missing += 1
                elif allowed is not None and _label_text(value, label.integer) not in allowed:
                    raise ConfigError(
                        f"data file {path!r}, line {reader.line_num}: label {label.column!r} = "
                        f"{value!r} is not one of the spec's classes {sorted(allowed)}; add "
                        "it to classes under [label] in the dataset spec, or fix the row")
    except (OSError, EOFError, csv.Error) as e:
        raise ConfigError(f"data file {path!r} cannot be read as CSV: {e}") from e
    return Scan(tuple(header), rows, missing)


# Text in a row that may read as an infinite number ("inf", "Infinity") or one beyond
# float32 ("1e39").
_SUSPECT = re.compile(r"inf|\de\+?\d\d", re.IGNORECASE)


def _check_number(path: str, line: int, column: str, cell: str, fmt: NumberFormat | None,
                  markers: frozenset[str]) -> None:
    if is_missing(cell, markers):
        return
    try:
        numbers.parse(cell, fmt)
    except ValueError as e:
        if fmt is None and "finite" not in str(e) and "beyond" not in str(e):
            return  # not a number at all: the schema's type check (ExampleValidator) says so
        raise ConfigError(f"data file {path!r}, line {line}: column {column!r}: {e}; write "
                          "the value as a finite number"
                          + (f" in the format {str(fmt)!r} ([csv] formats in the dataset spec)"
                             if fmt else "") + ", or leave the cell empty (missing)") from None


def legacy_encoding(raw: bytes) -> str:
    """The single-byte encoding a non-UTF-8 export most likely uses: Windows-1252 (Excel's on
    Windows, with its "–", "€" and curly quotes in 0x80-0x9F) wherever the bytes fit it, else
    Latin-1, which any bytes fit."""
    try:
        raw.decode("cp1252")
    except UnicodeDecodeError:
        return "latin1"
    return "cp1252"


def _check_header(path: str, header: list[str], delimiter: str) -> None:
    """Every column has a name of its own, and the header splits on the spec's delimiter."""
    if len(header) == 1:
        found = detect_delimiter(header[0])
        if found != delimiter:
            word, expected = DELIMITER_NAMES[found], DELIMITER_NAMES[delimiter]
            written = "\\t" if found == "\t" else found
            raise ConfigError(
                f"data file {path!r}, line 1: the header {header[0]!r} holds no {expected} but "
                f"{word}s: the file is {word}-separated; set delimiter = \"{written}\" under "
                "[csv] in the dataset spec (`make dataset` writes it for such files)")
    repeated = sorted({name for name in header if name.strip() and header.count(name) > 1})
    if repeated:
        raise ConfigError(f"data file {path!r}, line 1: the header names {repeated} more than "
                          "once; give every column a name of its own")


def _label_text(value: str, integer: bool) -> str:
    """An integer label written as '1.0' is the class '1'."""
    if not integer:
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() else value
