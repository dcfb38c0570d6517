"""The Evaluator's model, loaded as TFMA loads it, with signatures that take their one input
positionally.

TFMA 0.47 (utils/model_util.py, ModelSignaturesDoFn) calls a signature that reads serialized
examples with one positional tensor: `signature(tf.constant(batch))`. A SavedModel's signatures
take keyword arguments only, so each call first fails to bind; TensorFlow writes the whole
batch (up to 1,000 serialized examples) into that TypeError's message before it retries with
the flat signature. For the taxi model that made a 1,000-example call of serving_default cost
22–31 ms instead of 3.5 ms, and the Evaluator makes two such calls per batch (serving_default,
and transform_features for the label). Here each single-input signature binds a positional
argument to its input's name itself, so the first attempt succeeds; outputs are unchanged.

The TFX Evaluator finds this module through its `module_path` parameter and calls
`custom_eval_shared_model` for the candidate and for the baseline.
"""

from collections.abc import Callable
from typing import Any

import tensorflow_model_analysis as tfma


class PositionalSignature:
    """A keyword-only signature with one input, callable with that input positionally."""

    def __init__(self, signature: Any) -> None:
        self._signature = signature
        # TFMA reads the input specs from here (get_input_specs).
        self.structured_input_signature = signature.structured_input_signature
        [self.input_name] = signature.structured_input_signature[1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            return self._signature(**{self.input_name: args[0]})
        return self._signature(*args, **kwargs)


def with_positional_signatures(model: Any) -> Any:
    """`model` (a loaded SavedModel) with each single-input signature wrapped; TFMA looks
    signatures up in `model.signatures` by name, so a dict serves it."""
    signatures = {}
    for name, signature in model.signatures.items():
        inputs = signature.structured_input_signature[1]
        signatures[name] = PositionalSignature(signature) if len(inputs) == 1 else signature
    model.signatures = signatures
    return model


class _Construct:
    """TFMA's construct_fn, then the wrapping; a class so Beam can pickle it for its workers."""

    def __init__(self, construct_fn: Callable[[], Any]) -> None:
        self._construct_fn = construct_fn

    def __call__(self) -> Any:
        return with_positional_signatures(self._construct_fn())


def custom_eval_shared_model(eval_saved_model_path: str, model_name: str,
                             eval_config: tfma.EvalConfig,
                             **kwargs: Any) -> tfma.types.EvalSharedModel:
    """TFMA's default shared model for this path, loaded through `with_positional_signatures`
    (the TFX Evaluator's hook, looked up by this name in `module_path`)."""
    shared = tfma.default_eval_shared_model(eval_saved_model_path=eval_saved_model_path,
                                            model_name=model_name, eval_config=eval_config,
                                            **kwargs)
    loader = shared.model_loader
    return shared._replace(model_loader=tfma.types.ModelLoader(
        construct_fn=_Construct(loader.construct_fn), tags=loader.tags))
