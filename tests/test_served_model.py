"""The Kubeflow Pipelines stand-in for TFX's resolvers (pipeline/components/served_model.py), on
disk."""


def test_served_model_picks_the_newest_complete_version(tmp_path):
    """The KFP baseline: the newest version folder the Pusher finished (saved_model.pb
    present), by push time; a half-copied or foreign folder is no model."""
    from tfx.types import standard_artifacts

    from pipeline.components import served_model

    serving = tmp_path / "serving"
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "none")
    assert served_model.copy_newest(str(serving), model) is None  # nothing pushed yet
    assert model.get_int_custom_property("has_model") == 0
    for version, complete in (("1700000000", True), ("1800000000", True),
                              ("1900000000", False), ("notes", True)):
        (serving / version / "variables").mkdir(parents=True)
        (serving / version / "variables" / "v").write_text(version)
        if complete:
            (serving / version / "saved_model.pb").write_text(version)
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "baseline")
    assert served_model.copy_newest(str(serving), model) == str(serving / "1800000000")
    assert model.get_int_custom_property("has_model") == 1
    copied = tmp_path / "baseline" / "Format-Serving"
    assert (copied / "saved_model.pb").read_text() == "1800000000"
    assert (copied / "variables" / "v").read_text() == "1800000000"

    from trainer_module.executor import models_held

    empty = standard_artifacts.Model()
    empty.set_int_custom_property("has_model", 0)
    resolved = standard_artifacts.Model()  # a resolver's Model carries no such property
    assert models_held([empty, model, resolved]) == [model, resolved]


def test_evaluator_decodes_only_the_columns_its_slices_read(tmp_path):
    """The Evaluator's schema keeps the slice columns only (the models read serialized
    examples); the column a per-slice threshold names counts too."""
    import tensorflow_model_analysis as tfma
    from tfx.types import standard_artifacts, standard_component_specs
    from tfx.utils import io_utils, proto_utils

    from pipeline import dag
    from pipeline.components import evaluator
    from pipeline.datasets import load_spec

    spec, schema = load_spec("taxi")
    config = dag.eval_config(spec)
    assert evaluator.sliced_columns(config) == {"payment_type"}
    config.metrics_specs[0].metrics[1].per_slice_thresholds[0].slicing_specs.append(
        tfma.SlicingSpec(feature_values={"company": "Flash Cab"}))
    assert evaluator.sliced_columns(config) == {"payment_type", "company"}

    (tmp_path / "schema").mkdir()
    io_utils.write_pbtxt_file(str(tmp_path / "schema" / "schema.pbtxt"), schema)
    artifact = standard_artifacts.Schema()
    artifact.uri = str(tmp_path / "schema")
    executor = evaluator.EvaluatorExecutor(
        evaluator.EvaluatorExecutor.Context(tmp_dir=str(tmp_path / "tmp"), unique_id="1"))
    sliced = executor._sliced_schema(
        {standard_component_specs.SCHEMA_KEY: [artifact]},
        {standard_component_specs.EVAL_CONFIG_KEY: proto_utils.proto_to_json(config)})
    read = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(sliced.uri))
    assert [f.name for f in read.feature] == [f.name for f in schema.feature
                                              if f.name in {"payment_type", "company"}]
    assert len(schema.feature) > 2
