"""What a span brings that the schema does not hold, where that is ordinary, not an error.

A daily export changes in small ways that must not stop a run:
- a category column gains values its schema domain does not list (a new cab company). TFDV
  tolerates them up to the schema's own `distribution_constraints.min_domain_mass` (the share
  of values that must lie in the domain; `make dataset` writes it from the data): below that
  share of new values ExampleValidator finds no anomaly, and this module names them for the
  run summary and the report; past it TFDV's anomaly stops the run, and the gate's message
  says the share (`new_values`).
- a column the spec ignores fills up, empties out or changes type: ImportSchemaGen marks it
  DISABLED, so nothing validates or parses it, and this module notes the change, since the
  column may be worth a role now (`ignored_changes`).

Both read TFDV's statistics protos, one per split (StatisticsGen's `Split-train`, ...).
"""

import dataclasses
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

# How many of a column's new values a note names (the most frequent first).
SHOWN_VALUES = 3
# An ignored column's filled share moving by this much from the previous span is a change
# worth a note (besides filling up from nothing, emptying out, and a new type).
FILL_CHANGE = 0.2
_TYPE_NAMES = {schema_pb2.BYTES: "text", schema_pb2.INT: "integers", schema_pb2.FLOAT: "numbers"}
_STATISTICS_TYPES = {statistics_pb2.FeatureNameStatistics.INT: schema_pb2.INT,
                     statistics_pb2.FeatureNameStatistics.FLOAT: schema_pb2.FLOAT,
                     statistics_pb2.FeatureNameStatistics.STRING: schema_pb2.BYTES,
                     statistics_pb2.FeatureNameStatistics.BYTES: schema_pb2.BYTES}

Statistics = Mapping[str, statistics_pb2.DatasetFeatureStatisticsList]  # split → statistics


@dataclasses.dataclass(frozen=True)
class NewValues:
    """A category column's values outside its schema domain in one split."""

    column: str
    split: str
    share: float  # of the column's values in that split
    tolerance: float  # the share the schema tolerates: 1 - min_domain_mass
    values: tuple[str, ...]  # the most frequent new values, at most SHOWN_VALUES
    count: int  # how many distinct new values there are

    @property
    def stops(self) -> bool:
        """Past the tolerance: TFDV reports an anomaly and the gate stops the run."""
        return self.share > self.tolerance

    def describe(self, split: bool = True) -> str:
        """The column, the share and the tolerance; `split`: name the split too."""
        shown = ", ".join(repr(v) for v in self.values)
        where = f" in the {self.split} split" if split else ""
        return (f"{self.column}: {self.share:.1%} of the values{where} are new to the schema "
                f"({shown}{', …' if self.count > len(self.values) else ''}); the schema "
                f"tolerates {self.tolerance:.1%}")

    def as_dict(self) -> dict:
        return {"split": self.split, "share": round(self.share, 6),
                "tolerance": round(self.tolerance, 6), "values": list(self.values),
                "distinct": self.count, "stops": self.stops}


@dataclasses.dataclass(frozen=True)
class IgnoredChange:
    """A column the spec ignores whose values changed: filled share and type, now and (when
    there is one) in the previous span."""

    column: str
    filled: float
    kind: str | None  # the values' type now ("text", "integers", "numbers"), None if empty
    schema_kind: str
    previous_filled: float | None = None

    def describe(self) -> str:
        now = (f"{self.filled:.1%} of the rows hold a value" if self.kind is None
               or self.filled == 0 else f"{self.filled:.1%} of the rows hold {self.kind}")
        was = (f", against {self.previous_filled:.1%} in the previous span"
               if self.previous_filled is not None else "")
        schema = (f" (the schema says {self.schema_kind})"
                  if self.kind not in (None, self.schema_kind) else "")
        return (f"{self.column} (ignored): {now}{was}{schema}; the run does not read it: give "
                "it a role in spec.toml if it is worth one now")

    @classmethod
    def from_dict(cls, column: str, values: dict) -> "IgnoredChange":
        """The change `as_dict` wrote (DriftValidator's drift.json)."""
        return cls(column, values["filled"], values["type"], values["schema_type"],
                   values["previous_filled"])

    def as_dict(self) -> dict:
        return {"filled": round(self.filled, 6), "type": self.kind,
                "schema_type": self.schema_kind,
                "previous_filled": None if self.previous_filled is None
                else round(self.previous_filled, 6)}


