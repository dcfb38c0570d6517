"""What a number in a CSV cell is, defined once: `make dataset`, the data check before a run,
CsvExampleGen and `make predict` read number cells through `parse`, and serving refuses what it
refuses.

A number is finite and within float32's range, which is what a model's features hold. Python
reads "inf", "-Infinity" and "1e999" as numbers; here they are not: a run stops at the data
check naming the file, line and column, and nothing trains on them.

A spreadsheet writes numbers with their cell format: "$5,993", "11%", "1,234.5", "€1,234.50"
(a decimal comma, as in "12,50 €", is not read as one). A column whose cells all fit one format
is read through it: the format's text before and after the digits is removed, thousands
separators dropped, and a percentage divided by 100 (11% is 0.11, as the spreadsheet holds it).
The dataset spec names each such column's format ([csv] formats) for review; a cell that
breaks its column's format stops the run as any other bad number does.
"""

import dataclasses
import math
import re
import struct

# The largest magnitude a float32 holds; a decimal a little above it still rounds to it.
FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32 = struct.Struct("<f")
# What a cell format may put around the digits: a currency symbol before them, or a currency
# symbol or a percent sign after them (with a space or not). Anything else (an id's letters,
# an accounting negative's parentheses) leaves a column text.
_CURRENCY = "$€£¥₹₩₽¢"
_PREFIX = rf"[{_CURRENCY}]?"
_SUFFIX = rf"(?:\s?[{_CURRENCY}%])?"
# A format: the text before, the digits' pattern (thousands grouped with ',', decimals with
# '.'), the text after (a '%' makes it a percentage).
_FORMAT = re.compile(rf"^(?P<prefix>{_PREFIX})(?P<digits>[#0,]*0(?:\.0+)?)(?P<suffix>{_SUFFIX})$")
# A formatted cell: a sign, the text before, digits with thousands separators or without, the
# text after.
_CELL = re.compile(rf"^(?P<sign1>[-+]?)(?P<prefix>{_PREFIX})(?P<sign2>[-+]?)"
                   r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
                   rf"(?P<suffix>{_SUFFIX})$")


@dataclasses.dataclass(frozen=True)
class NumberFormat:
    """A cell format: `prefix` and `suffix` around the digits; thousands: ',' groups them."""

    prefix: str
    suffix: str
    thousands: bool

    @property
    def percent(self) -> bool:
        return self.suffix.strip() == "%"

    def __str__(self) -> str:
        return f"{self.prefix}{'#,##0' if self.thousands else '0'}{self.suffix}"


def parse_format(text: str) -> NumberFormat:
    """The format a spec writes (e.g. "$#,##0", "0%", "#,##0 €").

    Raises:
      ValueError: `text` is not such a format.
    """
    match = _FORMAT.match(text) if isinstance(text, str) else None
    if not match or not (match["prefix"] or match["suffix"] or "," in match["digits"]):
        raise ValueError(f"{text!r} is not a number format: expected text around a digit "
                         "pattern, e.g. \"$#,##0\", \"0.0%\" or \"#,##0 €\"")
    return NumberFormat(match["prefix"], match["suffix"], "," in match["digits"])


def format_of(cell: str) -> NumberFormat | None:
    """The format a formatted number cell is written in ("$5,993" → "$#,##0"); None for a
    plain number or text."""
    match = _CELL.match(cell.strip())
    if not match or (match["sign1"] and match["sign2"]):
        return None
    fmt = NumberFormat(match["prefix"], match["suffix"], "," in match["digits"])
    return fmt if str(fmt) != "0" else None


def parse(cell: str, fmt: NumberFormat | None = None) -> float:
    """The number a cell holds, read through its column's format when it has one.

    Raises:
      ValueError: the cell is not a number (of that format), or not a finite one within
        float32's range; the message quotes the cell and says which.
    """
    text = cell.strip()
    if fmt is None:
        value = float(text)
    else:
        match = _CELL.match(text)
        if (not match or match["prefix"] != fmt.prefix or match["suffix"] != fmt.suffix
                or ("," in match["digits"] and not fmt.thousands)
                or (match["sign1"] and match["sign2"])):
            raise ValueError(f"{cell!r} is not written as the column's format {str(fmt)!r}")
        value = float(match["digits"].replace(",", ""))
        if "-" in (match["sign1"], match["sign2"]):
            value = -value
        if fmt.percent:
            value /= 100
    check_finite(cell, value)
    return value


def check_finite(cell: str, value: float) -> None:
    """Raises ValueError unless `value` (read from `cell`) is finite and within float32."""
    if math.isnan(value):
        return  # NaN is a missing marker where one is allowed (trainer_module/missing.py)
    if not math.isfinite(value):
        raise ValueError(f"{cell!r} is not a finite number")
    try:
        _FLOAT32.pack(value)
    except OverflowError:
        raise ValueError(f"{cell!r} is beyond the largest number a model's features hold "
                         f"({FLOAT32_MAX:.7g})") from None
