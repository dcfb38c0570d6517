"""The span store: what a compiled spec keeps of each span, where no resolver can find it.

Kubeflow Pipelines runs no resolver and TFX's Vertex compiler builds only its latest-artifact
and latest-blessed-model ones, so a compiled spec cannot ask ML Metadata for an older span. Its
DriftValidator and SpanWindow steps keep, under `<pipeline root>/span-store/`
(pipeline_config.SPAN_STORE_DIR), one entry per span:

- `statistics/span-N/FeatureStats.pb`: span N's training statistics, for the drift gate;
- `examples/span-N.json`: the URI of the Examples CsvExampleGen wrote for span N, for the
  window.

This module owns that layout: both steps file and list entries through it alone.
"""

import json
import os
import re

from trainer_module import keys

_PREFIX = "span-"  # span N's entry is `span-N` + the kind's suffix
_RECORD_SUFFIX = ".json"  # an Examples record


def _entry(store: str, span: int, suffix: str = "") -> str:
    return os.path.join(store, f"{_PREFIX}{span}{suffix}")


def _listed(store: str, suffix: str) -> dict[int, str]:
    """Span number → its entry's path, of every `span-N` + `suffix` entry in `store` (local
    or gs://); {} when the store is not there yet."""
    import tensorflow as tf

    if not tf.io.gfile.isdir(store):
        return {}
    entry = re.compile(re.escape(_PREFIX) + r"(\d+)" + re.escape(suffix))
    found = {}
    for name in tf.io.gfile.listdir(store):
        match = entry.fullmatch(name.rstrip("/"))
        if match:
            found[int(match.group(1))] = os.path.join(store, name.rstrip("/"))
    return found


def file_statistics(store: str, span: int, statistics_file: str) -> None:
    """Files a copy of span `span`'s training statistics (`statistics_file`) in `store`."""
    import tensorflow as tf

    folder = _entry(store, span)
    tf.io.gfile.makedirs(folder)
    tf.io.gfile.copy(statistics_file, os.path.join(folder, keys.STATISTICS_FILE),
                     overwrite=True)


def statistics_files(store: str) -> dict[int, str]:
    """Span number → its training statistics file, of every span filed in `store`."""
    import tensorflow as tf

    files = {span: os.path.join(folder, keys.STATISTICS_FILE)
             for span, folder in _listed(store, "").items()}
    return {span: path for span, path in files.items() if tf.io.gfile.exists(path)}


def file_examples(store: str, span: int, uri: str) -> None:
    """Files the record of span `span`'s Examples (their URI, where they stay) in `store`."""
    import tensorflow as tf

    tf.io.gfile.makedirs(store)
    with tf.io.gfile.GFile(_entry(store, span, _RECORD_SUFFIX), "w") as f:
        json.dump({"uri": uri}, f)


def examples_uris(store: str) -> dict[int, str]:
    """Span number → the URI of its Examples, of every span filed in `store`."""
    import tensorflow as tf

    found = {}
    for span, path in _listed(store, _RECORD_SUFFIX).items():
        with tf.io.gfile.GFile(path) as f:
            found[span] = json.load(f)["uri"]
    return found
