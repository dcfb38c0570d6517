"""SpanWindow: a window of spans' Examples as one artifact, where no resolver can find them.

With the local runner, the window's older spans come from ML Metadata through a resolver
(span_resolver.py). A compiled Kubeflow or Vertex spec runs no such resolver (KFP runs none;
TFX's Vertex compiler builds only latest-artifact and latest-blessed-model ones), so this step
keeps an index of the Examples each run's CsvExampleGen wrote, one small record per span in
the span store (store.py), where the Examples themselves stay. It files this span's record,
then copies the split files of the newest `window_spans` spans filed (this one included) into
its own Examples, which Transform reads.
The older spans' CsvExampleGen and StatisticsGen do not run again; their files are copied.

A pipeline's first runs have fewer spans filed than the window holds: the step then trains on
those, and its log and the artifact's `window` property name them.
"""

import os

import tensorflow as tf
from absl import logging
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts

from pipeline.spans import store as span_store
from pipeline.spans.span_resolver import span_of
from trainer_module import keys

WINDOW_PROPERTY = "window"  # the spans the window's Examples hold, comma-separated


@component
def SpanWindow(
    examples: InputArtifact[standard_artifacts.Examples],
    window: OutputArtifact[standard_artifacts.Examples],
    store: Parameter[str],
    window_spans: Parameter[int],
    code_version: Parameter[str] = "",
) -> None:
    """Files this span's Examples in `store` and writes the window's split files to `window`.

    store: the folder of the span records.
    window_spans: how many spans the window holds, this one and those before it.
    code_version: the step's code hash (pipeline/cache_keys.py).
    """
    del code_version
    span = span_of(examples)
    span_store.file_examples(store, span, examples.uri)
    filed = span_store.examples_uris(store)
    chosen = sorted(s for s in filed if s <= span)[-window_spans:]
    if len(chosen) < window_spans:
        logging.warning("The window holds %d span(s) (%s), not %d: no other span is filed in "
                        "%s yet (each run files its own)", len(chosen), chosen, window_spans,
                        store)
    window.split_names = examples.split_names
    for key, value in examples.mlmd_artifact.custom_properties.items():
        window.mlmd_artifact.custom_properties[key].CopyFrom(value)
    window.set_string_custom_property(WINDOW_PROPERTY, ",".join(map(str, chosen)))
    for split in artifact_utils.decode_split_names(examples.split_names):
        target = artifact_utils.get_split_uri([window], split)
        tf.io.gfile.makedirs(target)
        for number in chosen:
            source = os.path.join(filed[number], keys.split_dir(split))
            for name in tf.io.gfile.listdir(source):
                tf.io.gfile.copy(os.path.join(source, name),
                                 os.path.join(target, f"span-{number}-{name}"), overwrite=True)
    logging.info("Window of span(s) %s: Examples in %s", chosen, window.uri)
