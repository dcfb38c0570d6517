"""What "missing" means in a CSV cell of a number column, defined once: `make dataset`,
CsvExampleGen, the checks before a run and `make predict` all read cells through `is_missing`.

Exports write gaps in many ways: an empty cell, spaces, or a word (R's NA, pandas' NaN, SQL's
NULL, Python's None). In a column of numbers each of them is a gap, so the column stays a
number column with gaps instead of turning into text. In a text column they stay the words
they are. A dataset spec's `missing_values` ([csv]) adds its own markers to these.
"""

from collections.abc import Iterable

MARKERS = ("", "NA", "N/A", "NaN", "null", "None")
_FOLDED = frozenset(m.lower() for m in MARKERS)
NO_EXTRA: frozenset[str] = frozenset()


def folded(extra: Iterable[str]) -> frozenset[str]:
    """A spec's own markers (its `missing_values`) in the form `is_missing` compares."""
    return frozenset(m.strip().lower() for m in extra)


def is_missing(cell: str, extra: frozenset[str] = NO_EXTRA) -> bool:
    """An empty or whitespace-only cell, or one of MARKERS or of `folded` extra markers in any
    case."""
    text = cell.strip().lower()
    return text in _FOLDED or text in extra


def is_missing_bytes(cell: bytes, extra: frozenset[str] = NO_EXTRA) -> bool:
    """`is_missing` for a cell as CsvExampleGen's parser gives it (UTF-8 bytes)."""
    return is_missing(cell.decode("utf-8", "replace"), extra)
