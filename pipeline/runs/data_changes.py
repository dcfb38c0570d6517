"""What the run's data brought that did not stop it, read back from the run's artifacts: new
category values within the schema's tolerance, and ignored columns that changed
(pipeline/spans/changes.py measures both).

The run summary prints them, the report shows them and `summary.json` beside the report holds
them, so a daily run says what moved even when it trains and pushes.
"""

import dataclasses

from pipeline import names
from pipeline.runs import run_summary


@dataclasses.dataclass(frozen=True)
class DataChanges:
    new_values: list  # changes.NewValues, by column, each in the split where it is largest
    ignored: list  # changes.IgnoredChange, by column

    def lines(self) -> list[str]:
        """One line per change, as the terminal and the report say it."""
        return ([f"new values: {n.describe()}"
                 + (" — past it: the run stopped" if n.stops else " — reported, not a stop")
                 for n in self.new_values]
                + [f"ignored column: {c.describe()}" for c in self.ignored])

    def as_dict(self) -> dict:
        return {"new_values": {n.column: n.as_dict() for n in self.new_values},
                "ignored_columns": {c.column: c.as_dict() for c in self.ignored}}


def read(summary: run_summary.RunSummary, by_split: dict | None = None) -> DataChanges | None:
    """The run's data changes, or None when its statistics or schema are not there (the run
    stopped before them). `by_split`: StatisticsGen's statistics per split, when the caller has
    read them already."""
    statistics = summary.output(names.STATISTICS_GEN, names.STATISTICS)
    schema = summary.output(names.SCHEMA_GEN, names.SCHEMA)
    if statistics is None or schema is None:
        return None
    # TensorFlow and TFX load only once there is a run to read.
    from tfx.types import artifact_utils
    from tfx.utils import io_utils

    from pipeline.components import anomaly_gate
    from pipeline.spans import changes, drift_validator

    if by_split is None:
        by_split = anomaly_gate.split_statistics(statistics.uri, artifact_utils.decode_split_names(
            statistics.properties["split_names"].string_value))
    schema_proto = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema.uri))
    # Against the schema, over every split; against the previous span (the validator's
    # measure, of the training splits) where the run had one.
    ignored = {c.column: c for c in changes.ignored_changes(by_split, schema_proto)}
    drift = summary.output(names.DRIFT_VALIDATOR, names.DRIFT_REPORT)
    measured = (drift_validator.read_drift(drift.uri).get("ignored") or {}) if drift else {}
    ignored.update({column: changes.IgnoredChange.from_dict(column, values)
                    for column, values in measured.items()})
    return DataChanges(changes.largest_per_column(changes.new_values(by_split, schema_proto)),
                       [ignored[c] for c in sorted(ignored)])
