"""The Evaluator's baseline: the newest blessed model trained before the candidate.

TFX's LatestBlessedModelStrategy returns the newest blessed model, which after a successful run
is the candidate itself. A rerun of an unchanged pipeline then hands the Evaluator a new
baseline (the cached candidate), so the Evaluator runs again and the Pusher pushes the same
model as a new version. Resolving the baseline relative to the candidate (blessed models with a
smaller MLMD id, i.e. registered before it) gives the Evaluator the same inputs on every rerun:
everything is served from the cache, and a new model is still compared with the last blessed
one before it. A blessed model trained for another label or feature set is no baseline: it is
skipped, with the reason (pipeline/components/baselines.py).

Kubeflow Pipelines v2 and Vertex compile only TFX's built-in resolver strategies; runners for
them use LatestBlessedModelStrategy.
"""

from absl import logging
from tfx import types
from tfx.components.evaluator import constants as evaluator_constants
from tfx.dsl.components.common.resolver import Resolver, ResolverStrategy
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)
from tfx.types import standard_artifacts
from tfx.types.channel import Channel

from pipeline import names
from pipeline.components import baselines

MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
CANDIDATE_KEY = "candidate"


class BlessedBeforeCandidateStrategy(ResolverStrategy):
    """Newest blessed Model whose id is below the candidate's, with its ModelBlessing, when it
    was trained for the same label and features (pipeline/components/baselines.py); else none."""

    def resolve_artifacts(
        self, store, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]]:
        candidates = input_dict.get(CANDIDATE_KEY, [])
        result = {MODEL_KEY: [], BLESSING_KEY: [], CANDIDATE_KEY: list(candidates)}
        if not candidates:
            return result
        blessed_by_model = {
            b.get_int_custom_property(evaluator_constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY): b
            for b in input_dict.get(BLESSING_KEY, [])
            if b.get_int_custom_property(evaluator_constants.ARTIFACT_PROPERTY_BLESSED_KEY) == 1
        }
        models = {m.id: m for m in input_dict.get(MODEL_KEY, []) if m.id in blessed_by_model}
        baseline, skipped = baselines.comparable_baseline(
            store, max(a.id for a in candidates), set(models))
        if skipped:
            logging.warning("Baseline skipped: %s", skipped)
        if baseline is not None:
            result[MODEL_KEY] = [models[baseline]]
            result[BLESSING_KEY] = [blessed_by_model[baseline]]
        return result


def baseline_resolver(candidate: types.BaseChannel, portable: bool = False) -> Resolver:
    """The resolver node feeding the Evaluator's `baseline_model`.

    portable=True builds TFX's LatestBlessedModelStrategy resolver, the one Kubeflow/Vertex
    compile; otherwise the candidate-relative strategy above.
    """
    channels = {
        MODEL_KEY: Channel(type=standard_artifacts.Model),
        BLESSING_KEY: Channel(type=standard_artifacts.ModelBlessing),
    }
    if portable:
        strategy = LatestBlessedModelStrategy
    else:
        strategy = BlessedBeforeCandidateStrategy
        channels[CANDIDATE_KEY] = candidate
    return Resolver(strategy_class=strategy, **channels).with_id(names.BASELINE_RESOLVER)


def latest_blessed_model() -> Resolver:
    """The resolver node feeding the Trainer's `base_model` for warm start: the newest blessed
    model when the Trainer starts (no candidate exists yet)."""
    return Resolver(strategy_class=LatestBlessedModelStrategy,
                    **{MODEL_KEY: Channel(type=standard_artifacts.Model),
                       BLESSING_KEY: Channel(type=standard_artifacts.ModelBlessing)},
                    ).with_id(names.WARM_START_RESOLVER)
