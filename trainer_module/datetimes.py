"""Dates and timestamps in CSV cells: the patterns a `datetime` column's values must match.

One pattern per format, used alike by Transform (TensorFlow's RE2 regex ops), `make dataset`
(which picks the role and the format) and the checks: a value that does not match is missing.
The default is ISO-8601: `2016-07-02`, `2017-01-01T06:00:42Z`, `2017-01-01 06:00:42+05:30`.
Other layouts name their fields strftime-style in the spec's `format` key, e.g.
`%m/%d/%Y %H:%M:%S`; the fields are %Y %m %d %H %M %S, anything else is literal text.
"""

import dataclasses
import re

ISO = ""
# Fields a format may name → the digits each matches.
_FIELDS = {"Y": "([0-9]{4})", "m": "([0-9]{1,2})", "d": "([0-9]{1,2})", "H": "([0-9]{1,2})",
           "M": "([0-9]{1,2})", "S": "([0-9]{1,2}(?:[.][0-9]+)?)"}
_REQUIRED = ("Y", "m", "d")
_ISO = ("([0-9]{4})-([0-9]{2})-([0-9]{2})"
        "(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}(?:[.][0-9]+)?))?)?"
        "(?:Z|([+-])([0-9]{2}):?([0-9]{2}))?")
_ISO_GROUPS = {"Y": 1, "m": 2, "d": 3, "H": 4, "M": 5, "S": 6, "sign": 7, "off_h": 8,
               "off_m": 9}
# Formats `make dataset` tries after ISO-8601, in this order.
COMMON_FORMATS = ("%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%m/%d/%Y", "%d/%m/%Y %H:%M:%S",
                  "%d/%m/%Y", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d", "%d.%m.%Y %H:%M:%S", "%d.%m.%Y",
                  "%Y%m%d")


class FormatError(ValueError):
    """A `format` names no date, or a field twice."""


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A whole-value regex and the group of each field in it (sign/off_h/off_m: a UTC
    offset)."""

    regex: str
    groups: dict[str, int]

    def fields(self, value: str) -> dict[str, float] | None:
        """The fields of one value (missing ones 0), or None when it does not parse as a real
        calendar date and time."""
        match = re.fullmatch(self.regex, value.strip())
        if not match:
            return None
        out = {k: float(match.group(i) or 0) if k != "sign" else (match.group(i) or "+")
               for k, i in self.groups.items()}
        if not (1 <= out["m"] <= 12 and 1 <= out["d"] <= 31 and out.get("H", 0) < 24
                and out.get("M", 0) < 60 and out.get("S", 0) < 61):
            return None
        return out


def pattern(format_: str) -> Pattern:
    """The pattern of a spec's `format` (ISO: ISO-8601).

    Raises:
      FormatError: the format lacks %Y, %m or %d, or names a field twice.
    """
    if format_ == ISO:
        return Pattern(_ISO, dict(_ISO_GROUPS))
    parts, groups = [], {}
    for token in re.split(r"(%[A-Za-z])", format_):
        if re.fullmatch(r"%[A-Za-z]", token) and token[1] in _FIELDS:
            if token[1] in groups:
                raise FormatError(f"format {format_!r} names {token} twice")
            groups[token[1]] = len(groups) + 1
            parts.append(_FIELDS[token[1]])
        else:
            parts.append(re.escape(token))
    missing = [f"%{f}" for f in _REQUIRED if f not in groups]
    if missing:
        raise FormatError(f"format {format_!r} has no {', '.join(missing)}: a date needs "
                          "%Y, %m and %d (fields: %Y %m %d %H %M %S)")
    return Pattern("".join(parts), groups)


def parses(values: list[str], format_: str, minimum: float) -> bool:
    """At least `minimum` of these (non-empty) values parse with the format; it stops reading
    at the first value past the misses that allows."""
    compiled = pattern(format_)
    allowed = (1.0 - minimum) * len(values)
    misses = 0
    for value in values:
        misses += compiled.fields(value) is None
        if misses > allowed:
            return False
    return bool(values)


def detect(values: list[str], minimum: float) -> str | None:
    """The first format (ISO first, then COMMON_FORMATS) that parses at least `minimum` of the
    values; None when none does."""
    return next((f for f in (ISO, *COMMON_FORMATS) if parses(values, f, minimum)), None)
