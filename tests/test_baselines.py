"""When a blessed model is a fair baseline: same label, same features
(pipeline/components/baselines.py)."""

import copy

from dataset_rows import PENGUINS, TAXI
from pipeline.components.baselines import contract_difference


def _contract(spec) -> dict:
    values = spec.to_custom_config()["dataset_spec"]
    return {"label": values["label"], "features": values["features"]}


def test_the_same_spec_is_comparable_and_threshold_edits_do_not_matter():
    assert contract_difference(_contract(TAXI.spec), _contract(TAXI.spec)) is None


def test_each_change_of_label_or_features_is_named():
    taxi = _contract(TAXI.spec)
    rule = copy.deepcopy(taxi)
    rule["label"]["rule"]["times"] = 0.3
    assert contract_difference(rule, taxi).startswith("label rule ")
    assert "0.3" in contract_difference(rule, taxi)
    more = copy.deepcopy(taxi)
    more["features"]["tips_per_mile"] = [{"role": "zscore"}]
    del more["features"]["company"]
    assert contract_difference(more, taxi) == ("features added: tips_per_mile; features "
                                               "removed: company")
    other = contract_difference(_contract(PENGUINS.spec), taxi)
    assert "label task \"binary\" → \"multiclass\"" in other
    assert contract_difference(taxi, None) == "no dataset spec is recorded for the baseline"
