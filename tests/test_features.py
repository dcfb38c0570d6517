"""Shipped datasets: each spec covers its schema, its label stays out of serving, its CSV
passes the runner's check."""

import pytest

from dataset_rows import PENGUINS, TAXI
from pipeline import csv_check
from pipeline.pipeline_config import configure, label_check


@pytest.mark.parametrize("dataset", [TAXI, PENGUINS], ids=["taxi", "penguins"])
def test_spec_covers_the_schema_exactly(dataset):
    schema_columns = [f.name for f in dataset.schema.feature]
    assert set(dataset.spec.columns()) == set(schema_columns)


@pytest.mark.parametrize("dataset", [TAXI, PENGUINS], ids=["taxi", "penguins"])
def test_label_and_its_sources_are_absent_at_serving_time(dataset):
    for feature in dataset.schema.feature:
        in_serving = "SERVING" not in feature.not_in_environment
        assert in_serving == (feature.name not in dataset.spec.label_sources), feature.name


@pytest.mark.parametrize("dataset, rows", [(TAXI, 15002), (PENGUINS, 344)],
                         ids=["taxi", "penguins"])
def test_shipped_csv_passes_the_runners_check(dataset, rows):
    config = configure(dataset=dataset.dataset)
    csv_check.check_data_dir(config.data_dir, [f.name for f in dataset.schema.feature],
                             config.schema_path, label_check(dataset.spec, dataset.schema))
    assert len(dataset.read_rows()) == rows


def test_transformed_outputs_are_named_once():
    outputs = [o.name for o in TAXI.spec.model_outputs()]
    assert len(outputs) == len(set(outputs))
    assert TAXI.spec.label_key not in outputs


def test_the_three_task_datasets_cover_every_role_on_every_type_it_reads(tmp_path):
    """The per-task tests (XLA compile, 8 replicas, bf16 export) then exercise every kind."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    from dataset_rows import fare_dataset
    from trainer_module.features import KINDS

    covered = set()
    for dataset in (TAXI, PENGUINS, fare_dataset(str(tmp_path))):
        types = {f.name: schema_pb2.FeatureType.Name(f.type) for f in dataset.schema.feature}
        covered |= {(f.role, types[f.column]) for f in dataset.spec.features}
    expected = {(name, t) for name, kind in KINDS.items() if name != "ignore"
                for t in kind.types}
    assert expected <= covered, expected - covered