def features_by_name(statistics: statistics_pb2.DatasetFeatureStatisticsList
                     ) -> dict[str, statistics_pb2.FeatureNameStatistics]:
    """Each column's statistics, by the column's name (its path's first step)."""
    return {(f.path.step[0] if f.path.step else f.name): f
            for dataset in statistics.datasets for f in dataset.features}


def value_counts(statistics: statistics_pb2.DatasetFeatureStatisticsList,
                 column: str) -> dict[str, int]:
    """A string column's count of each value (TFDV's rank histogram); {} for other columns."""
    stats = features_by_name(statistics).get(column)
    if stats is None or not stats.HasField("string_stats"):
        return {}
    return {b.label: int(b.sample_count) for b in stats.string_stats.rank_histogram.buckets}


def domains(schema: schema_pb2.Schema) -> dict[str, set[str]]:
    """Each string feature's domain values: its own, or the top-level one it names."""
    shared = {d.name: set(d.value) for d in schema.string_domain}
    domains = {}
    for feature in schema.feature:
        if feature.HasField("string_domain"):
            domains[feature.name] = set(feature.string_domain.value)
        elif feature.HasField("domain") and feature.domain in shared:
            domains[feature.name] = shared[feature.domain]
    return domains


def new_values(statistics: Statistics, schema: schema_pb2.Schema) -> list[NewValues]:
    """Every category column of `schema` with values outside its domain, per split, by column
    and split.

    TFDV compares a split's value counts (the rank histogram) with the domain, so does this."""
    listed = domains(schema)
    found = []
    for feature in sorted(schema.feature, key=lambda f: f.name):
        if feature.name not in listed or feature.lifecycle_stage == schema_pb2.DISABLED:
            continue
        mass = (feature.distribution_constraints.min_domain_mass
                if feature.HasField("distribution_constraints") else 1.0)
        for split, split_statistics in sorted(statistics.items()):
            counts = value_counts(split_statistics, feature.name)
            total = sum(counts.values())
            new = sorted(((n, value) for value, n in counts.items()
                          if value not in listed[feature.name]), key=lambda e: (-e[0], e[1]))
            if new:
                found.append(NewValues(feature.name, split, sum(n for n, _ in new) / total,
                                       round(1.0 - mass, 6),
                                       tuple(value for _, value in new[:SHOWN_VALUES]),
                                       len(new)))
    return found


def largest_per_column(found: list[NewValues]) -> list[NewValues]:
    """Of `new_values`' entries, each column's in the split where the share is largest."""
    largest: dict[str, NewValues] = {}
    for entry in found:
        if entry.column not in largest or entry.share > largest[entry.column].share:
            largest[entry.column] = entry
    return [largest[c] for c in sorted(largest)]


def _filled(statistics: Statistics, column: str) -> tuple[float, int | None]:
    """(share of the rows with a value, the values' schema type or None) over every split.

    CsvExampleGen writes an empty cell as the feature with no value, which TFDV counts as
    present: a single-valued column's values are its filled rows."""
    rows = filled = 0
    kind = None
    for split_statistics in statistics.values():
        rows += sum(d.num_examples for d in split_statistics.datasets)
        stats = features_by_name(split_statistics).get(column)
        if stats is None:
            continue
        which = stats.WhichOneof("stats")
        values = int(getattr(stats, which).common_stats.tot_num_values) if which else 0
        filled += values
        if values:
            kind = _STATISTICS_TYPES.get(stats.type)
    return (filled / rows if rows else 0.0), kind


def ignored_changes(statistics: Statistics, schema: schema_pb2.Schema,
                    previous: Statistics | None = None) -> list[IgnoredChange]:
    """Each DISABLED (ignored) column whose values changed: a type the schema does not say,
    or, against the previous span's statistics, filled from nothing, emptied, or filled by a
    share FILL_CHANGE or more apart."""
    found = []
    for feature in schema.feature:
        if feature.lifecycle_stage != schema_pb2.DISABLED:
            continue
        filled, kind = _filled(statistics, feature.name)
        before = _filled(previous, feature.name)[0] if previous is not None else None
        moved = before is not None and ((before == 0) != (filled == 0)
                                        or abs(filled - before) >= FILL_CHANGE)
        retyped = kind is not None and kind != feature.type
        if moved or retyped:
            found.append(IgnoredChange(feature.name, filled, _TYPE_NAMES.get(kind),
                                       _TYPE_NAMES.get(feature.type, "?"), before))
    return found
