"""A data dir whose sub-folders are spans: `span-1/`, `span-2/`, … or dated `2026-11-01/`.

TFX reads a span through CsvExampleGen's own span support: the input split's pattern names the
folder with `{SPAN}` (or `{YYYY}-{MM}-{DD}`), TFX's driver resolves it, and the span is recorded
on the Examples artifact. This module finds the layout before anything runs, picks the span a
run reads (the newest, or `SPAN`), and checks what TFX would otherwise read without a word:
spans with other columns, empty span folders, missing span numbers, a `SPAN` that is not there.
A flat folder of CSV files is one span, as before.
"""

import dataclasses
import datetime
import os
import re

from pipeline import csv_check
from pipeline.errors import ConfigError
from trainer_module.dataset_spec import SPAN_LAYOUTS

NUMBERED, DATED = SPAN_LAYOUTS
_FOLDER = {NUMBERED: re.compile(r"^span-(\d+)$"), DATED: re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")}
# The split pattern's folder part, in TFX's span specs (tfx/components/example_gen/utils.py).
FOLDER_PATTERN = {NUMBERED: "span-{SPAN}", DATED: "{YYYY}-{MM}-{DD}"}
_EPOCH = datetime.date(1970, 1, 1)


@dataclasses.dataclass(frozen=True)
class Spans:
    """The spans of a data dir: layout (NUMBERED or DATED) and span number → folder. A dated
    folder's span number is its days since 1970-01-01, TFX's own rule for date specs."""

    data_dir: str
    layout: str
    folders: dict[int, str]

    @property
    def newest(self) -> int:
        return max(self.folders)

    @property
    def pattern(self) -> str:
        """CsvExampleGen's split pattern over every span."""
        return pattern(self.layout)

    def name(self, span: int) -> str:
        """The span's folder name ("span-3", "2026-11-01")."""
        return os.path.basename(self.folders[span])

    def choose(self, span: str | int | None) -> int:
        """The span a run reads: `span` (a number, or a date for dated spans), else the newest.

        Raises:
          ConfigError: no such span.
        """
        if span in (None, ""):
            return self.newest
        number = _span_number(self.layout, str(span))
        if number not in self.folders:
            raise ConfigError(
                f"SPAN={span!r}: data_dir={self.data_dir!r} has no such span; its spans are "
                f"{', '.join(self.name(s) for s in sorted(self.folders))} (SPAN= takes "
                + ("a span number, e.g. SPAN=1" if self.layout == NUMBERED
                   else "a date, e.g. SPAN=" + self.name(self.newest)) + ")")
        return number


def pattern(layout: str) -> str:
    """CsvExampleGen's split pattern over every span folder of `layout`."""
    return f"{FOLDER_PATTERN[layout]}/{csv_check.CSV_PATTERN}"


def find(data_dir: str) -> Spans | None:
    """The data dir's spans, or None for a flat folder of CSV files.

    Raises:
      ConfigError: span folders beside CSV files, two layouts mixed, a folder that is neither,
        or a numbered span missing between the first and the last.
    """
    if "://" in data_dir or not os.path.isdir(data_dir):
        return None
    folders = sorted(e.name for e in os.scandir(data_dir) if e.is_dir()
                     and not e.name.startswith("."))
    layouts = {layout for name in folders for layout, rule in _FOLDER.items()
               if rule.match(name)}
    if not layouts:
        return None
    if csv_check.csv_files(data_dir):
        raise ConfigError(f"data_dir={data_dir!r} holds CSV files beside span folders "
                          f"({', '.join(folders[:3])}): put every CSV file in a span folder, "
                          "or use a flat folder without span folders")
    if len(layouts) > 1:
        raise ConfigError(f"data_dir={data_dir!r} mixes numbered (span-N) and dated "
                          "(YYYY-MM-DD) span folders: use one layout")
    [layout] = layouts
    strays = [name for name in folders if not _FOLDER[layout].match(name)]
    if strays:
        raise ConfigError(f"data_dir={data_dir!r}: folder {strays[0]!r} is not a span folder "
                          f"like {FOLDER_PATTERN[layout].replace('{SPAN}', 'N')}: rename or "
                          "move it")
    spans = Spans(data_dir, layout, {_span_number(layout, name): os.path.join(data_dir, name)
                                     for name in folders})
    if layout == NUMBERED:
        missing = sorted(set(range(min(spans.folders), spans.newest + 1)) - set(spans.folders))
        if missing:
            raise ConfigError(f"data_dir={data_dir!r}: span(s) {missing} are missing between "
                              f"span-{min(spans.folders)} and span-{spans.newest}; a gap is a "
                              "lost export: restore it, or renumber the spans")
    return spans


def check(spans: Spans) -> None:
    """Every span folder holds CSV files, all with the first span's header.

    Raises:
      ConfigError: naming the span and, for a header that differs, the columns.
    """
    first_header, first_name = None, ""
    for number in sorted(spans.folders):
        files = csv_check.csv_files(spans.folders[number])
        if not files:
            raise ConfigError(f"span folder {spans.folders[number]!r} holds no *.csv or "
                              "*.csv.gz file: remove the empty span, or add its export")
        with csv_check.open_text(files[0]) as f:
            first_line = f.readline().rstrip("\r\n")
        header = csv_check.header_of(first_line, csv_check.detect_delimiter(first_line))
        if first_header is None:
            first_header, first_name = header, spans.name(number)
        elif header != first_header:
            added = [c for c in header if c not in first_header]
            lost = [c for c in first_header if c not in header]
            raise ConfigError(
                f"span {spans.name(number)!r} has the header {header}, but span {first_name!r} "
                f"has {first_header}"
                + (f" (new: {added})" if added else "") + (f" (missing: {lost})" if lost else "")
                + ": every span must have the same columns in the same order")


def _span_number(layout: str, text: str) -> int:
    if layout == NUMBERED:
        match = re.fullmatch(r"(?:span-)?(\d+)", text)
        if not match:
            raise ConfigError(f"SPAN={text!r}: expected a span number, e.g. SPAN=2")
        return int(match.group(1))
    try:
        return (datetime.date.fromisoformat(text) - _EPOCH).days
    except ValueError:
        if text.isdigit():
            return int(text)
        raise ConfigError(f"SPAN={text!r}: expected a date YYYY-MM-DD (or its span number, "
                          "days since 1970-01-01)") from None


def data_files(data_dir: str) -> list[str]:
    """The CSV files of every span, oldest span first, or of the flat folder.

    Raises:
      ConfigError: as `find`.
    """
    found = find(data_dir)
    if found is None:
        return csv_check.csv_files(data_dir)
    return [path for span in sorted(found.folders)
            for path in csv_check.csv_files(found.folders[span])]
