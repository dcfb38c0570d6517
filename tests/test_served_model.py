"""The Kubeflow Pipelines stand-in for TFX's resolvers (pipeline/served_model.py), on disk."""


def test_served_model_picks_the_newest_complete_version(tmp_path):
    """The KFP baseline: the newest version folder the Pusher finished (saved_model.pb
    present), by push time; a half-copied or foreign folder is no model."""
    from tfx.types import standard_artifacts

    from pipeline import served_model

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
