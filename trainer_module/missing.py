"""What "missing" means in a CSV cell of a number column, defined once: `make dataset`,
CsvExampleGen, the checks before a run and `make predict` all read cells through `is_missing`.

Exports write gaps in many ways: an empty cell, spaces, or a word (R's NA, pandas' NaN, SQL's
NULL, Python's None). In a column of numbers each of them is a gap, so the column stays a
number column with gaps instead of turning into text. In a text column they stay the words
they are.
"""

MARKERS = ("", "NA", "N/A", "NaN", "null", "None")
_FOLDED = frozenset(m.lower() for m in MARKERS)


def is_missing(cell: str) -> bool:
    """An empty or whitespace-only cell, or one of MARKERS in any case."""
    return cell.strip().lower() in _FOLDED


def is_missing_bytes(cell: bytes) -> bool:
    """`is_missing` for a cell as CsvExampleGen's parser gives it (UTF-8 bytes)."""
    return cell.strip().lower().decode("utf-8", "replace") in _FOLDED
