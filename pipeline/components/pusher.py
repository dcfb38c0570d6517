"""A Pusher whose new model version appears in the serving dir whole, or not at all.

TFX's Pusher copies the model straight into `<serving dir>/<version>/`: a run killed while it
copies leaves a half-written version there. On a local filesystem this Pusher copies into
`<serving dir>.staging/` (same filesystem, outside what a model server watches) and renames the
finished copy into place, which is atomic. Leftovers of an interrupted push are removed before
the next one. (Object stores such as gs:// have no atomic rename: runners for them use TFX's
Pusher, which writes saved_model.pb last so that TF Serving waits for a complete copy.)
"""

import os
import shutil

from tfx import types
from tfx.components import Pusher
from tfx.components.pusher import executor as pusher_executor
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.utils import json_utils, proto_utils

from pipeline import names
from pipeline.cache_keys import keyed_spec

STAGING_SUFFIX = ".staging"


class StagedPusherExecutor(pusher_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX API)
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[names.PUSH_DESTINATION], destination)
        serving_dir = destination.filesystem.base_directory
        staging_dir = serving_dir.rstrip("/") + STAGING_SUFFIX
        shutil.rmtree(staging_dir, ignore_errors=True)  # an interrupted push's leftovers
        destination.filesystem.base_directory = staging_dir
        staged = dict(exec_properties,
                      **{names.PUSH_DESTINATION: proto_utils.proto_to_json(destination)})
        super().Do(input_dict, output_dict, staged)

        pushed = artifact_utils.get_single_instance(output_dict[names.PUSHED_MODEL])
        if pushed.get_int_custom_property(names.PUSHED) != 1:
            return
        version = pushed.get_string_custom_property(names.PUSHED_VERSION)
        os.makedirs(serving_dir, exist_ok=True)
        final = os.path.join(serving_dir, version)
        os.rename(os.path.join(staging_dir, version), final)
        shutil.rmtree(staging_dir, ignore_errors=True)
        pushed.set_string_custom_property(names.PUSHED_DESTINATION, final)


StagedPusherSpec = keyed_spec(standard_component_specs.PusherSpec)


class StagedPusher(Pusher):
    """tfx.components.Pusher with StagedPusherExecutor (filesystem destinations only)."""

    SPEC_CLASS = StagedPusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(StagedPusherExecutor)

    def __init__(self, *, model: types.BaseChannel, model_blessing: types.BaseChannel,
                 push_destination: pusher_pb2.PushDestination) -> None:
        spec = StagedPusherSpec(
            model=model, model_blessing=model_blessing, push_destination=push_destination,
            custom_config=json_utils.dumps(None),
            pushed_model=types.Channel(type=standard_artifacts.PushedModel))
        base_component.BaseComponent.__init__(self, spec=spec)
