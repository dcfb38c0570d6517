"""Which blessed model a candidate may be compared with, read from ML Metadata.

A baseline is the newest blessed model of the same pipeline registered before the candidate,
and only if it was trained for the same model contract: the dataset spec's label and features,
as its Trainer received them in custom_config. A model trained on another label rule, task or
feature set scores a different question, so comparing the two would bless or reject for the
wrong reason: such a baseline is skipped, with the reason, and the value thresholds alone
decide. The resolver (pipeline/components/baseline_resolver.py) and the run summary use these
functions, so what is compared and what the summary says come from one place.
"""

import json

from ml_metadata.proto import metadata_store_pb2

from pipeline import names
from trainer_module.keys import DATASET_SPEC_KEY


def model_contract(store, model_id: int) -> dict | None:
    """The label and features the model was trained for (None: nothing recorded)."""
    events = [e for e in store.get_events_by_artifact_ids([model_id])
              if e.type == metadata_store_pb2.Event.OUTPUT]
    if not events:
        return None
    [execution] = store.get_executions_by_id([events[0].execution_id])
    if names.CUSTOM_CONFIG not in execution.custom_properties:
        return None
    config = json.loads(execution.custom_properties[names.CUSTOM_CONFIG].string_value or "{}")
    spec = (config or {}).get(DATASET_SPEC_KEY)
    return {"label": spec.get("label"), "features": spec.get("features")} if spec else None


def contract_difference(candidate: dict | None, baseline: dict | None) -> str | None:
    """Why the two models are not comparable, in words; None when they are."""
    if candidate is None or baseline is None:
        return "no dataset spec is recorded for " + ("the candidate" if candidate is None
                                                     else "the baseline")
    reasons = []
    old_label, new_label = baseline["label"], candidate["label"]
    for key in ("task", "column", "classes", "rule", "missing", "loss"):
        if old_label.get(key) != new_label.get(key):
            reasons.append(f"label {key} {_text(old_label.get(key))} → "
                           f"{_text(new_label.get(key))}")
    old, new = baseline["features"], candidate["features"]
    for what, columns in (("added", sorted(set(new) - set(old))),
                          ("removed", sorted(set(old) - set(new))),
                          ("with other roles", sorted(c for c in set(old) & set(new)
                                                      if old[c] != new[c]))):
        if columns:
            reasons.append(f"features {what}: {', '.join(columns)}")
    return "; ".join(reasons) or None


def _text(value) -> str:
    return "none" if value is None else json.dumps(value, sort_keys=True)


def comparable_baseline(store, candidate_id: int,
                        blessed_model_ids: set[int]) -> tuple[int | None, str | None]:
    """(baseline model id or None, why the newest blessed model before the candidate was
    skipped, or None)."""
    older = sorted(i for i in blessed_model_ids if i < candidate_id)
    if not older:
        return None, None
    baseline = older[-1]
    why = contract_difference(model_contract(store, candidate_id), model_contract(store, baseline))
    if why:
        return None, (f"the last blessed model (artifact {baseline}) was trained for another "
                      f"dataset spec ({why}): the change thresholds were not applied")
    return baseline, None


def blessed_model_ids(blessings) -> set[int]:
    """Model ids that ModelBlessing artifacts (MLMD protos) blessed."""
    return {b.custom_properties[names.CURRENT_MODEL_ID].int_value for b in blessings
            if names.BLESSED in b.custom_properties
            and b.custom_properties[names.BLESSED].int_value == 1}
