"""The local Pusher adds a model version to the serving dir whole or not at all."""

import os
import uuid

import pytest
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts
from tfx.utils import io_utils, proto_utils

from pipeline.components.pusher import STAGING_SUFFIX, StagedPusherExecutor


def _model(tmp_path) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "trainer" / "model")
    serving = os.path.join(model.uri, "Format-Serving")
    os.makedirs(os.path.join(serving, "variables"))
    for name, size in (("saved_model.pb", 2000), ("variables/variables.index", 100),
                       ("variables/variables.data-00000-of-00001", 50_000)):
        with open(os.path.join(serving, name), "wb") as f:
            f.write(os.urandom(size))
    return model


def _push(tmp_path, model: standard_artifacts.Model, blessed: bool = True):
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / "blessing")
    blessing.set_int_custom_property("blessed", int(blessed))
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed" / uuid.uuid4().hex)
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(
        base_directory=str(tmp_path / "serving")))
    StagedPusherExecutor().Do(
        {"model": [model], "model_blessing": [blessing]},
        {"pushed_model": [pushed]},
        {"push_destination": proto_utils.proto_to_json(destination)})
    return pushed


def _files(directory) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


def test_a_blessed_model_lands_whole_in_the_serving_dir(tmp_path):
    pushed = _push(tmp_path, _model(tmp_path))
    serving = tmp_path / "serving"
    [version] = os.listdir(serving)
    assert _files(serving / version) == [
        "saved_model.pb", "variables/variables.data-00000-of-00001", "variables/variables.index"]
    assert pushed.get_string_custom_property("pushed_destination") == str(serving / version)
    assert not os.path.exists(str(serving) + STAGING_SUFFIX)


def test_an_unblessed_model_touches_nothing(tmp_path):
    pushed = _push(tmp_path, _model(tmp_path), blessed=False)
    assert pushed.get_int_custom_property("pushed") == 0
    assert not (tmp_path / "serving").exists()


def test_a_push_that_dies_mid_copy_leaves_the_serving_dir_as_it_was(tmp_path, monkeypatch):
    serving = tmp_path / "serving"
    (serving / "100").mkdir(parents=True)
    (serving / "100" / "saved_model.pb").write_bytes(b"the served model")

    def crash(*args, **kwargs):  # the process dies while the copy is half done
        raise SystemExit("killed")

    model = _model(tmp_path)
    monkeypatch.setattr(io_utils, "copy_file", crash)
    with pytest.raises(SystemExit):
        _push(tmp_path, model)
    assert os.listdir(serving) == ["100"]  # no half-written version next to the served one
    leftovers = str(serving) + STAGING_SUFFIX
    assert os.listdir(leftovers)  # the partial copy sits in staging, outside the serving dir

    monkeypatch.undo()  # the next run: the push completes and clears the leftovers
    _push(tmp_path, model)
    assert len(os.listdir(serving)) == 2 and "100" in os.listdir(serving)
    assert not os.path.exists(leftovers)
