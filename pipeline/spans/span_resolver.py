"""Older spans from the store: a window's Examples, and the previous span's statistics.

CsvExampleGen records the span it read as the Examples artifact's `span` custom property (TFX's
ExampleGen driver), which TFX's legacy SpanRangeStrategy reads; TFX's newer span-range ops
(`static_range`, `rolling_range`) read the `span` *property* instead, which ExampleGen leaves
at 0, and StatisticsGen copies that 0 onto its statistics. This strategy reads the custom
property, as SpanRangeStrategy does, and also keeps only the newest Examples of each span (a
span read again after its files changed is a new artifact of the same span), as the span-range
ops' latest-version rule does. A statistics artifact is found by lineage: the output of the
StatisticsGen execution that read the chosen Examples.

A span the run needs and the store lacks fails the step, naming it: a window is never quietly
shorter (the local runner reads such spans first, pipeline/spans/intake.py).
"""

from typing import Any

from ml_metadata.proto import metadata_store_pb2
from tfx import types
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.components.common.resolver import Resolver, ResolverStrategy
from tfx.types import standard_artifacts
from tfx.types.channel import Channel

from pipeline import names

SPANS_KEY = "spans"  # the strategy's config: the span numbers to resolve, ascending


class MissingSpanError(RuntimeError):
    """A span the run reads from the store is not there."""


def span_of(artifact: types.Artifact) -> int:
    """The span CsvExampleGen recorded on an Examples artifact."""
    return artifact.get_int_custom_property(example_gen_utils.SPAN_PROPERTY_NAME)


class SpanStrategy(ResolverStrategy):
    """The newest Examples of each span in `spans`, and (with a `statistics` input) the
    statistics StatisticsGen computed from each."""

    def __init__(self, spans: list[int]):
        self._spans = list(spans)

    def resolve_artifacts(self, store, input_dict: dict[str, list[types.Artifact]]
                          ) -> dict[str, list[types.Artifact]]:
        newest: dict[int, types.Artifact] = {}
        for artifact in input_dict.get(names.EXAMPLES, []):
            span = span_of(artifact)
            if span in self._spans and (span not in newest or artifact.id > newest[span].id):
                newest[span] = artifact
        missing = [s for s in self._spans if s not in newest]
        if missing:
            raise MissingSpanError(
                f"span(s) {missing} have no Examples in the store: run the pipeline on each "
                "(SPAN=<span>), or let the local runner read them first")
        examples = [newest[s] for s in self._spans]
        result = {names.EXAMPLES: examples}
        if names.STATISTICS in input_dict:
            by_id = {a.id: a for a in input_dict[names.STATISTICS]}
            result[names.STATISTICS] = [_statistics_of(store, e, by_id) for e in examples]
        return result


def _statistics_of(store: Any, examples: types.Artifact,
                   statistics: dict[int, types.Artifact]) -> types.Artifact:
    """The newest statistics artifact an execution computed from `examples`."""
    readers = [e.execution_id for e in store.get_events_by_artifact_ids([examples.id])
               if e.type == metadata_store_pb2.Event.INPUT]
    written = [e.artifact_id for e in store.get_events_by_execution_ids(readers)
               if e.type == metadata_store_pb2.Event.OUTPUT and e.artifact_id in statistics]
    if not written:
        raise MissingSpanError(f"span {span_of(examples)}'s Examples ({examples.uri}) have no "
                               "statistics in the store: run StatisticsGen on the span")
    return statistics[max(written)]


def span_resolver(node_id: str, spans: tuple[int, ...], example_gen: Any,
                  statistics_gen: Any = None) -> Resolver:
    """A resolver of `spans`' Examples (and statistics) from earlier and this run's outputs.
    It runs after `example_gen` (and `statistics_gen`), so this run's span is there too."""
    channels = {names.EXAMPLES: Channel(type=standard_artifacts.Examples,
                                        producer_component_id=example_gen.id,
                                        output_key=names.EXAMPLES)}
    if statistics_gen is not None:
        channels[names.STATISTICS] = Channel(type=standard_artifacts.ExampleStatistics,
                                             producer_component_id=statistics_gen.id,
                                             output_key=names.STATISTICS)
    resolver = Resolver(strategy_class=SpanStrategy, config={SPANS_KEY: list(spans)},
                        **channels).with_id(node_id)
    resolver.add_upstream_node(statistics_gen or example_gen)
    return resolver
